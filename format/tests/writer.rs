//! `shard_writer::write_shards`, which the exporter uses to snapshot an arena: every file
//! written whole at its place whatever thread wrote which slot, a v3 digest per chunk
//! (the last one shorter, none for an empty file), and the first error returned without a
//! hang; `digest::sha256_each`, which replay digests outputs with; and the names node
//! kinds go by in errors.

use std::path::Path;

use gnomon_format::{
    digest::{chunk_digests, sha256_each},
    errors::CoreError,
    hash_hex,
    shard_writer::{write_shards, ShardFile, Staging},
    NodeOp,
};

const CHUNK: u64 = 4096;

/// Files of these lengths, each byte a function of its file and place.
fn sources(lens: &[u64]) -> Vec<Vec<u8>> {
    lens.iter().enumerate().map(|(f, &len)| (0..len).map(|i| ((i * 7 + f as u64 * 13) % 251) as u8).collect()).collect()
}

fn files(dir: &Path, sources: &[Vec<u8>]) -> Vec<ShardFile> {
    let path = |i| dir.join(format!("shards/{i:04}.bin"));
    sources.iter().enumerate().map(|(i, s)| ShardFile { path: path(i), len: s.len() as u64 }).collect()
}

fn staging(slots: &mut [Vec<u8>], writers: usize) -> Staging<'_> {
    Staging { chunk: CHUNK, slots: slots.iter_mut().map(Vec::as_mut_slice).collect(), writers }
}

#[test]
fn every_file_is_written_whole_with_a_digest_per_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let sources = sources(&[5 * CHUNK + 17, 0, 2 * CHUNK, 3]);
    let files = files(dir.path(), &sources);
    let mut slots = vec![vec![0u8; 2 * CHUNK as usize]; 3];
    let mut advanced = 0;
    let fill = |f: usize, at: u64, slot: &mut [u8]| {
        slot.copy_from_slice(&sources[f][at as usize..at as usize + slot.len()]);
        Ok::<_, CoreError>(())
    };
    let (chunks, stages) = write_shards(&files, staging(&mut slots, 4), fill, |n| advanced += n).unwrap();
    assert_eq!(advanced, sources.iter().map(|s| s.len() as u64).sum::<u64>());
    assert_eq!(stages.writers, 4);
    for ((file, source), chunks) in files.iter().zip(&sources).zip(&chunks) {
        assert_eq!(&std::fs::read(&file.path).unwrap(), source, "{}", file.path.display());
        assert_eq!(chunks, &chunk_digests(source, CHUNK), "{}", file.path.display());
    }
    assert_eq!(chunks.iter().map(|c| c.xxh3_128.len()).collect::<Vec<_>>(), [6, 0, 2, 1]);
}

/// A slot that cannot be filled stops the work: the error comes back, later slots are
/// never asked for, and no thread is left waiting.
#[test]
fn the_first_error_of_a_fill_is_returned() {
    let dir = tempfile::tempdir().unwrap();
    let sources = sources(&[8 * CHUNK]);
    let mut slots = vec![vec![0u8; CHUNK as usize]; 2];
    let mut asked = Vec::new();
    let fill = |_: usize, at: u64, _: &mut [u8]| {
        asked.push(at);
        if at == 2 * CHUNK {
            return Err(CoreError::Write { path: "device".into(), source: std::io::Error::other("copy failed") });
        }
        Ok(())
    };
    let result = write_shards(&files(dir.path(), &sources), staging(&mut slots, 2), fill, |_| {});
    assert!(matches!(result, Err(CoreError::Write { .. })), "{result:?}");
    assert_eq!(asked, [0, CHUNK, 2 * CHUNK]);
}

/// A file that cannot be created (its folder is a file) is named in the error.
#[test]
fn a_file_that_cannot_be_written_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shards"), b"not a folder").unwrap();
    let sources = sources(&[CHUNK]);
    let mut slots = vec![vec![0u8; CHUNK as usize]];
    let result = write_shards(&files(dir.path(), &sources), staging(&mut slots, 1), |_, _, _| Ok(()), |_| {});
    let Err(CoreError::Write { path, .. }) = result else { panic!("{result:?}") };
    assert!(path.ends_with("shards/0000.bin"), "{}", path.display());
}

/// Digests taken on many threads come back in the outputs' order, each the SHA-256 of
/// its own output, however many outputs there are for the threads.
#[test]
fn outputs_digested_together_keep_their_order() {
    // 17 MiB in all, enough to be shared between threads, most of it in two outputs.
    let mut lens = vec![0, 1, 9 << 20, 17, CHUNK, 2, 9, 40, 5, 1, 3, 7, 11, 13, 64, 128, 256, 33, 1000];
    lens.push((8 << 20) + 3);
    let outputs = sources(&lens);
    let slices: Vec<&[u8]> = outputs.iter().map(Vec::as_slice).collect();
    let one_by_one: Vec<String> = slices.iter().map(|s| hash_hex(*s).unwrap()).collect();
    assert_eq!(sha256_each(&slices), one_by_one);
    assert_eq!(sha256_each(&slices[3..]), one_by_one[3..], "fewer bytes than are shared out");
    assert!(sha256_each(&[]).is_empty());
}

#[test]
fn node_kinds_have_the_names_errors_use() {
    let kinds = [NodeOp::Empty, NodeOp::EventRecord { event: "e".into() }, NodeOp::EventWait { event: "e".into() }]
        .map(|op| op.kind());
    assert_eq!(kinds, ["empty", "event-record", "event-wait"]);
}
