//! Templates that draw random numbers from PyTorch's CUDA generator. Under capture,
//! PyTorch hands each random kernel a `PhiloxCudaState` by value that points at two
//! 64-bit words of device memory, the generator's seed and offset; before every replay
//! it writes the host's offset there and advances it by the graph's whole-graph increment
//! (`baselines/h100-sm90-580.159.04-nothing-lost/philox.json`: 8 per replay of a
//! dropout graph). The kit finds those states in the kernels' parameters, confirms the
//! seed word holds the generator's seed, takes each graph's increment from the
//! generator's offset around a replay (the Python side watches replays), and records the
//! outputs of the launches the program's next replays would make.

use std::collections::BTreeMap;

use gnomon_format::{
    buffer_at, digest::sha256_each, BufferRef, Drawn, DrawnLaunch, Draws, Expectation, Generator, Manifest, NodeOp,
};

use crate::{errors::KitError, launches::Launcher};
use gnomon_core::{cuda::RetainedGraph, translate::Instantiate};

/// The bytes of PyTorch 2.11's captured `PhiloxCudaState` (its kernels' parameter slots
/// of 32 bytes, read on an H100): the seed's address, the offset's address, the offset
/// within the graph (a multiple of 4), `captured` (1), padding.
const STATE_BYTES: usize = 32;
const CAPTURED_AT: usize = 24;
/// Next launches recorded per drawing template: two show whether launches draw anew.
const NEXT_LAUNCHES: u64 = 2;

/// What the capturing process knows of its default CUDA generator: its seed, the offset
/// its next replay would write, and by how much each graph's replay advanced the offset
/// (`None` for a graph never replayed).
#[derive(Clone, Debug, Default)]
pub struct Generated {
    pub seed: u64,
    pub next_offset: u64,
    pub increments: BTreeMap<String, Option<u64>>,
}

/// The generator's seed and offset words as the kernels point at them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Words {
    seed: u64,
    offset: u64,
}

/// The states a template's kernel nodes carry, with the first node's id.
fn states_in(m: &Manifest, template: &str, arena: std::ops::Range<u64>) -> BTreeMap<Words, String> {
    let mut found = BTreeMap::new();
    let nodes = m.templates.iter().filter(|t| t.name == template).flat_map(|t| &t.nodes);
    for node in nodes {
        let NodeOp::Kernel(k) = &node.op else { continue };
        for at in (0..k.params.len().saturating_sub(STATE_BYTES - 1)).step_by(8) {
            if let Some(words) = state_at(&k.params[at..at + STATE_BYTES], &arena) {
                found.entry(words).or_insert_with(|| node.id.clone());
            }
        }
    }
    found
}

/// The words `bytes` points at, where they are a captured `PhiloxCudaState` into `arena`.
fn state_at(bytes: &[u8], arena: &std::ops::Range<u64>) -> Option<Words> {
    let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let (seed, offset, within) = (word(0), word(1), word(2));
    let padding = &bytes[CAPTURED_AT + 1..];
    let shaped = bytes[CAPTURED_AT] == 1 && padding.iter().all(|&b| b == 0) && within % 4 == 0;
    (shaped && arena.contains(&seed) && arena.contains(&offset) && seed != offset).then_some(Words { seed, offset })
}

/// The arena word at `address` as a reference into the manifest's buffers.
fn reference(m: &Manifest, address: u64) -> Option<BufferRef> {
    let mut sorted: Vec<_> = m.buffers.iter().collect();
    sorted.sort_by_key(|b| b.offset);
    let offset = address.checked_sub(m.arena.base)?;
    let b = buffer_at(&sorted, offset)?;
    Some(BufferRef { buffer: b.name.clone(), offset: offset - b.offset })
}

