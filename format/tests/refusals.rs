//! Every rule that refuses a core, held at the format's own layer: each corruption of the
//! sample core is refused with its own error, and the exact texts are a snapshot (they
//! are what an outside exporter reads when its core is refused).

use gnomon_fixtures::corruptions::corruptions;

#[test]
fn every_corruption_is_refused_with_its_error() {
    let root = tempfile::tempdir().unwrap();
    for c in corruptions() {
        match c.open(&root.path().join(c.slug)) {
            Ok(_) => panic!("{}: accepted", c.slug),
            Err(e) => assert!((c.expected)(&e), "{}: refused with another error: {e}", c.slug),
        }
    }
}

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
