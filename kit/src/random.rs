//! Templates that draw random numbers from PyTorch's CUDA generator. Under capture,
//! PyTorch hands each random kernel a `PhiloxCudaState` by value that points at two
//! 64-bit words of device memory, the generator's seed and offset; before every replay
//! it writes the host's offset there and advances it by the graph's whole-graph increment
//! (`baselines/h100-sm90-580.159.04-nothing-lost/philox.json`: 8 per replay of a
//! dropout graph). The kit finds those states in the kernels' parameters, confirms the
//! seed word holds the default generator's seed, takes each graph's increment from the
//! generator's offset around its replays (the Python side watches replays), and records
//! the outputs of the launches the program's next replays would make.

use std::collections::{BTreeMap, HashMap};

use gnomon_format::{
    buffer_at, params::slot_value, BufferRef, Drawn, DrawnLaunch, Draws, Expectation, Function, Generator, Manifest,
    NodeOp, Template,
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
/// (`None` for a graph it never saw replayed).
#[derive(Clone, Debug, Default)]
pub struct HostGenerator {
    pub seed: u64,
    pub next_offset: u64,
    pub increments: BTreeMap<String, Option<u64>>,
}

/// The generator's seed and offset words as a kernel points at them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Words {
    seed: u64,
    offset: u64,
}

/// Each function of `m`'s modules by (module, name).
fn functions(m: &Manifest) -> HashMap<(&str, &str), &Function> {
    m.modules.iter().flat_map(|md| md.functions.iter().map(move |f| ((md.id.as_str(), f.name.as_str()), f))).collect()
}

