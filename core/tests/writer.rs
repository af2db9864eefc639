//! `CoreWriter::write_chunks`, which the exporter uses to snapshot an arena a chunk at a
//! time, and the names node kinds go by in errors.

use gnomon_core::format::{hash_hex, CoreWriter, NodeOp};

#[test]
fn chunks_are_written_in_order_and_hashed_as_a_whole() {
    let dir = tempfile::tempdir().unwrap();
    let source: Vec<u8> = (0..10u8).collect();
    let mut asked = Vec::new();
    let writer = CoreWriter::create(dir.path()).unwrap();
    let digest = writer
        .write_chunks::<gnomon_core::errors::CoreError>("shards/0000.bin", 10, 4, |offset, len| {
            asked.push((offset, len));
            Ok(source[offset as usize..(offset + len) as usize].to_vec())
        })
        .unwrap();
    assert_eq!(asked, [(0, 4), (4, 4), (8, 2)]);
    assert_eq!(std::fs::read(dir.path().join("shards/0000.bin")).unwrap(), source);
    assert_eq!(digest, hash_hex(&source[..]).unwrap());
}

#[test]
fn node_kinds_have_the_names_errors_use() {
    let kinds = [NodeOp::Empty, NodeOp::EventRecord { event: "e".into() }, NodeOp::EventWait { event: "e".into() }]
        .map(|op| op.kind());
    assert_eq!(kinds, ["empty", "event-record", "event-wait"]);
}
