//! Splitting a fixed-address arena into shards: each shard is one reservation, one physical
//! allocation and one file, no larger than the cap.

use crate::errors::ShardPlanError;

pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// A shard cap checked against the allocation granularity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardCap {
    cap: u64,
    granularity: u64,
}

impl ShardCap {
    pub fn new(cap: u64, granularity: u64) -> Result<Self, ShardPlanError> {
        if granularity == 0 || !granularity.is_power_of_two() {
            return Err(ShardPlanError::Granularity { granularity });
        }
        if cap == 0 {
            return Err(ShardPlanError::CapZero);
        }
        if cap < granularity {
            return Err(ShardPlanError::CapBelowGranularity { cap, granularity });
        }
        if !cap.is_multiple_of(granularity) {
            return Err(ShardPlanError::CapNotMultiple { cap, granularity });
        }
        Ok(Self { cap, granularity })
    }

    pub fn bytes(self) -> u64 {
        self.cap
    }

    pub fn granularity(self) -> u64 {
        self.granularity
    }
}

/// One planned shard, offsets relative to the arena base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSpan {
    pub index: u32,
    pub offset: u64,
    pub size: u64,
}

/// Rounds `size` up to the granularity and cuts it into shards of at most `cap`; every
/// shard but the last is exactly `cap`.
pub fn plan(arena_size: u64, cap: ShardCap) -> Result<Vec<ShardSpan>, ShardPlanError> {
    if arena_size == 0 {
        return Err(ShardPlanError::EmptyArena);
    }
    let padded = arena_size
        .checked_next_multiple_of(cap.granularity)
        .ok_or(ShardPlanError::ArenaOverflow { size: arena_size })?;
    let spans = (0..padded.div_ceil(cap.cap))
        .map(|i| {
            let offset = i * cap.cap;
            ShardSpan { index: i as u32, offset, size: cap.cap.min(padded - offset) }
        })
        .collect();
    Ok(spans)
}
