//! `CoreWriter::write_chunks`, which the exporter uses to snapshot an arena a chunk at a
//! time, the digests a shard gets as it is written, and the names node kinds go by in
//! errors.

use gnomon_format::{
    digest::{chunk_digests, ShardDigester, CHUNK_BYTES},
    hash_hex, CoreWriter, NodeOp, Shard,
};

fn shard() -> Shard {
    Shard { index: 0, offset: 0, size: 0, file: "shards/0000.bin".into(), sha256: None, chunks: None }
}

/// Writes `source` through `write_chunks` in 4-byte pieces and returns the shard's digests.
fn written(source: &[u8], version: u32) -> (Vec<(u64, u64)>, Shard) {
    let dir = tempfile::tempdir().unwrap();
    let (mut asked, mut digester, mut shard) = (Vec::new(), ShardDigester::new(version), shard());
    let writer = CoreWriter::create(dir.path()).unwrap();
    writer
        .write_chunks::<gnomon_format::errors::CoreError>(
            &shard.file,
            source.len() as u64,
            4,
            &mut digester,
            |at, len| {
                asked.push((at, len));
                Ok(source[at as usize..(at + len) as usize].to_vec())
            },
        )
        .unwrap();
    assert_eq!(std::fs::read(dir.path().join(&shard.file)).unwrap(), source);
    digester.finish(&mut shard);
    (asked, shard)
}

#[test]
fn chunks_are_written_in_order_and_a_v2_shard_is_hashed_as_a_whole() {
    let source: Vec<u8> = (0..10u8).collect();
    let (asked, shard) = written(&source, 2);
    assert_eq!(asked, [(0, 4), (4, 4), (8, 2)]);
    assert_eq!((shard.sha256, shard.chunks), (Some(hash_hex(&source[..]).unwrap()), None));
}

/// However the writes fall, a v3 shard's digests are those of its fixed-size chunks,
/// the last one shorter; an empty file has none.
#[test]
fn a_v3_shard_has_a_digest_per_chunk_whatever_the_writes() {
    let source: Vec<u8> = (0..CHUNK_BYTES * 2 + 5).map(|i| (i % 251) as u8).collect();
    let expected = chunk_digests(&source, CHUNK_BYTES);
    let each: Vec<String> =
        source.chunks(CHUNK_BYTES as usize).map(|c| format!("{:032x}", xxhash_rust::xxh3::xxh3_128(c))).collect();
    assert_eq!(expected.xxh3_128, each, "each chunk hashed by itself");
    assert_eq!(expected.xxh3_128.len(), 3);
    let mut digester = ShardDigester::new(3);
    for piece in source.chunks(3_000_017) {
        digester.update(piece);
    }
    let mut shard = shard();
    digester.finish(&mut shard);
    assert_eq!((shard.sha256, shard.chunks), (None, Some(expected)));
    let (_, empty) = written(&[], 3);
    assert_eq!(empty.chunks.map(|c| c.xxh3_128.len()), Some(0));
}

#[test]
fn node_kinds_have_the_names_errors_use() {
    let kinds = [NodeOp::Empty, NodeOp::EventRecord { event: "e".into() }, NodeOp::EventWait { event: "e".into() }]
        .map(|op| op.kind());
    assert_eq!(kinds, ["empty", "event-record", "event-wait"]);
}
