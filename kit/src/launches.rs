//! Expectations from repeated launches in the capturing process: each template is launched
//! several times, each time from the core's state as replay loads it (replay's own
//! [`LoadedState`]), and every compared output is digested. An output that some launch gave
//! differently is recorded as varying, with its spread, its other digests and its first
//! launch's bytes; the first node that gives different results from the same inputs is
//! found by launching growing prefixes of the graph. Each template's launches are timed
//! too (replay's [`time_launches`]): what a restored template's speed is held to.

use std::collections::HashMap;

use gnomon_core::{
    cuda::{Context, GraphExec, RetainedGraph, Stream},
    export::Exporter,
    format::{hash_hex, Expectation, Manifest, OutputDigest, Variation},
    replay::{time_launches, Checksummer, LoadedState, Ranks, POISON, TIMED_LAUNCHES},
    spread::{Element, Spread},
};
use serde::Serialize;

use crate::{
    declare::{Compared, Declared},
    errors::KitError,
};

/// Launches of each template an export compares unless told otherwise.
pub const DEFAULT_LAUNCHES: u32 = 8;

/// One compared output over a template's launches.
struct Observed<'d> {
    compared: &'d Compared,
    first: Vec<u8>,
    sha256: String,
    /// Other digests, in the order they first appeared.
    others: Vec<String>,
    spread: Spread,
}

impl<'d> Observed<'d> {
    fn first(compared: &'d Compared, bytes: Vec<u8>) -> Self {
        let sha256 = hash_hex(&bytes[..]).expect("hashing memory cannot fail");
        Self { compared, first: bytes, sha256, others: Vec::new(), spread: Spread::default() }
    }

    fn again(&mut self, bytes: &[u8]) {
        let sha256 = hash_hex(bytes).expect("hashing memory cannot fail");
        if sha256 != self.sha256 {
            self.spread = self.spread.widest(Spread::between(self.compared.element, &self.first, bytes));
            if !self.others.contains(&sha256) {
                self.others.push(sha256);
            }
        }
    }
}

/// An output that varied, for the export's summary.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Varied {
    pub template: String,
    pub buffer: String,
    pub element: Element,
    pub distinct: usize,
    pub launches: u32,
    pub max_abs: f64,
    pub max_ulp: u64,
    pub differing_fraction: f64,
    /// The first node found to vary with the same inputs: id, kernel.
    pub nodes: Vec<(String, String)>,
}

/// What [`expectations`] found.
pub struct Expected {
    pub expectations: Vec<Expectation>,
    pub varied: Vec<Varied>,
}

/// Launches each template `launches` times from the core's state and returns its
/// expectations; a varying output's first launch is stored in the core through `exporter`.
pub fn expectations(
    ctx: &Context,
    exporter: &Exporter,
    graphs: &[(String, RetainedGraph)],
    flags: u64,
    declared: &Declared,
    launches: u32,
    ranks: Option<&Ranks>,
) -> Result<Expected, KitError> {
    let m = exporter.manifest();
    let stream = ctx.stream()?;
    let state = LoadedState::keep(ctx, m, None)?;
    state.fill_unstored(POISON)?;
    let checksummer = Checksummer::new(ctx)?;
    let mut expected = Expected { expectations: Vec::new(), varied: Vec::new() };
    for (name, graph) in graphs {
        let exec = graph.instantiate(flags)?;
        let compared = declared.compared_after(name).collect();
        let observed = observe(&state, &stream, &exec, compared, launches, ranks)?;
        if observed.is_empty() {
            return Err(KitError::NoOutputs(name.clone()));
        }
        // A rank launches its prefixes and times its launches alone, and a collective
        // kernel waits for its peers: neither is done for a rank of a set.
        let varies = observed.iter().any(|o| !o.others.is_empty());
        let nodes = match varies && ranks.is_none() {
            true => first_varying_node(&state, &stream, &checksummer, graph, flags, launches)?,
            false => Vec::new(),
        };
        let mut outputs = Vec::new();
        for o in observed {
            let variation = match o.others.is_empty() {
                true => None,
                false => {
                    expected.varied.push(varied(m, name, &o, &nodes, launches));
                    Some(Variation {
                        element: o.compared.element,
                        launches,
                        sha256s: o.others,
                        max_abs: o.spread.max_abs,
                        max_ulp: o.spread.max_ulp,
                        differing_fraction: o.spread.differing_fraction(),
                        file: exporter.store_output(&o.first)?,
                        nodes: nodes.iter().map(|n| format!("n{n}")).collect(),
                    })
                }
            };
            outputs.push(OutputDigest { buffer: o.compared.buffer.clone(), sha256: o.sha256, variation });
        }
        let speed = match ranks {
            None => Some(time_launches(ctx, &exec, &state, &stream, TIMED_LAUNCHES)?),
            Some(_) => None,
        };
        expected.expectations.push(Expectation {
            template: name.clone(),
            outputs,
            reference: None,
            tolerance: None,
            speed,
        });
    }
    Ok(expected)
}

