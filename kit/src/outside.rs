//! Memory PyTorch holds outside the arena. Eager work whose tensors no graph reads (a
//! prefill, a warm-up) may run there, under `gnomon.torch.outside_arena()`: its blocks
//! then stay in PyTorch's own pool, whose cache `torch.cuda.graph()` empties before a
//! capture run there too, as it does without the kit. A graph must not use a tensor there,
//! for no core maps it: every node's addresses are looked up in PyTorch's live blocks
//! outside the arena, and each one found there is a suspect.
//!
//! A suspect is not proof. A kernel's parameters are whole structs copied from the
//! launching thread's stack, and their unused fields hold whatever was there: seen on the
//! H200, one export in six of one program held, in an unused field of a top-k kernel's
//! tensor description, an address that happened to lie in a live block. So a suspect is
//! confirmed before it refuses: the block is changed, the template launched from the
//! core's state, and the block put back. The graph uses the block when the launch wrote
//! into it or gave an output its launches never gave (beyond their variation, for an
//! output that varied); otherwise the word is dismissed, and the export's summary lists
//! it. Free blocks are not looked in at all: a correct program's graph reads no freed
//! memory.

use std::ops::Range;

use gnomon_format::{spread::DEFAULT_MARGIN, Expectation};

use gnomon_core::{
    cuda::{GraphExec, NodeInfo, NodeKind, RetainedGraph},
    translate::{param_slots, Instantiate},
};
use serde::Serialize;

use crate::{errors::KitError, launches::Launcher};

/// A live block PyTorch holds outside the arena, and the pool it belongs to as Python says
/// it ("PyTorch's default pool", "PyTorch's pool (1, 0)").
#[derive(Clone, Debug)]
pub struct LiveBlock {
    pub range: Range<u64>,
    pub pool: String,
}

/// A node that holds an address in a live block outside the arena.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Suspect {
    pub template: String,
    pub node: usize,
    /// The place that holds it: a kernel's parameter (and byte), a copy's end.
    pub what: String,
    pub address: u64,
    pub pool: String,
    #[serde(skip)]
    block: Range<u64>,
}

impl Suspect {
    fn refused(self, used: String) -> KitError {
        let Self { template, node, what, address, pool, .. } = self;
        KitError::PointsOutside { template, node, what, address, pool, used }
    }
}

/// Every node of the templates, `(name, nodes)`, that holds an address in one of
/// `outside`, each with the first such place.
pub fn suspects<'n>(
    templates: impl IntoIterator<Item = (&'n str, &'n Vec<NodeInfo>)>,
    outside: &[LiveBlock],
) -> Vec<Suspect> {
    let mut found = Vec::new();
    if outside.is_empty() {
        return found;
    }
    for (template, nodes) in templates {
        for node in nodes {
            if let Some((what, address, block)) = pointing(&node.kind, outside) {
                let (template, pool, block) = (template.to_owned(), block.pool.clone(), block.range.clone());
                found.push(Suspect { template, node: node.id.0, what, address, pool, block });
            }
        }
    }
    found
}

/// Refuses the first suspect whose block its template uses, and returns those it does
/// not: each suspect's block changed, its template launched from the core's state, the
/// block put back. A rank of a set launches with its peers and cannot launch alone: its
/// first suspect refuses unconfirmed.
pub fn confirm(
    launcher: &Launcher,
    graphs: &[(String, RetainedGraph)],
    flags: u64,
    expected: &Expected<'_>,
    suspects: Vec<Suspect>,
    rank_of_a_set: bool,
) -> Result<Vec<Suspect>, KitError> {
    let mut dismissed = Vec::new();
    for suspect in suspects {
        if rank_of_a_set {
            return Err(suspect.refused("a rank of a set cannot launch alone to show that it does not".into()));
        }
        let graph = graphs.iter().find(|(name, _)| *name == suspect.template).map(|(_, g)| g);
        let graph = graph.expect("a suspect is a node of a template exported");
        match used(launcher, graph, flags, expected, &suspect)? {
            Some(how) => return Err(suspect.refused(how)),
            None => dismissed.push(suspect),
        }
    }
    Ok(dismissed)
}

