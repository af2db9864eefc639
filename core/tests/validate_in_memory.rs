//! `validate::manifest` on its own, as an exporter calls it before writing a core (the
//! reader on disk probes the format tag first, so these rules are met here alone).

use gnomon_core::{errors::ValidationError, format::Manifest, validate};

fn golden() -> Manifest {
    serde_json::from_str(include_str!("../../fixtures/golden/v1/manifest.json")).expect("the golden manifest parses")
}

#[test]
fn the_format_tag_is_checked_in_memory_too() {
    assert_eq!(validate::manifest(&golden()), Ok(()));
    let mut future = golden();
    future.format.version = 99;
    assert!(matches!(validate::manifest(&future), Err(ValidationError::UnsupportedVersion { found: 99, .. })));
    let mut other = golden();
    other.format.name = "onnx".into();
    assert!(matches!(validate::manifest(&other), Err(ValidationError::FormatName { .. })));
}
