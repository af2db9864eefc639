//! `validate::manifest` on its own, as an exporter calls it before writing a core (the
//! reader on disk probes the format tag first, so these rules are met here alone).

use gnomon_format::{errors::ValidationError, validate, Manifest};

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
            .map(|i| gnomon_format::Shard {
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

/// A parameter slot may end exactly at the 32 764-byte limit, not a byte past it.
#[test]
fn a_parameter_block_of_exactly_the_limit_is_allowed() {
    let ending_at = |end: u64| {
        let mut m = golden();
        let function = &mut m.modules[0].functions[0];
        let last = function.params.last_mut().unwrap();
        last.offset = end - last.size;
        let bytes = function.param_bytes() as usize;
        for node in m.templates.iter_mut().flat_map(|t| t.nodes.iter_mut()) {
            if let gnomon_format::NodeOp::Kernel(k) = &mut node.op {
                let tail = k.params.split_off(k.params.len() - 4);
                k.params.resize(bytes - 4, 0);
                k.params.extend(tail);
            }
        }
        validate::manifest(&m)
    };
    assert_eq!(ending_at(validate::MAX_PARAM_BYTES), Ok(()));
    assert!(matches!(ending_at(validate::MAX_PARAM_BYTES + 4), Err(ValidationError::ParamPastLimit { .. })));
}

fn golden_v2() -> Manifest {
    serde_json::from_str(include_str!("../../fixtures/golden/v2/manifest.json")).expect("the golden manifest parses")
}

/// Function attributes at their limits: 256 KiB of dynamic shared memory and the whole
/// carveout range, −1 (no preference) included, are allowed; a step past is not.
#[test]
fn function_attributes_at_their_limits_are_allowed() {
    let with = |max: u32, carveout: i32| {
        let mut m = golden_v2();
        let a = &mut m.modules[0].functions[0].attributes;
        (a.max_dynamic_shared_size_bytes, a.preferred_shared_memory_carveout) = (Some(max), Some(carveout));
        validate::manifest(&m)
    };
    for carveout in [-1, 0, 100] {
        assert_eq!(with(256 << 10, carveout), Ok(()), "carveout {carveout}");
    }
    assert!(matches!(with((256 << 10) + 1, 0), Err(ValidationError::Attribute { .. })));
    assert!(matches!(with(256 << 10, -2), Err(ValidationError::Attribute { .. })));
}