/// The expectations the export recorded, and each varying output's first launch: what a
/// launch with a suspect's block changed is held to.
pub struct Expected<'e> {
    pub expectations: &'e [Expectation],
    pub first_launch: &'e dyn Fn(&str, &str) -> Option<&'e [u8]>,
}

/// How the template of `suspect` uses its block, if it does.
fn used(
    launcher: &Launcher,
    graph: &RetainedGraph,
    flags: u64,
    expected: &Expected<'_>,
    suspect: &Suspect,
) -> Result<Option<String>, KitError> {
    let exec = graph.instantiate(flags)?;
    if launched_with_block_changed(launcher, &exec, &suspect.block)? {
        return Ok(Some("a launch wrote into the block".into()));
    }
    let changed = changed_output(launcher, expected, &suspect.template)?;
    Ok(changed.map(|buffer| format!("with the block changed, output `{buffer}` changed beyond what its launches gave")))
}

/// Launches `exec` once from the loaded state with `block` changed, puts the block back,
/// and says whether the launch wrote into it.
fn launched_with_block_changed(launcher: &Launcher, exec: &GraphExec, block: &Range<u64>) -> Result<bool, KitError> {
    let (ctx, len) = (launcher.context(), block.end - block.start);
    // SAFETY (every call on the block below): a live block of PyTorch's in this process's
    // context, mapped and not freed while the export runs (the caller holds its tensors
    // and waits for the export).
    let saved = unsafe { ctx.read(block.start, len) }?;
    // Zero changes indices and values alike without sending an index out of range; a
    // block of zeros gets another pattern.
    let pattern = if saved.iter().all(|&b| b == 0) { 0x3f } else { 0 };
    unsafe { ctx.write(block.start, &vec![pattern; saved.len()]) }?;
    let after = launcher.launch_once(exec).and_then(|()| Ok(unsafe { ctx.read(block.start, len) }?));
    unsafe { ctx.write(block.start, &saved) }?;
    Ok(after?.iter().any(|&b| b != pattern))
}

/// The first output of `template` that the last launch gave beyond what the export's
/// launches gave (a digest none gave, outside a varying output's allowance).
fn changed_output(launcher: &Launcher, expected: &Expected<'_>, template: &str) -> Result<Option<String>, KitError> {
    let expectation = expected.expectations.iter().find(|e| e.template == template);
    for o in expectation.map(|e| e.outputs.as_slice()).unwrap_or_default() {
        let bytes = launcher.read(&o.buffer)?;
        let digest = gnomon_format::hash_hex(&bytes[..]).expect("hashing memory cannot fail");
        let recorded = digest == o.sha256 || o.variation.as_ref().is_some_and(|v| v.sha256s.contains(&digest));
        let within = |v: &gnomon_format::Variation| {
            let first = (expected.first_launch)(template, &o.buffer).unwrap_or_default();
            v.allowance(DEFAULT_MARGIN).judge(v.element, first, &bytes).1
        };
        if !recorded && !o.variation.as_ref().is_some_and(within) {
            return Ok(Some(o.buffer.clone()));
        }
    }
    Ok(None)
}

