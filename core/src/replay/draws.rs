//! Templates that draw random numbers (a core's `generators`), launched as the producing
//! program's next replays would launch them: from the loaded state, the generator's
//! offset written first, advanced by the template's increment at every launch. Their
//! outputs are digested against the ones the exporter recorded; two of them alike would
//! mean the restored template draws frozen numbers.

use gnomon_format::Manifest;

use super::{LoadedState, OutputCheck};
use crate::{
    cuda::{CudaError, GraphExec, Stream},
    errors::ReplayError,
};

/// Every recorded next launch of every drawing template, its outputs digested: `launch`
/// counts next launches from 0, `bytes` stay empty (draws are judged by digest alone).
pub(super) fn launch_draws(
    m: &Manifest,
    arena: &LoadedState,
    executables: &[GraphExec],
    stream: &Stream,
) -> Result<Vec<OutputCheck>, ReplayError> {
    let mut checks = Vec::new();
    for g in &m.generators {
        for d in &g.draws {
            // Validation names only templates of the core; the plan holds one executable each.
            let exec = m.templates.iter().zip(executables).find(|(t, _)| t.name == d.template).map(|(_, e)| e);
            let exec = exec.ok_or_else(|| CudaError::Unsupported(format!("no executable for `{}`", d.template)))?;
            for (launch, l) in d.next_launches.iter().enumerate() {
                let names: Vec<&str> = l.outputs.iter().map(|o| o.buffer.as_str()).collect();
                let digests = arena.draw(exec, stream, &g.offset, l.offset, &names)?;
                checks.extend(l.outputs.iter().zip(digests).map(|(o, actual_sha256)| OutputCheck {
                    template: d.template.clone(),
                    buffer: o.buffer.clone(),
                    launch: launch as u32,
                    expected_sha256: o.sha256.clone(),
                    actual_sha256,
                    bytes: Default::default(),
                    blank: None,
                }));
            }
        }
    }
    Ok(checks)
}
