//! What a shard file holds: the whole shard in v1 (the bytes between buffers too), only the
//! stored buffers' bytes in v2.

use gnomon_format::{BufferContents, Manifest};

fn golden(version: u32) -> Manifest {
    let text = match version {
        1 => include_str!("../../fixtures/golden/v1/manifest.json"),
        _ => include_str!("../../fixtures/golden/v2/manifest.json"),
    };
    serde_json::from_str(text).expect("the golden manifest parses")
}

#[test]
fn a_v1_shard_file_holds_the_whole_shard_even_between_buffers() {
    let mut v1 = golden(1);
    v1.buffers.pop(); // leaves the last granule of shard 1 in no buffer
    let shard = v1.shards[1].clone();
    assert_eq!(v1.stored_ranges(&shard), [shard.offset..shard.offset + shard.size]);
}

#[test]
fn a_v2_shard_file_holds_only_stored_buffers() {
    let mut v2 = golden(2);
    let shard = v2.shards[1].clone();
    // Buffer 2 (`w`) is stored; buffer 3 (`tmp`) is undefined.
    let w = &v2.buffers[2];
    assert_eq!(v2.stored_ranges(&shard), [w.offset..w.offset + w.size]);
    v2.buffers[3].contents = BufferContents::Stored;
    assert_eq!(v2.stored_len(&shard), shard.size);
}

/// The pieces verified by themselves: a v2 file is one piece; a v3 file one per chunk,
/// the last one shorter; a shard whose digest count does not fit its stored length (which
/// validation refuses) gives none, rather than ranges past its end.
#[test]
fn pieces_cover_each_file_once_and_never_past_its_end() {
    use gnomon_format::digest::{chunk_digests, pieces};
    let v2 = golden(2);
    let whole: Vec<_> = pieces(&v2).iter().map(|p| (p.shard.index, p.bytes.clone(), p.chunk)).collect();
    let lens: Vec<u64> = v2.shards.iter().map(|s| v2.stored_len(s)).collect();
    assert_eq!(whole, [(0, 0..lens[0], None), (1, 0..lens[1], None)]);
    let mut v3 = golden(2);
    v3.format.version = 3;
    for (s, len) in v3.shards.iter_mut().zip(&lens) {
        // Not a size validation allows, so that the golden's 4 KiB shards span chunks.
        (s.sha256, s.chunks) = (None, Some(chunk_digests(&vec![0u8; *len as usize], 1000)));
    }
    let chunked: Vec<_> = pieces(&v3).iter().filter(|p| p.shard.index == 1).map(|p| p.bytes.clone()).collect();
    assert_eq!(chunked, [0..1000, 1000..2000, 2000..3000, 3000..4000, 4000..lens[1]]);
    v3.shards[1].chunks.as_mut().unwrap().xxh3_128.push("0".repeat(32));
    assert!(pieces(&v3).iter().all(|p| p.shard.index == 0), "a digest too many: no pieces for the shard");
}
