//! `gpu/release/`: a driver failure met while releasing a handle in `Drop` is reported by
//! the next call on the context, once, instead of being discarded.

use gnomon_core::cuda::CudaError;

use super::Gpu;
use crate::{accepted, ensure, Case, Verdict};

pub fn cases() -> Vec<Case> {
    vec![Case::gpu("gpu/release/failure-reported-by-next-call", "release-errors-reported", |_| {
        let gpu = Gpu::open()?;
        let scratch = accepted(gpu.ctx.alloc(4096), "allocate scratch")?;
        // Freeing device memory is not allowed while this thread captures, so the drop
        // fails the way a release in real code does: where no caller can see the status.
        let captured = gpu.stream.capture(move |_| {
            drop(scratch);
            Ok(())
        });
        let reported = match captured {
            Err(CudaError::Release { call, code, .. }) => format!("{call}: {code}"),
            Err(other) => return Err(Verdict::Failed(format!("capture failed without naming the release: {other}"))),
            Ok(_) => return Err(Verdict::Failed("the capture succeeded; the failed free went unreported".into())),
        };
        ensure(reported.starts_with("cuMemFree"), || format!("the reported release is not the free: {reported}"))?;
        // Reported once: the call after it runs normally.
        accepted(gpu.ctx.synchronize(), "synchronize after the report")?;
        Ok(())
    })]
}
