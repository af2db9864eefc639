//! `Core::open` on the committed golden core: file paths resolve inside the core, and the
//! manifest size limit is inclusive.

use std::path::{Path, PathBuf};

use gnomon_core::{
    errors::CoreError,
    format::{Core, MANIFEST_FILE, MAX_MANIFEST_BYTES},
};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/golden/v1")
}

#[test]
fn files_resolve_inside_the_core() {
    let core = Core::open(&golden_dir()).unwrap();
    let shard = &core.manifest().shards[0].file;
    assert_eq!(core.path_of(shard), golden_dir().join(shard));
    assert!(core.path_of(shard).is_file());
}

/// A manifest of exactly the limit is read (and then fails to parse); one byte more is
/// refused unread.
#[test]
fn the_manifest_size_limit_is_inclusive() {
    let open_with_size = |size: u64| {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join(MANIFEST_FILE)).unwrap();
        file.set_len(size).unwrap();
        Core::open(dir.path()).unwrap_err()
    };
    assert!(matches!(open_with_size(MAX_MANIFEST_BYTES), CoreError::Parse { .. }));
    assert!(matches!(open_with_size(MAX_MANIFEST_BYTES + 1), CoreError::ManifestTooLarge { .. }));
}
