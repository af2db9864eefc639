//! `gpu/flags/`: flags 0, 1, 8, 9 instantiate, launch and compute correctly; what the
//! driver reports back for each; and refused flags create no executable.

use gnomon_format::{errors::FlagsError, flags::resolve};

use gnomon_core::{
    cuda::{live_executables, CudaError},
    translate::Instantiate,
};

use super::{Chain, Gpu};
use crate::{accepted, ensure, refused, Case};

const CLAIM: &str = "flags-fidelity";

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for value in [0u64, 1, 8, 9] {
        cases.push(Case::gpu(&format!("gpu/flags/value={value}/launch"), CLAIM, move |ctx| {
            let gpu = Gpu::open()?;
            let chain = Chain::new(&gpu)?;
            let template = accepted(gpu.stream.capture(|s| chain.issue(s)), "retained capture")?;
            let exec = accepted(template.instantiate(value), "instantiate")?;
            accepted(exec.launch(&gpu.stream).and_then(|_| gpu.stream.synchronize()), "launch")?;
            ctx.metric("instantiated-flags", value as f64, "1");
            chain.check()
        }));
        cases.push(Case::gpu(&format!("gpu/flags/value={value}/read-back"), CLAIM, move |ctx| {
            let gpu = Gpu::open()?;
            let chain = Chain::new(&gpu)?;
            let template = accepted(gpu.stream.capture(|s| chain.issue(s)), "retained capture")?;
            let exec = accepted(template.instantiate(value), "instantiate")?;
            let reported = exec.reported_flags();
            ctx.metric("instantiated-flags", value as f64, "1");
            ctx.metric("driver-reported-flags", reported as f64, "1");
            // The contract: an export that takes flags from this executable records exactly
            // the instantiated value, or refuses; it never records what the driver reports
            // when that differs.
            match resolve(None, Some(&exec)) {
                Ok((flags, _)) => ensure(flags.bits() == value && reported == value, || {
                    format!("export took flags {} from an executable instantiated with {value}", flags.bits())
                }),
                Err(e) => ensure(
                    e == FlagsError::ReadbackMismatch { instantiated: value, reported } && reported != value,
                    || format!("unexpected refusal: {e}"),
                ),
            }
        }));
    }
    for value in [0u64, 1, 8, 9] {
        // Fails where the driver drops a bit; cases/expectations.toml says where that is known.
        cases.push(Case::gpu(
            &format!("gpu/flags/value={value}/driver-reports-exact"),
            "driver-reports-flags",
            move |ctx| {
                let gpu = Gpu::open()?;
                let chain = Chain::new(&gpu)?;
                let template = accepted(gpu.stream.capture(|s| chain.issue(s)), "retained capture")?;
                let exec = accepted(template.instantiate(value), "instantiate")?;
                ctx.metric("driver-reported-flags", exec.reported_flags() as f64, "1");
                ensure(exec.reported_flags() == value, || {
                    format!(
                        "the driver reports flags {} for an executable instantiated with {value}",
                        exec.reported_flags()
                    )
                })
            },
        ));
    }
    for value in [2u64, 4, 16, 1 << 40] {
        cases.push(Case::gpu(&format!("gpu/flags/value={value}/refused"), CLAIM, move |_| {
            let gpu = Gpu::open()?;
            let chain = Chain::new(&gpu)?;
            let template = accepted(gpu.stream.capture(|s| chain.issue(s)), "retained capture")?;
            let before = live_executables();
            refused(
                template.instantiate(value).map(drop),
                |e| matches!(e, CudaError::Flags(FlagsError::UnsupportedBit { value: v, .. }) if *v == value),
            )?;
            ensure(live_executables() == before, || {
                format!("{} executables exist after a refusal", live_executables() - before)
            })
        }));
    }
    cases
}
