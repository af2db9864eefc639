//! Building many templates at once, on several threads of one context: the driver allows
//! work on distinct graphs from different threads. Nodes are described as plain data
//! ([`NodeSpec`]) that any thread may hold; handles are made on the building threads and
//! wrapped into owning types back on the calling thread.

use std::ptr;

use cudarc::driver::sys;

use super::{check, graph::device_copy, Context, Function, Result, RetainedGraph};
use crate::{errors::CudaError, format::ParamSlot};

/// A kernel node: the function's handle and layout, launch shape and parameter bytes.
#[derive(Clone, Copy, Debug)]
pub struct KernelSpec<'a> {
    raw: usize,
    layout: &'a [ParamSlot],
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem: u32,
    params: &'a [u8],
}

impl<'a> KernelSpec<'a> {
    /// Checks that `params` has the length `function`'s layout needs.
    pub fn new(
        function: &'a Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem: u32,
        params: &'a [u8],
    ) -> Result<Self> {
        function.param_pointers(params)?;
        let raw = function.raw() as usize;
        Ok(Self { raw, layout: function.layout(), grid, block, shared_mem, params })
    }
}

/// What a node does.
#[derive(Clone, Copy, Debug)]
pub enum NodeSpec<'a> {
    Kernel(KernelSpec<'a>),
    Memset { dst: u64, value: u32, element_size: u32, count: u64 },
    Memcpy { dst: u64, src: u64, bytes: u64 },
    Empty,
}

/// A template to build: nodes in an order where every dependency comes first, each with
/// the positions of the nodes it depends on.
#[derive(Debug, Default)]
pub struct GraphSpec<'a> {
    pub nodes: Vec<(NodeSpec<'a>, Vec<usize>)>,
}

/// The node of the graph that the driver refused, by position in `build_all`'s input.
#[derive(Debug)]
pub struct BuildFailure {
    pub graph: usize,
    pub node: usize,
    pub error: CudaError,
}

/// A built graph and its nodes, as integers, or where it failed.
type Built = std::result::Result<(usize, Vec<usize>), BuildFailure>;

/// Builds every graph of `specs` on up to `threads` threads; `functions[i]` are the
/// functions graph `i` uses, kept with it so their modules stay loaded.
///
/// # Safety
/// The addresses of memset and memcpy nodes must be device memory of this context
/// whenever an executable of the graph runs.
pub unsafe fn build_all(
    ctx: &Context,
    specs: &[GraphSpec<'_>],
    functions: Vec<Vec<Function>>,
    threads: usize,
) -> std::result::Result<Vec<RetainedGraph>, BuildFailure> {
    // Raw handles cross threads as integers: the threads only pass them to the driver.
    let raw_ctx = ctx.raw() as usize;
    let threads = threads.clamp(1, specs.len().max(1));
    let built: Vec<(usize, Built)> = std::thread::scope(|scope| {
        let shares: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let current = check("cuCtxSetCurrent", sys::cuCtxSetCurrent(raw_ctx as sys::CUcontext));
                    let own = specs.iter().enumerate().skip(t).step_by(threads);
                    own.map(|(i, spec)| {
                        let fail = |node, error| BuildFailure { graph: i, node, error };
                        (
                            i,
                            current
                                .clone()
                                .map_err(|e| fail(0, e))
                                .and_then(|_| build_raw(spec).map_err(|(n, e)| fail(n, e))),
                        )
                    })
                    .collect::<Vec<_>>()
                })
            })
            .collect();
        shares.into_iter().flat_map(|s| s.join().expect("a building thread does not panic")).collect()
    });
    let mut graphs: Vec<Option<RetainedGraph>> = (0..specs.len()).map(|_| None).collect();
    let mut first_failure: Option<BuildFailure> = None;
    for ((i, result), functions) in sorted(built).into_iter().zip(functions) {
        match result {
            Ok((raw, nodes)) => graphs[i] = Some(RetainedGraph::from_built(ctx, raw as sys::CUgraph, nodes, functions)),
            Err(f) => first_failure = first_failure.or(Some(f)),
        }
    }
    match first_failure {
        Some(f) => Err(f),
        None => Ok(graphs.into_iter().map(|g| g.expect("every graph was built")).collect()),
    }
}