/// The 64-bit word `at` holds now.
fn read_word(launcher: &Launcher, at: &BufferRef) -> Result<Option<u64>, KitError> {
    let bytes = launcher.read(&at.buffer)?;
    let start = usize::try_from(at.offset).ok();
    Ok(start.and_then(|s| bytes.get(s..s.checked_add(8)?)).map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes"))))
}

/// A generator found in the templates' kernels, and each drawing template's increment.
pub struct Found {
    generator: Generator,
    drawing: Vec<(String, u64)>,
}

/// The generator the templates of `m` draw from, without its draws: where its seed and
/// offset lie. `None` where no kernel carries a state whose seed word holds `generated`'s
/// seed; refused where a template draws but was never replayed, or advanced the
/// generator without a kernel of it reading it.
pub fn find(m: &Manifest, launcher: &Launcher, generated: &Generated) -> Result<Option<Found>, KitError> {
    let arena = m.arena.base..m.arena.base.saturating_add(m.arena.size);
    let mut generator: Option<Generator> = None;
    let mut drawing = Vec::new();
    for t in &m.templates {
        let mut reads = None;
        for (words, node) in states_in(m, &t.name, arena.clone()) {
            let (Some(seed), Some(offset)) = (reference(m, words.seed), reference(m, words.offset)) else { continue };
            if read_word(launcher, &seed)? != Some(generated.seed) {
                continue;
            }
            if let Some(g) = generator.as_ref().filter(|g| g.seed != seed || g.offset != offset) {
                return Err(KitError::Draws(format!(
                    "template `{}` node {node} reads a generator's seed at `{}`+{}, and another template's at `{}`+{}: the kit follows one generator",
                    t.name, seed.buffer, seed.offset, g.seed.buffer, g.seed.offset
                )));
            }
            generator.get_or_insert(Generator { seed, offset, next_offset: generated.next_offset, draws: Vec::new() });
            reads.get_or_insert(node);
        }
        let increment = generated.increments.get(&t.name).copied().flatten().filter(|&i| i > 0);
        match (reads, increment) {
            (Some(_), Some(increment)) => drawing.push((t.name.clone(), increment)),
            (Some(node), None) => {
                return Err(KitError::Draws(format!(
                    "template `{}` draws random numbers (node {node} reads the CUDA generator's seed and offset), but its \
                     graph was never replayed before the export: replay it once, so the kit sees how far each replay \
                     advances the generator",
                    t.name
                )))
            }
            (None, Some(increment)) => {
                return Err(KitError::Draws(format!(
                    "template `{}` advanced the CUDA generator by {increment} per replay, but no kernel of it reads the \
                     generator's seed and offset as PyTorch 2.11 hands them (a `PhiloxCudaState` of {STATE_BYTES} bytes \
                     pointing into the arena): the core could not say how its draws advance",
                    t.name
                )))
            }
            (None, None) => {}
        }
    }
    Ok(generator.map(|generator| Found { generator, drawing }))
}

/// The generator `found` with each drawing template's next launches recorded: the
/// template launched from the loaded state with the offset its next replays would write,
/// the outputs its expectation compares digested.
pub fn with_draws(
    found: Found,
    launcher: &Launcher,
    graphs: &[(String, RetainedGraph)],
    flags: u64,
    expectations: &[Expectation],
) -> Result<Generator, KitError> {
    let Found { mut generator, drawing } = found;
    for (template, increment) in &drawing {
        let Some(e) = expectations.iter().find(|e| &e.template == template) else { continue };
        let Some((_, graph)) = graphs.iter().find(|(name, _)| name == template) else { continue };
        let exec = graph.instantiate(flags)?;
        let mut draws = Draws { template: template.clone(), increment: *increment, next_launches: Vec::new() };
        for launch in 0..NEXT_LAUNCHES {
            let offset = generator
                .offset_of(&draws, launch)
                .ok_or_else(|| KitError::Draws(format!("template `{template}`'s next offsets overflow")))?;
            launcher.launch_drawing(&exec, &generator.offset, offset)?;
            let read = e.outputs.iter().map(|o| launcher.read(&o.buffer)).collect::<Result<Vec<_>, _>>()?;
            let digests = sha256_each(&read.iter().map(Vec::as_slice).collect::<Vec<_>>());
            let outputs = e.outputs.iter().zip(digests).map(|(o, sha256)| Drawn { buffer: o.buffer.clone(), sha256 });
            draws.next_launches.push(DrawnLaunch { offset, outputs: outputs.collect() });
        }
        generator.draws.push(draws);
    }
    Ok(generator)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x7f00_0000_0000;
    const ARENA: std::ops::Range<u64> = BASE..BASE + (1 << 30);

    /// A captured state as PyTorch 2.11 laid out the uniform kernel's on an H100
    /// (`philox.json`'s probe): seed and offset addresses, offset 4 within the graph,
    /// `captured`, padding.
    fn state(seed: u64, offset: u64, within: u64, captured: u8) -> Vec<u8> {
        let mut bytes = [seed, offset, within].map(u64::to_le_bytes).concat();
        bytes.push(captured);
        bytes.resize(STATE_BYTES, 0);
        bytes
    }

    #[test]
    fn a_captured_philox_state_into_the_arena_is_found_and_nothing_else() {
        let (seed, offset) = (BASE + 0x40_0000, BASE + 0x40_0200);
        assert_eq!(state_at(&state(seed, offset, 4, 1), &ARENA), Some(Words { seed, offset }));
        let refused = [
            (state(seed, offset, 4, 0), "not captured: the seed and offset are values"),
            (state(seed, offset, 6, 1), "an offset within the graph PyTorch never gives"),
            (state(BASE - 8, offset, 4, 1), "a seed outside the arena"),
            (state(seed, BASE + (1 << 30), 4, 1), "an offset outside the arena"),
            (state(seed, seed, 4, 1), "one word for both"),
        ];
        for (bytes, why) in refused {
            assert_eq!(state_at(&bytes, &ARENA), None, "{why}");
        }
        let mut padded = state(seed, offset, 4, 1);
        padded[STATE_BYTES - 1] = 7;
        assert_eq!(state_at(&padded, &ARENA), None, "padding that is not zero");
    }
}
