//! The two floors an upload is held against, measured in the same run on the same
//! machine: how fast the shard files read (with the upload's reader count, no hashing)
//! and how fast page-locked memory copies to the device.

use std::{
    io::Read,
    sync::atomic::{AtomicU64, AtomicUsize, Ordering},
    time::Instant,
};

use super::upload::Staging;
use crate::{
    cuda::{Context, PinnedHost},
    errors::ReplayError,
    format::Core,
    page_cache,
};

/// Bytes read from the shard files at most, so the measurement stays short at any size.
const READ_SAMPLE: u64 = 2 << 30;
/// Bytes of one page-locked copy, made `H2D_REPEATS` times.
const H2D_BYTES: usize = 256 << 20;
const H2D_REPEATS: u32 = 4;

#[derive(Clone, Copy, Debug)]
pub struct Floors {
    pub read_gbps: f64,
    pub pinned_h2d_gbps: f64,
    /// Whether the read floor was measured with the shard files out of the page cache.
    pub cold: bool,
}

/// The floors, the read floor measured `cold` (the shard files dropped from the page
/// cache first) or warm, to match the condition the restore met.
pub fn measure(core: &Core, ctx: &Context, staging: Staging, cold: bool) -> Result<Floors, ReplayError> {
    if cold {
        drop_shards_from_cache(core)?;
    }
    Ok(Floors { read_gbps: read_gbps(core, staging)?, pinned_h2d_gbps: pinned_h2d_gbps(ctx)?, cold })
}

/// The share of the shard files' pages the page cache holds now.
pub fn shards_cached_fraction(core: &Core) -> Result<f64, ReplayError> {
    let files = shard_files(core)?;
    page_cache::resident_fraction(&files).map_err(|source| ReplayError::Cache { source })
}

/// Drops every shard file from the page cache, so the next read comes from storage.
pub fn drop_shards_from_cache(core: &Core) -> Result<(), ReplayError> {
    for file in shard_files(core)? {
        page_cache::drop_from_cache(&file).map_err(|source| ReplayError::Cache { source })?;
    }
    Ok(())
}

fn shard_files(core: &Core) -> Result<Vec<std::fs::File>, ReplayError> {
    let shards = &core.manifest().shards;
    let open = |s: &crate::format::Shard| core.open_file(&s.file, &format!("shard {}", s.index));
    shards.iter().map(|s| open(s).map_err(|e| ReplayError::Cache { source: std::io::Error::other(e) })).collect()
}

fn read_gbps(core: &Core, staging: Staging) -> Result<f64, ReplayError> {
    let shards = &core.manifest().shards;
    let (next, claimed) = (AtomicUsize::new(0), AtomicU64::new(0));
    let started = Instant::now();
    let read: Result<Vec<u64>, ReplayError> = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..staging.readers.clamp(1, shards.len().max(1)))
            .map(|_| {
                scope.spawn(|| {
                    let (mut chunk, mut total) = (vec![0u8; staging.slot_bytes], 0u64);
                    while let Some(s) = shards.get(next.fetch_add(1, Ordering::SeqCst)) {
                        let stored = core.manifest().stored_len(s);
                        let before = claimed.fetch_add(stored, Ordering::SeqCst);
                        let want = stored.min(READ_SAMPLE.saturating_sub(before));
                        if want == 0 {
                            break;
                        }
                        let io = |source| ReplayError::Shard { index: s.index, file: s.file.clone(), source };
                        let opened = core.open_file(&s.file, "shard").map_err(|e| io(std::io::Error::other(e)))?;
                        let mut file = opened.take(want);
                        while file.read(&mut chunk).map_err(io)? > 0 {}
                        total += want;
                    }
                    Ok(total)
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().expect("a reader does not panic")).collect()
    });
    let bytes: u64 = read?.iter().sum();
    Ok(bytes as f64 / started.elapsed().as_secs_f64() / 1e9)
}

fn pinned_h2d_gbps(ctx: &Context) -> Result<f64, ReplayError> {
    let mut host = PinnedHost::new(ctx, H2D_BYTES)?;
    let device = ctx.alloc(H2D_BYTES as u64)?;
    let stream = ctx.stream()?;
    let (start, end) = (ctx.event()?, ctx.event()?);
    stream.record(&start)?;
    for _ in 0..H2D_REPEATS {
        // SAFETY: `device` holds `H2D_BYTES`; `host` outlives the copies, which the
        // elapsed-time query below waits for.
        unsafe { stream.upload_async(device.ptr(), host.as_mut_slice()) }?;
    }
    stream.record(&end)?;
    let seconds = start.elapsed_ms(&end)? as f64 / 1e3;
    Ok(H2D_BYTES as f64 * H2D_REPEATS as f64 / seconds / 1e9)
}