/// The captured states `t`'s kernel nodes take, each with the first node's id: a
/// parameter of 32 bytes whose first two words the recorder found to be addresses.
fn states_in(
    t: &Template,
    functions: &HashMap<(&str, &str), &Function>,
    arena: &std::ops::Range<u64>,
) -> BTreeMap<Words, String> {
    let mut found = BTreeMap::new();
    for node in &t.nodes {
        let NodeOp::Kernel(k) = &node.op else { continue };
        let Some(f) = functions.get(&(k.module.as_str(), k.function.as_str())) else { continue };
        for (index, _) in f.params.iter().enumerate().filter(|(_, s)| s.size == STATE_BYTES as u64) {
            let pointer = |at| k.pointers.iter().any(|p| p.param as usize == index && p.at == at);
            let bytes = slot_value(&f.params, &k.params, index);
            if let (true, true, Some(bytes)) = (pointer(0), pointer(8), bytes) {
                if let Some(words) = state_at(bytes, arena) {
                    found.entry(words).or_insert_with(|| node.id.clone());
                }
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

/// The arena word at `address` as a reference into `sorted`, the buffers by offset.
fn reference(m: &Manifest, sorted: &[&gnomon_format::Buffer], address: u64) -> Option<BufferRef> {
    let offset = address.checked_sub(m.arena.base)?;
    let b = buffer_at(sorted, offset)?;
    Some(BufferRef { buffer: b.name.clone(), offset: offset - b.offset })
}

/// A generator found in the templates' kernels, and each drawing template's increment.
pub struct FoundGenerator {
    generator: Generator,
    drawing: Vec<(String, u64)>,
}

/// The generator the templates of `m` draw from, without its draws: where its seed and
/// offset lie. `None` where no kernel takes a captured state. Refused where a state's
/// seed word is not the default generator's seed (another generator, or one seeded
/// again since the graph's last replay), where two words differ between kernels, where a
/// template draws but was never seen replayed, and where one advanced the generator
/// without a kernel reading it. `seed_word` reads a word of the arena (the launcher's).
pub fn find(
    m: &Manifest,
    seed_word: impl Fn(&BufferRef) -> Result<u64, KitError>,
    host: &HostGenerator,
) -> Result<Option<FoundGenerator>, KitError> {
    let arena = m.arena.base..m.arena.base.saturating_add(m.arena.size);
    let mut sorted: Vec<_> = m.buffers.iter().collect();
    sorted.sort_by_key(|b| b.offset);
    let functions = functions(m);
    let mut generator: Option<Generator> = None;
    let mut drawing = Vec::new();
    for t in &m.templates {
        let refused = |why: String| Err(KitError::Draws(format!("template `{}` {why}", t.name)));
        let mut reads = None;
        for (words, node) in states_in(t, &functions, &arena) {
            let (Some(seed), Some(offset)) = (reference(m, &sorted, words.seed), reference(m, &sorted, words.offset))
            else {
                return refused(format!("node {node} takes a random-number state whose words lie in no buffer"));
            };
            let seed_word = seed_word(&seed)?;
            if seed_word != host.seed {
                return refused(format!(
                    "node {node} draws from a generator whose seed word holds {seed_word}, not the default CUDA \
                     generator's seed {}: the kit follows the default generator only (a torch.Generator of the \
                     program's own, or a manual_seed since the graph's last replay, gives this); draw from the \
                     default generator, and replay the graph once after seeding it",
                    host.seed
                ));
            }
            if let Some(g) = generator.as_ref().filter(|g| g.seed != seed || g.offset != offset) {
                return refused(format!(
                    "node {node} reads the generator's offset at `{}`+{}, another kernel at `{}`+{}: the kit follows one \
                     pair of words",
                    offset.buffer, offset.offset, g.offset.buffer, g.offset.offset
                ));
            }
            generator.get_or_insert(Generator { seed, offset, next_offset: host.next_offset, draws: Vec::new() });
            reads.get_or_insert(node);
        }
        match (reads, host.increments.get(&t.name).copied().flatten()) {
            (Some(_), Some(increment)) if increment > 0 => drawing.push((t.name.clone(), increment)),
            (Some(node), Some(_)) => {
                return refused(format!(
                    "draws random numbers (node {node} reads the CUDA generator's seed and offset), but its replays \
                     did not advance the default generator: the kit cannot say how far each launch moves it"
                ))
            }
            (Some(node), None) => {
                return refused(format!(
                    "draws random numbers (node {node} reads the CUDA generator's seed and offset), but its graph \
                     was never replayed before the export: replay it once, so the kit sees how far each replay \
                     advances the generator"
                ))
            }
            (None, Some(increment)) if increment > 0 => {
                return refused(format!(
                    "advanced the CUDA generator by {increment} per replay, but no kernel of it takes the generator's \
                     seed and offset as PyTorch 2.11 hands them (a `PhiloxCudaState` of {STATE_BYTES} bytes pointing \
                     into the arena): the core could not say how its draws advance"
                ))
            }
            (None, _) => {}
        }
    }
    Ok(generator.map(|generator| FoundGenerator { generator, drawing }))
}

/// The generator `found` with each drawing template's next launches recorded: the
/// template launched from the loaded state with the offset its next replays would write,
/// the outputs its expectation compares digested.
pub fn with_draws(
    found: FoundGenerator,
    launcher: &Launcher,
    graphs: &[(String, RetainedGraph)],
    flags: u64,
    expectations: &[Expectation],
) -> Result<Generator, KitError> {
    let FoundGenerator { mut generator, drawing } = found;
    for (template, increment) in &drawing {
        let missing =
            || KitError::Draws(format!("template `{template}` draws random numbers but has no expected outputs"));
        let e = expectations.iter().find(|e| &e.template == template).ok_or_else(missing)?;
        let graph = graphs.iter().find(|(name, _)| name == template).map(|(_, g)| g).ok_or_else(missing)?;
        let exec = graph.instantiate(flags)?;
        let names: Vec<&str> = e.outputs.iter().map(|o| o.buffer.as_str()).collect();
        let mut draws = Draws { template: template.clone(), increment: *increment, next_launches: Vec::new() };
        for launch in 0..NEXT_LAUNCHES {
            let offset = generator
                .offset_of(&draws, launch)
                .ok_or_else(|| KitError::Draws(format!("template `{template}`'s next offsets overflow")))?;
            let digests = launcher.draw(&exec, &generator.offset, offset, &names)?;
            let outputs = names.iter().zip(digests).map(|(b, sha256)| Drawn { buffer: b.to_string(), sha256 });
            draws.next_launches.push(DrawnLaunch { offset, outputs: outputs.collect() });
        }
        generator.draws.push(draws);
    }
    Ok(generator)
}

#[cfg(test)]
mod tests {
    use gnomon_fixtures::sample::{slots, CoreDraft};
    use gnomon_format::{FunctionAttributes, KernelNode, Node, PointerParam};

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

    /// The sample core with one more kernel node in `decode-b1` per state of `states`, of
    /// a function taking one 32-byte parameter, the words of it `declared` (param, at)
    /// declared pointers.
    fn drawing_core(states: &[Vec<u8>], declared: &[(u32, u64)]) -> Manifest {
        let mut d = CoreDraft::sample();
        let attributes = FunctionAttributes::default();
        d.manifest.modules[0].functions.push(Function { name: "draw".into(), params: slots(&[(0, 32)]), attributes });
        let mut k = d.kernel_mut().clone();
        k.function = "draw".into();
        k.pointers = declared.iter().map(|&(param, at)| PointerParam { param, at, external: false }).collect();
        for (i, state) in states.iter().enumerate() {
            let op = NodeOp::Kernel(KernelNode { params: state.clone(), ..k.clone() });
            d.manifest.templates[0].nodes.push(Node { id: format!("n{}", 9 + i), op });
        }
        d.manifest
    }

    const SEED: u64 = 5_074_827_910_873_101;
    /// Both words declared pointers, as the recorder finds PyTorch's.
    const DECLARED: &[(u32, u64)] = &[(0, 0), (0, 8)];

    fn host(increment: Option<u64>) -> HostGenerator {
        HostGenerator { seed: SEED, next_offset: 36, increments: [("decode-b1".to_owned(), increment)].into() }
    }

    /// `find` over a core whose drawing nodes' seed words hold `seed`.
    fn found(m: &Manifest, seed: u64, increment: Option<u64>) -> Result<Option<FoundGenerator>, String> {
        find(m, |_| Ok(seed), &host(increment)).map_err(|e| e.to_string())
    }

    /// The address of byte `at` of the sample's buffer `y` (not the arena's first).
    fn in_y(at: u64) -> u64 {
        let m = CoreDraft::sample().manifest;
        m.arena.base + m.buffers.iter().find(|b| b.name == "y").expect("y").offset + at
    }

    #[test]
    fn a_drawing_template_is_found_with_its_words_and_increment_and_what_cannot_be_replayed_is_refused() {
        let drawing = state(in_y(0), in_y(8), 4, 1);
        let m = drawing_core(&[drawing.clone()], DECLARED);
        let g = found(&m, SEED, Some(8)).unwrap().expect("a generator");
        assert_eq!((g.generator.seed.buffer.as_str(), g.generator.seed.offset, g.generator.offset.offset), ("y", 0, 8));
        assert_eq!((g.generator.next_offset, g.drawing.clone()), (36, vec![("decode-b1".to_owned(), 8)]));
        let refused = |m: &Manifest, seed, increment| found(m, seed, increment).err().unwrap_or_default();
        assert!(refused(&m, 7, Some(8)).contains("seed word holds 7, not the default CUDA generator's seed"));
        assert!(refused(&m, SEED, None).contains("was never replayed before the export"));
        assert!(refused(&m, SEED, Some(0)).contains("its replays did not advance the default generator"));
        let other_offset = drawing_core(&[drawing.clone(), state(in_y(0), in_y(24), 0, 1)], DECLARED);
        assert!(refused(&other_offset, SEED, Some(8)).contains("another kernel at `y`+8: the kit follows one pair"));
        // One pair of words read by two templates is one generator both draw from.
        let mut twice = m.clone();
        twice.templates.push(Template { name: "decode-b2".into(), ..m.templates[0].clone() });
        let increments = [("decode-b1".to_owned(), Some(8)), ("decode-b2".to_owned(), Some(12))].into();
        let g = find(&twice, |_| Ok(SEED), &HostGenerator { increments, ..host(None) }).unwrap().expect("one");
        assert_eq!(g.drawing, [("decode-b1".to_owned(), 8), ("decode-b2".to_owned(), 12)]);
    }

    #[test]
    fn only_a_state_whose_two_words_were_declared_pointers_of_its_parameter_draws() {
        let drawing = vec![state(in_y(0), in_y(8), 4, 1)];
        for declared in [&[][..], &[(0, 0), (0, 16)], &[(1, 0), (1, 8)]] {
            let m = drawing_core(&drawing, declared);
            assert!(found(&m, SEED, None).unwrap().is_none(), "{declared:?}");
            assert!(found(&m, SEED, Some(0)).unwrap().is_none(), "{declared:?}: replays that draw nothing");
            let unexplained = found(&m, SEED, Some(8)).err().unwrap_or_default();
            assert!(
                unexplained.contains("advanced the CUDA generator by 8 per replay, but no kernel"),
                "{unexplained}"
            );
        }
    }
}
