//! The fair rival of a restore: a fresh process that starts a workload without its core,
//! as a serving stack does. It makes the context, maps the arena, reads the same weight
//! files with the restore's own upload (digests included, so reading costs both sides the
//! same), compiles the workload's kernels, captures every template and instantiates it.
//! `cold-start-speedup` is its time over the restore's, each in a fresh process.

use std::{collections::HashMap, path::Path, time::Instant};

use gnomon_format::Core;

use gnomon_core::{
    cuda::Context,
    replay::{map_arena, upload_shards, Staging},
};
use gnomon_fixtures::workloads::by_name;

use super::pipeline::{capture_and_instantiate, session_over};
use crate::{measured, Metrics, Verdict};

/// `gnomon __cold-start WORKLOAD CORE_DIR`: starts `workload` without its core, its
/// weights read from the core's shard files. `nocore-ready-s`: from the start until every template is instantiated, less the time
/// spent reading the manifest for where the weights go (a stack without a core knows).
pub fn cold_start(workload: &str, dir: &Path) -> Result<Metrics, Verdict> {
    let w = by_name(workload).ok_or_else(|| Verdict::Blocked(format!("no built-in workload `{workload}`")))?;
    let started = Instant::now();
    let ctx = Context::new(0).map_err(|e| Verdict::Blocked(format!("open device 0: {e}")))?;
    let opened = Instant::now();
    let core = Core::open_for_upload(dir).map_err(|e| Verdict::Failed(format!("core refused: {e}")))?;
    let layout_s = opened.elapsed().as_secs_f64();
    let m = core.manifest();
    let failed = |what: &str, e: String| Verdict::Failed(format!("{what}: {e}"));
    let mapping = map_arena(m, &ctx).map_err(|e| failed("map the arena", e.to_string()))?;
    upload_shards(&core, &ctx, Staging::default()).map_err(|e| failed("read the weights", e.to_string()))?;
    let addresses: HashMap<String, u64> = m.buffers.iter().map(|b| (b.name.clone(), m.arena.base + b.offset)).collect();
    let session = session_over(w, &ctx, mapping, addresses)?;
    capture_and_instantiate(w, &session)?;
    let ready_s = started.elapsed().as_secs_f64() - layout_s;
    Ok(Metrics::from([measured("nocore-ready-s", ready_s, "s"), measured("nocore-read-layout-s", layout_s, "s")]))
}
