//! The exact text of every validation refusal, held as a snapshot: these messages are
//! what an outside exporter reads when its core is refused.

use gnomon_cases::cpu::manifest::corruptions;

#[test]
fn validation_error_texts() {
    let root = tempfile::tempdir().unwrap();
    let lines: Vec<String> = corruptions()
        .iter()
        .map(|c| {
            let case_root = root.path().join(c.slug);
            let err = c.open(&case_root).expect_err(c.slug);
            let text = err.to_string().replace(&case_root.display().to_string(), "[ROOT]");
            format!("{}: {text}", c.slug)
        })
        .collect();
    insta::assert_snapshot!(lines.join("\n"));
}
