//! Templates that draw random numbers (a core's `generators`), launched as the producing
//! program's next replays would launch them: from the loaded state, the generator's
//! offset written first, advanced by the template's increment at every launch. Their
//! outputs are digested against the ones the exporter recorded; two of them alike would
//! mean the restored template draws frozen numbers.

use gnomon_format::{digest::sha256_each, Manifest};

use super::{LoadedState, OutputCheck};
use crate::{
    cuda::{GraphExec, Stream},
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
            let Some(position) = m.templates.iter().position(|t| t.name == d.template) else { continue };
            for (launch, l) in d.next_launches.iter().enumerate() {
                arena.launch_drawing(&executables[position], stream, &g.offset, l.offset)?;
                let read = l.outputs.iter().map(|o| arena.read(&o.buffer)).collect::<Result<Vec<_>, _>>()?;
                let digests = sha256_each(&read.iter().map(Vec::as_slice).collect::<Vec<_>>());
                checks.extend(l.outputs.iter().zip(digests).map(|(o, actual_sha256)| OutputCheck {
                    template: d.template.clone(),
                    buffer: o.buffer.clone(),
                    launch: launch as u32,
                    expected_sha256: o.sha256.clone(),
                    actual_sha256,
                    bytes: Vec::new(),
                }));
            }
        }
    }
    Ok(checks)
}
