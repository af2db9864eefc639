//! `gpu/reservation/`: the smallest reservation the driver places at the address asked.

use gnomon_format::shards::MIB;

use gnomon_core::cuda::ArenaMapping;

use crate::{Case, Verdict};

/// Well away from the replay arena.
const PROBE_BASE: u64 = 0x400_0000_0000;

pub fn cases() -> Vec<Case> {
    vec![Case::gpu("gpu/reservation/smallest-honoured", "fixed-address", |ctx| {
        let device = gnomon_core::cuda::Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
        let sizes = (1..=10).map(|k| MIB << k); // 2 MiB … 1 GiB
        let mut smallest = None;
        for size in sizes {
            let honoured =
                ArenaMapping::honours(&device, PROBE_BASE, size).map_err(|e| Verdict::Failed(e.to_string()))?;
            ctx.metric(&format!("honoured-{}MiB", size / MIB), honoured as u8 as f64, "1");
            if honoured && smallest.is_none() {
                smallest = Some(size);
            }
        }
        let smallest =
            smallest.ok_or_else(|| Verdict::Failed("no reservation up to 1 GiB was placed where asked".into()))?;
        ctx.metric("smallest-honoured-reservation", (smallest / MIB) as f64, "MiB");
        Ok(())
    })]
}
