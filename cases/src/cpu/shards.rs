//! `cpu/shards/`: planning an arena into shards at both caps, at exact multiples of the cap
//! and one byte past, and refusing caps that cannot be mapped.

use gnomon_format::{
    errors::ShardPlanError,
    shards::{plan, ShardCap, ShardSpan, GIB, MIB},
};

use crate::{accepted, ensure, refused, Case, Verdict};

const CLAIM: &str = "shard-planning";
const GRANULARITY: u64 = 2 * MIB;

/// Plans `arena` under `cap` and checks the spans: contiguous from 0, all but the last
/// exactly `cap`, the last granular and non-empty, `count` in all, covering the arena.
fn expect_plan(arena: u64, cap: u64, count: usize, last: u64) -> Result<(), Verdict> {
    let cap = accepted(ShardCap::new(cap, GRANULARITY), "checking the cap")?;
    let spans = accepted(plan(arena, cap), "planning shards")?;
    let contiguous = spans.iter().enumerate().all(|(i, s)| s.index as usize == i && s.offset == i as u64 * cap.bytes());
    let full = spans[..spans.len() - 1].iter().all(|s| s.size == cap.bytes());
    let end = spans.last().map(|s: &ShardSpan| s.offset + s.size).unwrap_or(0);
    ensure(spans.len() == count && contiguous && full && end >= arena, || format!("plan {spans:?}"))?;
    let got = spans.last().map(|s| s.size);
    ensure(got == Some(last), || format!("last shard is {got:?} bytes, expected {last}"))
}

fn cap_refused(cap: u64, granularity: u64, expected: fn(&ShardPlanError) -> bool) -> Result<(), Verdict> {
    refused(ShardCap::new(cap, granularity), expected).map(drop)
}

pub fn cases() -> Vec<Case> {
    vec![
        Case::new("cpu/shards/cap=64GiB/exact-multiple", CLAIM, |_| expect_plan(128 * GIB, 64 * GIB, 2, 64 * GIB)),
        Case::new("cpu/shards/cap=64GiB/one-byte-past", CLAIM, |_| {
            expect_plan(128 * GIB + 1, 64 * GIB, 3, GRANULARITY)
        }),
        Case::new("cpu/shards/cap=64GiB/below-cap", CLAIM, |_| expect_plan(GIB + 1, 64 * GIB, 1, GIB + GRANULARITY)),
        Case::new("cpu/shards/cap=64MiB/exact-multiple", CLAIM, |_| expect_plan(256 * MIB, 64 * MIB, 4, 64 * MIB)),
        Case::new("cpu/shards/cap=64MiB/one-byte-past", CLAIM, |_| {
            expect_plan(256 * MIB + 1, 64 * MIB, 5, GRANULARITY)
        }),
        Case::new("cpu/shards/cap=64MiB/one-byte-arena", CLAIM, |_| expect_plan(1, 64 * MIB, 1, GRANULARITY)),
        Case::new("cpu/shards/cap-zero-refused", CLAIM, |_| {
            cap_refused(0, GRANULARITY, |e| *e == ShardPlanError::CapZero)
        }),
        Case::new("cpu/shards/cap-below-granularity-refused", CLAIM, |_| {
            cap_refused(MIB, GRANULARITY, |e| matches!(e, ShardPlanError::CapBelowGranularity { .. }))
        }),
        Case::new("cpu/shards/cap-not-multiple-refused", CLAIM, |_| {
            cap_refused(3 * MIB, GRANULARITY, |e| matches!(e, ShardPlanError::CapNotMultiple { .. }))
        }),
        Case::new("cpu/shards/granularity-not-power-of-two-refused", CLAIM, |_| {
            cap_refused(64 * MIB, 3 * MIB, |e| matches!(e, ShardPlanError::Granularity { .. }))
        }),
        Case::new("cpu/shards/empty-arena-refused", CLAIM, |_| {
            let cap = accepted(ShardCap::new(64 * MIB, GRANULARITY), "checking the cap")?;
            refused(plan(0, cap), |e| *e == ShardPlanError::EmptyArena).map(drop)
        }),
    ]
}