/// Each compared output of `graph` over `launches` launches from the loaded state. A rank
/// of a set launches with its peers, as replay does: all reset, all launch, all finish.
fn observe<'d>(
    state: &LoadedState,
    stream: &Stream,
    exec: &GraphExec,
    compared: Vec<&'d Compared>,
    launches: u32,
    ranks: Option<&Ranks>,
) -> Result<Vec<Observed<'d>>, KitError> {
    let with_peers = || -> Result<(), KitError> {
        match ranks {
            Some(ranks) => Ok(ranks.sync_after(stream)?),
            None => Ok(stream.synchronize()?),
        }
    };
    let mut observed: Vec<Observed> = Vec::new();
    for launch in 0..launches.max(1) {
        state.reset(stream)?;
        with_peers()?;
        exec.launch(stream)?;
        with_peers()?;
        for (i, c) in compared.iter().enumerate() {
            let bytes = state.read(&c.buffer)?;
            match launch {
                0 => observed.push(Observed::first(c, bytes)),
                _ => observed[i].again(&bytes),
            }
        }
    }
    Ok(observed)
}

/// The first node, in a topological order of `graph`, whose prefix leaves the writable
/// state differing between launches while the prefix before it does not: given the same
/// inputs, that node's kernel gave different results. Empty when no prefix varied within
/// `launches` launches (a rare variation can hide from one search).
fn first_varying_node(
    state: &LoadedState,
    stream: &Stream,
    checksummer: &Checksummer,
    graph: &RetainedGraph,
    flags: u64,
    launches: u32,
) -> Result<Vec<usize>, KitError> {
    let order = topological(graph.nodes()?.len(), &graph.edges()?.iter().map(|e| (e.0 .0, e.1 .0)).collect::<Vec<_>>());
    let rank: HashMap<usize, usize> = order.iter().enumerate().map(|(r, &n)| (n, r)).collect();
    let check = state.writable_check(checksummer)?;
    let varies = |k: usize| -> Result<bool, KitError> {
        let exec = graph.without(|n| rank[&n] < k)?.instantiate(flags)?;
        let mut first = None;
        for _ in 0..launches.max(2) {
            state.reset(stream)?;
            exec.launch(stream)?;
            let sums = check.run(stream)?;
            match &first {
                None => first = Some(sums),
                Some(f) if *f != sums => return Ok(true),
                Some(_) => {}
            }
        }
        Ok(false)
    };
    Ok(shortest_varying_prefix(order.len(), varies)?.map(|k| vec![order[k - 1]]).unwrap_or_default())
}

/// The smallest `k` in `1..=n` for which `varies(k)` holds, by halving, taking the empty
/// prefix as not varying; `None` when the whole (`varies(n)`) does not vary. About
/// log₂ n calls.
fn shortest_varying_prefix(
    n: usize,
    mut varies: impl FnMut(usize) -> Result<bool, KitError>,
) -> Result<Option<usize>, KitError> {
    // Invariant: the prefix of `lo` nodes was not seen to vary, that of `hi` nodes was.
    let (mut lo, mut hi) = (0, n);
    if n == 0 || !varies(hi)? {
        return Ok(None);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match varies(mid)? {
            true => hi = mid,
            false => lo = mid,
        }
    }
    Ok(Some(hi))
}

/// Nodes `0..count` in an order where every edge's source comes before its target, the
/// lower position first among those ready (so a graph captured in order keeps its order).
fn topological(count: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut waiting = vec![0usize; count];
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); count];
    for &(from, to) in edges {
        waiting[to] += 1;
        after[from].push(to);
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..count).filter(|&n| waiting[n] == 0).collect();
    let mut order = Vec::with_capacity(count);
    while let Some(n) = ready.pop_first() {
        order.push(n);
        for &next in &after[n] {
            waiting[next] -= 1;
            if waiting[next] == 0 {
                ready.insert(next);
            }
        }
    }
    order
}

