//! A fresh process's first steps: open (parse and validate) the core and read its module
//! images on one thread while this one makes the device's context. They share nothing,
//! and a restore pays both.

use std::{path::Path, time::Instant};

use crate::{
    cuda::Context,
    errors::{CoreError, CudaError},
    validate::Core,
};

/// The core (its module images read and kept for the load) and the context, with what
/// each took alone and the wall of both.
pub struct Started {
    pub core: Core,
    pub ctx: Context,
    pub open_s: f64,
    /// After opening, reading and checking the module images ([`super::read_module_images`]).
    pub images_s: f64,
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
        let opening = scope.spawn(|| {
            let core = Core::open_for_upload(dir)?;
            let open_s = started.elapsed().as_secs_f64();
            let images_s = super::read_module_images(&core);
            Ok((core, open_s, images_s))
        });
        let ctx = Context::new(ordinal).map(|ctx| (ctx, started.elapsed()));
        (opening.join().expect("opening a core does not panic"), ctx)
    });
    let (core, open_s, images_s) = core.map_err(StartError::Core)?;
    let (ctx, context) = ctx.map_err(StartError::Device)?;
    let wall_s = started.elapsed().as_secs_f64();
    Ok(Started { core, ctx, open_s, images_s, context_s: context.as_secs_f64(), wall_s })
}