/// The first address `kind` holds in `outside`: a kernel's parameter word, a memset's
/// destination, a copy's ends; said as the place that holds it.
fn pointing<'s>(kind: &NodeKind, outside: &'s [LiveBlock]) -> Option<(String, u64, &'s LiveBlock)> {
    let within = |address: u64| outside.iter().find(|b| b.range.contains(&address));
    match kind {
        NodeKind::Kernel { function, params, layout, .. } => gnomon_format::params::words(&param_slots(layout), params)
            .find_map(|(param, at, word)| {
                let place = if at == 0 { String::new() } else { format!(" (byte {at})") };
                within(word).map(|b| (format!("kernel `{function}` parameter {param}{place}"), word, b))
            }),
        NodeKind::Memset { dst, .. } => within(*dst).map(|b| ("the memset's destination".to_owned(), *dst, b)),
        NodeKind::Memcpy { dst, src, .. } => [("destination", *dst), ("source", *src)]
            .into_iter()
            .find_map(|(end, a)| within(a).map(|b| (format!("the copy's {end}"), a, b))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use gnomon_core::cuda::{KernelAttributes, ParamInfo};

    use super::*;

    fn default_pool() -> Vec<LiveBlock> {
        vec![LiveBlock { range: 0x7f00_0000_0000..0x7f00_0020_0000, pool: "PyTorch's default pool".into() }]
    }

    fn kernel(words: &[u64]) -> NodeKind {
        let layout = (0..words.len() as u64).map(|i| ParamInfo { offset: 8 * i, size: 8 }).collect();
        let params = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let (grid, block) = ([1; 3], [32, 1, 1]);
        let function = "vectorized_elementwise_kernel".into();
        NodeKind::Kernel { function, grid, block, shared_mem: 0, params, layout, launch: KernelAttributes::default() }
    }

    #[test]
    fn a_kernel_reading_a_tensor_outside_the_arena_is_refused_naming_the_parameter_and_pool() {
        let outside = default_pool();
        let arena_tensor = 0x6000_0000_0000;
        assert!(pointing(&kernel(&[arena_tensor, 4096]), &outside).is_none());
        let (what, address, block) = pointing(&kernel(&[arena_tensor, 0x7f00_0010_0000]), &outside).unwrap();
        let refused = KitError::PointsOutside {
            template: "b8".into(),
            node: 7,
            what,
            address,
            pool: block.pool.clone(),
            used: "a launch wrote into the block".into(),
        };
        insta::assert_snapshot!(refused.to_string(), @"template `b8` node 7: kernel `vectorized_elementwise_kernel` parameter 1 holds 0x7f0000100000, in PyTorch's default pool outside the gnomon arena, and the graph uses it (a launch wrote into the block), which no core maps: allocate what a graph reads while the arena routes tensors (not under gnomon.torch.outside_arena(), and on the thread that called use_arena), and capture into gnomon.torch.graph_pool()");
    }

    /// Every node that points outside is a suspect, each named once with its first such
    /// place; nothing outside, nothing to suspect.
    #[test]
    fn every_node_pointing_outside_is_a_suspect() {
        let node = |id, kind| NodeInfo { id: gnomon_core::cuda::NodeId(id), kind };
        let nodes = vec![
            node(0, kernel(&[0x6000_0000_0000])),
            node(1, kernel(&[0x7f00_0000_0010, 0x7f00_0000_0020])),
            node(2, NodeKind::Memset { dst: 0x7f00_0000_0100, value: 0, element_size: 4, count: 4 }),
        ];
        let found = suspects([("b8", &nodes)], &default_pool());
        let named: Vec<_> = found.iter().map(|s| (s.node, s.what.as_str(), s.address)).collect();
        assert_eq!(
            named,
            [
                (1, "kernel `vectorized_elementwise_kernel` parameter 0", 0x7f00_0000_0010),
                (2, "the memset's destination", 0x7f00_0000_0100)
            ]
        );
        assert!(suspects([("b8", &nodes)], &[]).is_empty());
    }

    #[test]
    fn copies_and_memsets_are_looked_up_at_both_ends() {
        let outside = default_pool();
        let copy = NodeKind::Memcpy { dst: 0x6000_0000_0000, src: 0x7f00_0000_0100, bytes: 64, host: None };
        assert_eq!(pointing(&copy, &outside).unwrap().0, "the copy's source");
        let memset = NodeKind::Memset { dst: 0x7f00_001f_ff00, value: 0, element_size: 4, count: 64 };
        assert_eq!(pointing(&memset, &outside).unwrap().1, 0x7f00_001f_ff00);
        assert!(pointing(&NodeKind::Empty, &outside).is_none());
        // Just past the block's end is not in it.
        assert!(pointing(&kernel(&[0x7f00_0020_0000]), &outside).is_none());
    }
}