fn sorted<T>(mut v: Vec<(usize, T)>) -> Vec<(usize, T)> {
    v.sort_by_key(|(i, _)| *i);
    v
}

/// Creates one graph and adds its nodes; on failure destroys it and says which node.
fn build_raw(spec: &GraphSpec<'_>) -> std::result::Result<(usize, Vec<usize>), (usize, CudaError)> {
    let mut graph = ptr::null_mut();
    // SAFETY: writes one handle, owned by the caller (or destroyed below on failure).
    check("cuGraphCreate", unsafe { sys::cuGraphCreate(&mut graph, 0) }).map_err(|e| (0, e))?;
    let mut nodes: Vec<sys::CUgraphNode> = Vec::with_capacity(spec.nodes.len());
    for (n, (op, deps)) in spec.nodes.iter().enumerate() {
        let deps: Vec<sys::CUgraphNode> = deps.iter().map(|&d| nodes[d]).collect();
        // SAFETY: `graph` is live and used by this thread alone; `deps` are its nodes; the
        // caller of `build_all` vouched for memset and memcpy addresses.
        match unsafe { add_raw(graph, op, &deps) } {
            Ok(node) => nodes.push(node),
            Err(e) => {
                // SAFETY: destroys the graph made above, which nothing else holds.
                unsafe { sys::cuGraphDestroy(graph) };
                return Err((n, e));
            }
        }
    }
    Ok((graph as usize, nodes.into_iter().map(|n| n as usize).collect()))
}

/// Adds one node to `graph` after `deps`.
///
/// # Safety
/// `graph` must be live and not in use by another thread, `deps` its nodes, and memset
/// and memcpy addresses device memory of the current context.
pub(super) unsafe fn add_raw(
    graph: sys::CUgraph,
    op: &NodeSpec<'_>,
    deps: &[sys::CUgraphNode],
) -> Result<sys::CUgraphNode> {
    let mut node = ptr::null_mut();
    let (d, n) = (deps.as_ptr(), deps.len());
    match op {
        NodeSpec::Kernel(k) => {
            let mut pointers: Vec<*mut std::ffi::c_void> =
                k.layout.iter().map(|slot| k.params[slot.offset as usize..].as_ptr() as *mut _).collect();
            let mut p: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
            p.func = k.raw as sys::CUfunction;
            (p.gridDimX, p.gridDimY, p.gridDimZ) = (k.grid[0], k.grid[1], k.grid[2]);
            (p.blockDimX, p.blockDimY, p.blockDimZ) = (k.block[0], k.block[1], k.block[2]);
            p.sharedMemBytes = k.shared_mem;
            p.kernelParams = pointers.as_mut_ptr();
            // The driver copies the parameter values while adding the node.
            check("cuGraphAddKernelNode", sys::cuGraphAddKernelNode_v2(&mut node, graph, d, n, &p))?;
        }
        NodeSpec::Memset { dst, value, element_size, count } => {
            let p = sys::CUDA_MEMSET_NODE_PARAMS {
                dst: *dst,
                pitch: 0,
                value: *value,
                elementSize: *element_size,
                width: *count as usize,
                height: 1,
            };
            let mut ctx = ptr::null_mut();
            check("cuCtxGetCurrent", sys::cuCtxGetCurrent(&mut ctx))?;
            check("cuGraphAddMemsetNode", sys::cuGraphAddMemsetNode(&mut node, graph, d, n, &p, ctx))?;
        }
        NodeSpec::Memcpy { dst, src, bytes } => {
            let p = device_copy(*dst, *src, *bytes);
            let mut ctx = ptr::null_mut();
            check("cuCtxGetCurrent", sys::cuCtxGetCurrent(&mut ctx))?;
            check("cuGraphAddMemcpyNode", sys::cuGraphAddMemcpyNode(&mut node, graph, d, n, &p, ctx))?;
        }
        NodeSpec::Empty => check("cuGraphAddEmptyNode", sys::cuGraphAddEmptyNode(&mut node, graph, d, n))?,
    }
    Ok(node)
}
