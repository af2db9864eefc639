//! What a shard file holds: the whole shard in v1 (the bytes between buffers too), only the
//! stored buffers' bytes in v2.

use gnomon_core::format::{BufferContents, Manifest};

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
