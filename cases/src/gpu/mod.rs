//! `gpu/`: the export contract on a real device. Every case needs a CUDA GPU and runs in
//! its own child process, except `arch-readiness/`, which only compiles with NVRTC.

mod arch;
mod attributes;
mod capture;
mod fault;
mod flags;
mod layouts;
mod memory;
mod record;
mod release;
mod residency;
mod tensor_parallel;

use gnomon_format::params::ParamBlob;

use gnomon_core::cuda::{Context, CudaError, DeviceBuffer, Function, Module, Stream};
use gnomon_fixtures::{
    kernels::{KernelSource, ELEMENTWISE},
    reference::{elementwise_chain, from_bytes, max_abs_diff, pattern, to_bytes},
};

use crate::{accepted, ensure, Case, Verdict};

pub fn cases(include_faults: bool) -> Vec<Case> {
    let mut cases = [
        residency::cases(),
        flags::cases(),
        capture::cases(),
        layouts::cases(),
        release::cases(),
        memory::cases(),
        record::cases(),
        tensor_parallel::cases(),
        attributes::cases(),
        arch::cases(),
    ]
    .concat();
    if include_faults {
        cases.extend(fault::cases());
    }
    cases
}

/// A device with a stream; a device that cannot be opened blocks the case.
struct Gpu {
    ctx: Context,
    stream: Stream,
}

impl Gpu {
    fn open() -> Result<Self, Verdict> {
        Self::open_ordinal(0)
    }

    fn open_ordinal(ordinal: u32) -> Result<Self, Verdict> {
        let blocked = |e: CudaError| Verdict::Blocked(format!("open device {ordinal}: {e}"));
        let ctx = Context::new(ordinal).map_err(blocked)?;
        let stream = ctx.stream().map_err(blocked)?;
        Ok(Self { ctx, stream })
    }

    /// Compiles a fixture for this device's arch; a fixture that does not compile blocks
    /// the case (the subject never ran).
    fn module(&self, kernels: KernelSource) -> Result<Module, Verdict> {
        let compiled = Module::compile(&self.ctx, kernels.name, kernels.source);
        compiled.map(|(module, _)| module).map_err(|e| Verdict::Blocked(format!("fixture `{}`: {e}", kernels.name)))
    }

    fn function(&self, module: &Module, name: &str) -> Result<Function, Verdict> {
        module.function(name).map_err(|e| Verdict::Blocked(format!("fixture function `{name}`: {e}")))
    }
}

/// The elementwise chain fixture on the device: `y = chain(x, y0)`.
struct Chain {
    x: DeviceBuffer,
    y: DeviceBuffer,
    x0: Vec<f32>,
    y0: Vec<f32>,
    scale_add: Function,
    square_half: Function,
    _module: Module,
}

const CHAIN_LEN: usize = 4096;

impl Chain {
    fn new(gpu: &Gpu) -> Result<Self, Verdict> {
        let module = gpu.module(ELEMENTWISE)?;
        let (x0, y0) = (pattern(CHAIN_LEN, 1), pattern(CHAIN_LEN, 2));
        let fixture = |e: CudaError| Verdict::Blocked(format!("set up the elementwise chain: {e}"));
        let x = gpu.ctx.alloc((CHAIN_LEN * 4) as u64).map_err(fixture)?;
        let y = gpu.ctx.alloc((CHAIN_LEN * 4) as u64).map_err(fixture)?;
        x.upload(&to_bytes(&x0)).map_err(fixture)?;
        y.upload(&to_bytes(&y0)).map_err(fixture)?;
        Ok(Self {
            scale_add: gpu.function(&module, "scale_add")?,
            square_half: gpu.function(&module, "square_half")?,
            x,
            y,
            x0,
            y0,
            _module: module,
        })
    }

    /// Enqueues the three kernels; parameters are laid out per the driver's layouts.
    fn issue(&self, stream: &Stream) -> Result<(), CudaError> {
        let n = (CHAIN_LEN as i32).to_le_bytes();
        let grid = [(CHAIN_LEN as u32).div_ceil(256), 1, 1];
        let scale_add = |a: f32| -> Result<Vec<u8>, CudaError> {
            let blob =
                ParamBlob::new(self.scale_add.layout()).set(0, &a.to_le_bytes()).and_then(|b| b.ptr(1, self.x.ptr()));
            let blob = blob.and_then(|b| b.ptr(2, self.y.ptr())).and_then(|b| b.set(3, &n));
            blob.map(ParamBlob::into_bytes).map_err(|e| CudaError::Unsupported(e.to_string()))
        };
        let square = ParamBlob::new(self.square_half.layout()).ptr(0, self.y.ptr()).and_then(|b| b.set(1, &n));
        let square = square.map(ParamBlob::into_bytes).map_err(|e| CudaError::Unsupported(e.to_string()))?;
        stream.launch(&self.scale_add, grid, [256, 1, 1], 0, &scale_add(2.0)?)?;
        stream.launch(&self.square_half, grid, [256, 1, 1], 0, &square)?;
        stream.launch(&self.scale_add, grid, [256, 1, 1], 0, &scale_add(0.5)?)
    }

    /// Puts `y` back as it was before the chain ran.
    fn reset(&self) -> Result<(), Verdict> {
        accepted(self.y.upload(&to_bytes(&self.y0)), "reset y")
    }

    /// Compares `y` on the device with the CPU reference.
    fn check(&self) -> Result<(), Verdict> {
        let mut expected = self.y0.clone();
        elementwise_chain(&self.x0, &mut expected);
        let got = from_bytes(&accepted(self.y.download(), "download y")?);
        let diff = max_abs_diff(&got, &expected).unwrap_or(f32::INFINITY);
        ensure(diff <= 1e-5, || format!("y differs from the CPU reference by up to {diff}"))
    }
}
