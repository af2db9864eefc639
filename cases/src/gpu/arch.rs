//! `gpu/arch-readiness/`: every fixture kernel compiles with NVRTC for the archs after
//! Hopper, so the same binary is ready for an SM100 or SM120 runner. These cases only
//! compile (their id and `mode` parameter say so); they need NVRTC, not a GPU, and what
//! ran on a GPU is the report's environment.

use gnomon_core::cuda::compile_ptx;
use gnomon_fixtures::kernels::ALL;

use crate::{Case, Requirement, Verdict};

const ARCHS: [&str; 2] = ["sm_100", "sm_120"];

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for arch in ARCHS {
        for kernels in ALL {
            let id = format!("gpu/arch-readiness/arch={arch}/kernels={}/compile-only", kernels.name);
            let case = Case::new(&id, "arch-readiness", move |ctx| {
                let ptx =
                    compile_ptx(kernels.name, kernels.source, arch).map_err(|e| Verdict::Failed(e.to_string()))?;
                let missing: Vec<_> =
                    kernels.functions.iter().filter(|f| !ptx.contains(&format!(".entry {f}("))).collect();
                if !missing.is_empty() {
                    return Err(Verdict::Failed(format!("the PTX for {arch} has no entry for {missing:?}")));
                }
                ctx.metric("ptx-bytes", ptx.len() as f64, "B");
                Ok(())
            });
            cases.push(
                case.requiring(Requirement::Nvrtc).with_parameter("arch", arch).with_parameter("mode", "compile-only"),
            );
        }
    }
    cases
}
