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

/// The arena limit is inclusive: 4 TiB is allowed, a granule more is not.
#[test]
fn an_arena_of_exactly_the_limit_is_allowed() {
    let sized = |size: u64| {
        let mut m = golden();
        let shard = m.shards[0].clone();
        (m.arena.size, m.arena.shard_cap) = (size, 1 << 36);
        m.shards = (0..size.div_ceil(1 << 36))
            .map(|i| gnomon_core::format::Shard {
                index: i as u32,
                offset: i << 36,
                size: (size - (i << 36)).min(1 << 36),
                file: format!("shards/{i:04}.bin"),
                ..shard.clone()
            })
            .collect();
        validate::manifest(&m)
    };
    assert_eq!(sized(validate::MAX_ARENA_BYTES), Ok(()));
    assert!(matches!(
        sized(validate::MAX_ARENA_BYTES + golden().arena.granularity),
        Err(ValidationError::ArenaSize { .. })
    ));
}
