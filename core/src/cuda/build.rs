//! Building templates from plain descriptions of their nodes ([`GraphSpec`]), so replay
//! can describe a template first and name the node the driver refuses. (Building on
//! several threads was measured on the H200: no faster than one, 2.5–3.2 µs/node either
//! way, so it is done on the calling thread.)

use std::{ptr, time::Instant};

use cudarc::driver::sys;

use super::{
    attributes::edge_data,
    check,
    graph::{instantiate_fed, wrap_in_order},
    node::{add_raw, NodeSpec},
    Context, Dependency, Function, GraphExec, RetainedGraph,
};
use crate::errors::CudaError;

/// A template to build: nodes in an order where every dependency comes first, each with
/// the positions of the nodes it fully depends on, and the other edges `(from, to,
/// dependency)` added once every node exists.
#[derive(Default)]
pub struct GraphSpec<'a> {
    pub nodes: Vec<(NodeSpec<'a>, Vec<usize>)>,
    pub typed_edges: Vec<(usize, usize, Dependency)>,
}

/// The node of the graph that the driver refused, by position in `build_all`'s input.
#[derive(Debug)]
pub struct BuildFailure {
    pub graph: usize,
    pub node: usize,
    pub error: CudaError,
}

/// Builds every graph of `specs`; `functions[i]` are the functions graph `i` uses, kept
/// with it so their modules stay loaded.
///
/// # Safety
/// The addresses of memset and memcpy nodes must be device memory of this context
/// whenever an executable of the graph runs.
pub unsafe fn build_all(
    ctx: &Context,
    specs: &[GraphSpec<'_>],
    functions: Vec<Vec<Function>>,
) -> std::result::Result<Vec<RetainedGraph>, BuildFailure> {
    let mut graphs = Vec::with_capacity(specs.len());
    for (graph, (spec, functions)) in specs.iter().zip(functions).enumerate() {
        let (raw, nodes) = build_raw(ctx, spec).map_err(|(node, error)| BuildFailure { graph, node, error })?;
        graphs.push(RetainedGraph::from_built(ctx, raw, nodes, functions));
    }
    Ok(graphs)
}

/// Graphs built and instantiated by [`build_and_instantiate`], with when the last was
/// built (seconds from the start) and the seconds spent building them.
pub struct Ready {
    pub graphs: Vec<RetainedGraph>,
    pub execs: Vec<GraphExec>,
    pub built_s: f64,
    pub building_s: f64,
}

/// Why [`build_and_instantiate`] stopped.
#[derive(Debug)]
pub enum ReadyFailure {
    Build(BuildFailure),
    Instantiate(CudaError),
}

/// When [`build_and_instantiate`] hands a built graph to the instantiating threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// As soon as it is built: instantiating one template overlaps building the next.
    WhileBuilding,
    /// Once every graph is built: the driver builds and instantiates at different times.
    AfterBuilding,
}

/// As [`build_all`], and each graph goes, when `overlap` says, to one of `threads` other
/// threads that instantiates it with `flags[i]`, as given (the flags contract is applied
/// above this module, in `crate::translate`).
///
/// # Safety
/// As [`build_all`].
pub unsafe fn build_and_instantiate(
    ctx: &Context,
    specs: &[GraphSpec<'_>],
    functions: Vec<Vec<Function>>,
    flags: &[u64],
    (overlap, threads): (Overlap, usize),
) -> std::result::Result<Ready, ReadyFailure> {
    ctx.settle().map_err(ReadyFailure::Instantiate)?;
    let started = Instant::now();
    let (mut graphs, mut functions) = (Vec::with_capacity(specs.len()), functions.into_iter());
    let (built, made) = instantiate_fed(ctx, threads.clamp(1, specs.len().max(1)), |submit| {
        let (mut held_back, mut failure, mut building_s) = (Vec::new(), None, 0.0);
        let mut step = || {
            let graph = graphs.len();
            if failure.is_some() || graph == specs.len() {
                return false;
            }
            let building = Instant::now();
            match build_raw(ctx, &specs[graph]) {
                // From here until the threads are joined, only the instantiating thread uses it.
                Ok((raw, nodes)) => {
                    match overlap {
                        Overlap::WhileBuilding => submit(graph, raw, flags[graph]),
                        Overlap::AfterBuilding => held_back.push((graph, raw)),
                    }
                    let used = functions.next().expect("functions for every graph");
                    graphs.push(RetainedGraph::from_built(ctx, raw, nodes, used));
                }
                Err((node, error)) => failure = Some(BuildFailure { graph, node, error }),
            }
            building_s += building.elapsed().as_secs_f64();
            true
        };
        while step() {}
        let built_s = started.elapsed().as_secs_f64();
        held_back.into_iter().for_each(|(graph, raw)| submit(graph, raw, flags[graph]));
        failure.map_or(Ok((built_s, building_s)), Err)
    });
    // Executables made before a build failed are destroyed here, with the error.
    let held: Vec<&RetainedGraph> = graphs.iter().collect();
    let execs = wrap_in_order(&held, flags, made);
    built.map_err(ReadyFailure::Build).and_then(|(built_s, building_s)| {
        let execs = execs.map_err(ReadyFailure::Instantiate)?;
        Ok(Ready { graphs, execs, built_s, building_s })
    })
}

/// Creates one graph and adds its nodes; on failure destroys it and says which node.
fn build_raw(
    ctx: &Context,
    spec: &GraphSpec<'_>,
) -> std::result::Result<(sys::CUgraph, Vec<sys::CUgraphNode>), (usize, CudaError)> {
    let mut graph = ptr::null_mut();
    // SAFETY: writes one handle, owned by the caller (or destroyed below on failure).
    check("cuGraphCreate", unsafe { sys::cuGraphCreate(&mut graph, 0) }).map_err(|e| (0, e))?;
    let mut nodes: Vec<sys::CUgraphNode> = Vec::with_capacity(spec.nodes.len());
    for (n, (op, deps)) in spec.nodes.iter().enumerate() {
        let deps: Vec<sys::CUgraphNode> = deps.iter().map(|&d| nodes[d]).collect();
        // SAFETY: `graph` is live and held by this call alone; `deps` are its nodes; the
        // caller of `build_all` vouched for memset and memcpy addresses.
        match unsafe { add_raw(graph, op, &deps) } {
            Ok(node) => nodes.push(node),
            Err(e) => {
                // SAFETY: destroys the graph made above, which nothing else holds.
                ctx.released("cuGraphDestroy", unsafe { sys::cuGraphDestroy(graph) });
                return Err((n, e));
            }
        }
    }
    for &(from, to, dependency) in &spec.typed_edges {
        let data = edge_data(dependency);
        // SAFETY: both nodes belong to `graph`, which this call alone holds.
        let added = check("cuGraphAddDependencies", unsafe {
            sys::cuGraphAddDependencies_v2(graph, &nodes[from], &nodes[to], &data, 1)
        });
        if let Err(e) = added {
            // SAFETY: as above.
            ctx.released("cuGraphDestroy", unsafe { sys::cuGraphDestroy(graph) });
            return Err((to, e));
        }
    }
    Ok((graph, nodes))
}
