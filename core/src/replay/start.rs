//! A fresh process's first steps: open (parse and validate) the core on one thread while
//! this one makes the device's context. The two share nothing, and a restore pays both.
//! Opening for an upload keeps the module images it hashed, so the restore's load reads
//! no file.

use std::{path::Path, time::Instant};

use gnomon_format::{errors::CoreError, validate::Core};

use crate::{cuda::Context, errors::CudaError};

/// The core and the context, with what each took alone and the wall of both.
pub struct Started {
    pub core: Core,
    pub ctx: Context,
    pub open_s: f64,
    pub context_s: f64,
    pub wall_s: f64,
}

/// Why a start failed: the core is refused (judged first), or the device is unusable.
#[derive(Debug)]
pub enum StartError {
    Core(CoreError),
    Device(CudaError),
}

/// Opens the core in `dir` for the upload and makes device `ordinal`'s context, at once.
pub fn start(dir: &Path, ordinal: u32) -> Result<Started, StartError> {
    let started = Instant::now();
    let (core, ctx) = std::thread::scope(|scope| {
        let opening = scope.spawn(|| Core::open_for_upload(dir).map(|core| (core, started.elapsed())));
        let ctx = Context::new(ordinal).map(|ctx| (ctx, started.elapsed()));
        (opening.join().expect("opening a core does not panic"), ctx)
    });
    let (core, open) = core.map_err(StartError::Core)?;
    let (ctx, context) = ctx.map_err(StartError::Device)?;
    let wall_s = started.elapsed().as_secs_f64();
    Ok(Started { core, ctx, open_s: open.as_secs_f64(), context_s: context.as_secs_f64(), wall_s })
}
