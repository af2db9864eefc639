//! `gpu/fault/`: a kernel that faults on purpose and leaves a sticky error. Included only
//! with the hidden `--include-faults` flag, to show that it fails its case alone.

use gnomon_fixtures::kernels::FAULT;
use gnomon_format::params::ParamBlob;

use super::Gpu;
use crate::{Case, Verdict};

pub fn cases() -> Vec<Case> {
    vec![Case::gpu("gpu/fault/illegal-address", "fault-isolation", |_| {
        let gpu = Gpu::open()?;
        let module = gpu.module(FAULT)?;
        let fault = gpu.function(&module, "fault")?;
        let params =
            ParamBlob::new(fault.layout()).ptr(0, 0x10).map_err(|e| Verdict::Blocked(e.to_string()))?.into_bytes();
        let launched =
            gpu.stream.launch(&fault, [1, 1, 1], [32, 1, 1], 0, &params).and_then(|_| gpu.stream.synchronize());
        let after = gpu.ctx.alloc(4).map(drop);
        Err(Verdict::Failed(format!("faulted on purpose: launch {launched:?}; a later allocation {after:?}")))
    })]
}
