//! `Core::open` on the committed golden core: file paths resolve inside the core, and the
//! manifest size limit is inclusive.

use std::path::{Path, PathBuf};

use gnomon_format::{errors::CoreError, Core, MANIFEST_FILE, MAX_MANIFEST_BYTES};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/golden/v1")
}

#[test]
fn files_open_inside_the_core() {
    let core = Core::open(&golden_dir()).unwrap();
    let shard = &core.manifest().shards[0].file;
    let opened = core.open_file(shard, "shard 0").unwrap().metadata().unwrap();
    assert_eq!(opened.len(), std::fs::metadata(golden_dir().join(shard)).unwrap().len());
}

/// Opening says where its time went, part by part, within the time it took; a core
/// validated from a manifest already read spent none reading or parsing it.
#[test]
fn opening_times_its_parts() {
    let started = std::time::Instant::now();
    let core = Core::open(&golden_dir()).unwrap();
    let wall = started.elapsed().as_secs_f64();
    let o = core.opening();
    let parts = [o.read_s, o.parse_s, o.rules_s, o.files_s];
    assert!(parts.iter().all(|&s| s > 0.0), "{o:?}");
    assert!(parts.iter().sum::<f64>() <= wall, "{o:?} in {wall} s");
    let manifest = gnomon_format::read_manifest(&golden_dir()).unwrap();
    let o = Core::validated(&golden_dir(), manifest).unwrap().opening();
    assert_eq!((o.read_s, o.parse_s), (0.0, 0.0));
    assert!(o.rules_s > 0.0 && o.files_s > 0.0, "{o:?}");
}

/// A copy of the golden core in a scratch directory.
fn golden_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["modules", "shards"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    for file in [MANIFEST_FILE, "modules/m0.ptx", "shards/000.bin", "shards/001.bin"] {
        std::fs::copy(golden_dir().join(file), dir.path().join(file)).unwrap();
    }
    dir
}

/// A shard replaced by a link to an endless device between the look and the read is
/// what a path check followed by an open would miss; the open itself refuses the link,
/// and a file is hashed to exactly its declared length, never to its end.
#[test]
fn a_link_to_an_endless_device_is_refused_by_the_open_itself() {
    use gnomon_format::errors::ValidationError;
    let dir = golden_copy();
    let shard = dir.path().join("shards/001.bin");
    std::fs::remove_file(&shard).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &shard).unwrap();
    let refused = Core::open(dir.path()).unwrap_err();
    assert!(matches!(refused, CoreError::Invalid(ValidationError::PathThroughLink { .. })), "{refused}");
    let core_dir = golden_dir();
    let opened = gnomon_format::open_in_core(&core_dir, "shards/000.bin", "shard 0").unwrap();
    let len = opened.metadata().unwrap().len();
    let endless = std::io::Read::chain(opened, std::io::repeat(7));
    let whole = gnomon_format::hash_exactly(endless, len).unwrap();
    let file = std::fs::read(core_dir.join("shards/000.bin")).unwrap();
    assert_eq!(whole, gnomon_format::hash_hex(file.as_slice()).unwrap());
    let short = gnomon_format::hash_exactly(file.as_slice(), len + 1).unwrap_err();
    assert_eq!(short.to_string(), format!("it ended after {len} of {} bytes", len + 1));
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