fn varied(m: &Manifest, template: &str, o: &Observed, nodes: &[usize], launches: u32) -> Varied {
    let kernel_of = |n: usize| {
        let t = m.templates.iter().find(|t| t.name == template);
        let node = t.and_then(|t| t.nodes.iter().find(|node| node.id == format!("n{n}")));
        match node.map(|node| &node.op) {
            Some(gnomon_core::format::NodeOp::Kernel(k)) => k.function.clone(),
            _ => "(not a kernel)".to_owned(),
        }
    };
    Varied {
        template: template.to_owned(),
        buffer: o.compared.buffer.clone(),
        element: o.compared.element,
        distinct: o.others.len() + 1,
        launches,
        max_abs: o.spread.max_abs,
        max_ulp: o.spread.max_ulp,
        differing_fraction: o.spread.differing_fraction(),
        nodes: nodes.iter().map(|&n| (format!("n{n}"), kernel_of(n))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_captured_order_is_kept_and_a_shuffled_one_is_sorted_out() {
        assert_eq!(topological(4, &[(0, 1), (1, 2), (0, 3)]), [0, 1, 2, 3]);
        assert_eq!(topological(4, &[(3, 0), (2, 3), (1, 0)]), [1, 2, 3, 0]);
        assert_eq!(topological(3, &[]), [0, 1, 2]);
    }

    #[test]
    fn the_shortest_varying_prefix_is_found_by_halving() {
        for (n, first) in [(100, 37), (100, 1), (100, 100), (1, 1), (7775, 4242)] {
            let mut calls = 0;
            let found = shortest_varying_prefix(n, |k| {
                calls += 1;
                Ok(k >= first)
            });
            assert_eq!(found.unwrap(), Some(first), "{n} nodes, varying from {first}");
            assert!(calls <= (n as f64).log2().ceil() as usize + 1, "{calls} launches of prefixes for {n}");
        }
        assert_eq!(shortest_varying_prefix(100, |_| Ok(false)).unwrap(), None, "the whole did not vary");
        assert_eq!(shortest_varying_prefix(0, |_| Ok(true)).unwrap(), None, "no nodes");
    }

    /// What the export's summary says of a varying output: its spread, and each node found
    /// with its kernel.
    #[test]
    fn a_varied_output_names_its_nodes_kernels() {
        let m = gnomon_fixtures::sample::CoreDraft::sample().manifest;
        let c = compared(Element::Float32);
        let mut o = Observed::first(&c, vec![0; 8]);
        o.again(&[0, 0, 0, 0, 1, 0, 0, 0]);
        let v = varied(&m, "decode-b1", &o, &[1, 0], 8);
        assert_eq!((v.distinct, v.launches, v.max_ulp, v.differing_fraction), (2, 8, 1, 0.5));
        let nodes = [("n1".to_string(), "axpy".to_string()), ("n0".to_string(), "(not a kernel)".to_string())];
        assert_eq!(v.nodes, nodes);
    }

    fn compared(element: Element) -> Compared {
        Compared { buffer: "output/y".into(), element, templates: Vec::new() }
    }

    /// An output is varying when one launch gave other bytes; its spread is the widest of
    /// any launch from the first, and each other digest is listed once.
    #[test]
    fn launches_that_differ_widen_the_spread_and_list_their_digests_once() {
        let c = compared(Element::Float32);
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let one_ulp = f32::from_bits(2.0f32.to_bits() + 1);
        let three_ulp = f32::from_bits(2.0f32.to_bits() + 3);
        let mut o = Observed::first(&c, bytes(&[1.0, 2.0]));
        o.again(&bytes(&[1.0, 2.0]));
        assert!(o.others.is_empty(), "the same bytes again");
        o.again(&bytes(&[1.0, one_ulp]));
        o.again(&bytes(&[1.0, three_ulp]));
        o.again(&bytes(&[1.0, one_ulp]));
        assert_eq!(o.others.len(), 2);
        assert_eq!((o.spread.max_ulp, o.spread.differing, o.spread.elements), (3, 1, 2));
        assert_eq!(o.spread.differing_fraction(), 0.5);
    }
}
