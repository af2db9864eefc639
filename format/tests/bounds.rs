//! Where each rule refuses, held from the inside: every core at a rule's edge
//! (`gnomon_fixtures::bounds`) is accepted and reads back as written, and a module's image
//! is the file's own bytes, kept once for an upload and read again otherwise.

use gnomon_fixtures::{bounds, sample::CoreDraft};
use gnomon_format::Core;

#[test]
fn every_core_at_a_rules_edge_is_accepted_as_written() {
    let root = tempfile::tempdir().unwrap();
    for (name, draft) in bounds::all() {
        let dir = root.path().join(&name);
        draft.write(&dir).unwrap();
        let core = Core::open(&dir).unwrap_or_else(|e| panic!("{name}: refused: {e}"));
        assert!(*core.manifest() == draft.manifest, "{name}: reads back otherwise than written");
    }
}

#[test]
fn a_module_image_is_the_files_bytes_kept_once_for_an_upload() {
    let root = tempfile::tempdir().unwrap();
    let draft = CoreDraft::sample();
    draft.write(root.path()).unwrap();
    let core = Core::open(root.path()).unwrap();
    let file = std::fs::read(root.path().join(&core.manifest().modules[0].file)).unwrap();
    // Opened for anything but an upload, the core keeps no image: each is read again.
    for _ in 0..2 {
        assert_eq!(core.image(0).unwrap(), file);
    }
    assert!(!file.is_empty() && core.take_image(0).is_none());
    // Opened for an upload, it keeps the image validation hashed, handed out once.
    let core = Core::open_for_upload(root.path()).unwrap();
    assert_eq!(core.take_image(0), Some(file.clone()));
    assert_eq!((core.take_image(0), core.image(0).unwrap()), (None, file));
}
