//! `gnomon validate` needs no GPU: the golden core is valid with its account, a corrupt
//! copy is refused naming the rule it breaks, and a missing core is unreadable.

use std::{path::Path, process::Command};

use gnomon_reports::exit_codes;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/golden/v1");

fn validate(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gnomon")).arg("validate").args(args).output().expect("gnomon runs");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn copy_golden(to: &Path) {
    for sub in ["", "modules", "shards"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
    }
    for file in ["manifest.json", "modules/m0.ptx", "shards/000.bin", "shards/001.bin"] {
        std::fs::copy(Path::new(GOLDEN).join(file), to.join(file)).unwrap();
    }
}

/// A copy of the golden core whose manifest `edit` changed.
fn golden_edited(edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_golden(tmp.path());
    let path = tmp.path().join("manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut manifest);
    std::fs::write(&path, manifest.to_string()).unwrap();
    tmp
}

#[test]
fn the_golden_core_is_valid_with_its_account() {
    let (code, stdout) = validate(&[GOLDEN]);
    assert_eq!(code, Some(exit_codes::SUCCESS), "{stdout}");
    insta::assert_snapshot!(stdout.replace(GOLDEN, "GOLDEN"));
}

#[test]
fn the_golden_v2_core_is_valid_and_its_account_names_what_replay_must_set() {
    let golden_v2 = GOLDEN.replace("v1", "v2");
    let (code, stdout) = validate(&[&golden_v2]);
    assert_eq!(code, Some(exit_codes::SUCCESS), "{stdout}");
    insta::assert_snapshot!(stdout.replace(&golden_v2, "GOLDEN_V2"));
}

#[test]
fn the_account_as_json_says_what_the_core_needs() {
    let (code, stdout) = validate(&["--format", "json", GOLDEN]);
    assert_eq!(code, Some(exit_codes::SUCCESS));
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(line["outcome"], "valid");
    assert_eq!(line["account"]["arch"], "sm_90");
    assert_eq!(line["account"]["flags-used"], serde_json::json!([1]));
    assert_eq!(line["account"]["nodes"], 4);
}

#[test]
fn a_corrupt_copy_is_refused_naming_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    copy_golden(tmp.path());
    let shard = tmp.path().join("shards/001.bin");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&shard, bytes).unwrap();
    let (code, stdout) = validate(&[GOLDEN, tmp.path().to_str().unwrap()]);
    assert_eq!(code, Some(exit_codes::CASES_FAILED), "{stdout}");
    assert!(stdout.contains("refused: validate core: shard 1 file `shards/001.bin` has SHA-256"), "{stdout}");
}

#[test]
fn a_missing_core_is_unreadable() {
    let (code, stdout) = validate(&["/no/such/core", GOLDEN]);
    assert_eq!(code, Some(exit_codes::USAGE), "{stdout}");
    assert!(stdout.contains("/no/such/core: unreadable"), "{stdout}");
}

/// A name in a manifest is data: escape sequences and newlines in it are written out, so a
/// refused core can never show "valid" on a terminal.
#[test]
fn a_hostile_name_cannot_make_a_refused_core_look_valid() {
    let tmp = golden_edited(|manifest| manifest["expectations"][0]["template"] = "x\u{1b}[2K\r\ncore: valid".into());
    let (code, stdout) = validate(&[tmp.path().to_str().unwrap()]);
    assert_eq!(code, Some(exit_codes::CASES_FAILED), "{stdout}");
    assert!(!stdout.contains('\u{1b}') && !stdout.contains('\r'), "{stdout:?}");
    assert_eq!(stdout.trim_end().lines().count(), 1, "one line for one refused core: {stdout:?}");
    assert!(stdout.contains(r"x\u{1b}[2K\r\ncore: valid"), "{stdout:?}");
}

/// The same for a valid core: every line of its account is escaped, so a device or
/// producer name cannot add a line (here one that would announce a second core) or move
/// the cursor.
#[test]
fn a_hostile_name_in_a_valid_core_stays_inside_its_account_line() {
    let tmp = golden_edited(|manifest| {
        manifest["context"]["device-name"] = "H200\u{1b}[2K\r\n/other/core: refused".into();
        manifest["context"]["producer"]["name"] = "exporter\u{7}\n".into();
    });
    let (code, stdout) = validate(&[tmp.path().to_str().unwrap()]);
    assert_eq!(code, Some(exit_codes::SUCCESS), "{stdout}");
    assert!(!stdout.contains('\u{1b}') && !stdout.contains('\r') && !stdout.contains('\u{7}'), "{stdout:?}");
    let (_, golden) = validate(&[GOLDEN]);
    assert_eq!(stdout.lines().count(), golden.lines().count(), "as many lines as the golden account: {stdout}");
    assert!(stdout.contains(r"made by exporter\u{7}\n 1 on H200\u{1b}[2K\r\n/other/core: refused"), "{stdout}");
}
