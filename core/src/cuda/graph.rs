//! Graph templates and executables. Only capture or explicit construction makes a
//! [`RetainedGraph`]; only [`RetainedGraph::instantiate_as_given`] (for
//! `crate::translate::Instantiate`) and the threads of [`instantiate_fed`] (for
//! `build::build_and_instantiate`) make a [`GraphExec`].
//!
//! NVIDIA's rules: a graph must not be used from two threads at once; an executable may be
//! launched while its template is modified or destroyed.

use std::{
    collections::{hash_map::Entry, HashMap},
    ptr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        mpsc, Mutex, OnceLock,
    },
};

use cudarc::driver::sys;

use super::{
    attributes::{dependency, edge_data, node_launch_attributes},
    check,
    node::{add_raw, device_copy, KernelSpec, NodeSpec},
    Context, CudaError, Dependency, Function, KernelAttributes, LoadedModule, ParamInfo, Result, Stream,
};

static LIVE_EXECUTABLES: AtomicUsize = AtomicUsize::new(0);

static INSTANTIATING_THREAD_SETUP: OnceLock<fn()> = OnceLock::new();

/// Has every thread of [`instantiate_fed`] run `setup` before its first instantiation:
/// the binary, which owns the allocator, gives them a heap of their own. The first setup
/// set stays.
pub fn on_instantiating_threads(setup: fn()) {
    let _a_later_setup_is_ignored = INSTANTIATING_THREAD_SETUP.set(setup);
}

/// Executables alive in this process: how a case proves an operation made none.
pub fn live_executables() -> usize {
    LIVE_EXECUTABLES.load(Ordering::SeqCst)
}

fn instantiate_raw(graph: sys::CUgraph, flags: u64) -> Result<sys::CUgraphExec> {
    let mut raw = ptr::null_mut();
    // SAFETY: the template is live and used by this thread alone; writes one handle.
    check("cuGraphInstantiateWithFlags", unsafe { sys::cuGraphInstantiateWithFlags(&mut raw, graph, flags) })?;
    Ok(raw)
}

/// A raw executable made on an instantiating thread, by its template's position; raw
/// handles cross threads as integers, which the threads only pass to the driver.
pub(super) type Made = (usize, Result<usize>);

/// Instantiates on `threads` threads of `ctx`'s context every template `feed` hands
/// over while it runs, as `(position, template, flags)`: a thread takes the next one as
/// soon as it is free (the driver allows concurrent work on distinct graphs). Returns
/// what `feed` returned and what the threads made.
pub(super) fn instantiate_fed<T>(
    ctx: &Context,
    threads: usize,
    feed: impl FnOnce(&mut dyn FnMut(usize, sys::CUgraph, u64)) -> T,
) -> (T, Vec<Made>) {
    let raw_ctx = ctx.raw() as usize;
    let (work_tx, work_rx) = mpsc::channel::<(usize, usize, u64)>();
    let work_rx = Mutex::new(work_rx);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                let work_rx = &work_rx;
                scope.spawn(move || {
                    if let Some(setup) = INSTANTIATING_THREAD_SETUP.get() {
                        setup();
                    }
                    // SAFETY: `raw_ctx` is the live context the templates were made in.
                    let current = check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(raw_ctx as sys::CUcontext) });
                    let mut made = Vec::new();
                    while let Ok((i, graph, flags)) = work_rx.lock().expect("no thread panics holding it").recv() {
                        let exec = current.clone().and_then(|_| instantiate_raw(graph as sys::CUgraph, flags));
                        made.push((i, exec.map(|e| e as usize)));
                    }
                    made
                })
            })
            .collect();
        let fed = feed(&mut |i, graph, flags| work_tx.send((i, graph as usize, flags)).expect("the threads wait"));
        drop(work_tx);
        let made = workers.into_iter().flat_map(|w| w.join().expect("an instantiating thread does not panic"));
        (fed, made.collect())
    })
}

/// Takes ownership of what the instantiating threads made from `graphs` (each with its
/// `flags`), in the order of `graphs`; on the first failure, every other executable is
/// destroyed and the error returned.
pub(super) fn wrap_in_order(graphs: &[&RetainedGraph], flags: &[u64], mut made: Vec<Made>) -> Result<Vec<GraphExec>> {
    made.sort_by_key(|(i, _)| *i);
    let mut execs = Vec::with_capacity(made.len());
    let mut failure = None;
    for (i, raw) in made {
        match raw.and_then(|raw| graphs[i].wrap(raw as sys::CUgraphExec, flags[i])) {
            Ok(exec) => execs.push(exec),
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    failure.map_or(Ok(execs), Err)
}

/// A node of a [`RetainedGraph`], by position in [`RetainedGraph::nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeId(pub usize);

/// What a node does, read back from the driver.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    Kernel {
        function: String,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem: u32,
        params: Vec<u8>,
        layout: Vec<ParamInfo>,
        /// Every launch attribute, as the driver reports it.
        launch: KernelAttributes,
    },
    Memset {
        dst: u64,
        value: u32,
        element_size: u32,
        count: u64,
    },
    Memcpy {
        dst: u64,
        src: u64,
        bytes: u64,
        /// Set when one end is host memory (pinned or pageable), which no core can hold.
        host: Option<HostEnd>,
    },
    Empty,
    /// A memset or copy that is no one contiguous run (rows with gaps between them, a CUDA
    /// array), as the driver describes it.
    Unflat(String),
    Other(String),
}

/// The host end of a copy: which side, and its address in the capturing process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostEnd {
    Source(u64),
    Destination(u64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    pub id: NodeId,
    pub kind: NodeKind,
}

/// A graph template (`CUgraph`), never instantiated by itself.
pub struct RetainedGraph {
    ctx: Context,
    raw: sys::CUgraph,
    /// Nodes added through the builder methods, in order.
    added: Vec<sys::CUgraphNode>,
    /// Functions of added kernel nodes: their modules must stay loaded while this graph
    /// or an executable made from it exists.
    functions: Vec<Function>,
}

impl RetainedGraph {
    pub(super) fn from_raw(ctx: Context, raw: sys::CUgraph) -> Self {
        Self { ctx, raw, added: Vec::new(), functions: Vec::new() }
    }

    /// Takes ownership of a graph `build::build_all` made, with its nodes in order.
    pub(super) fn from_built(
        ctx: &Context,
        raw: sys::CUgraph,
        added: Vec<sys::CUgraphNode>,
        functions: Vec<Function>,
    ) -> Self {
        Self { ctx: ctx.clone(), raw, added, functions }
    }

    /// A copy of a graph another part of the process captured (PyTorch's `CUDAGraph`
    /// kept with `keep_graph=True`), owned by this value; the original stays theirs.
    ///
    /// # Safety
    /// `raw` must be a live `CUgraph` of `ctx`'s context, not modified during the call.
    pub unsafe fn clone_of(ctx: &Context, raw: u64) -> Result<Self> {
        let mut copy = ptr::null_mut();
        ctx.call("cuGraphClone", || sys::cuGraphClone(&mut copy, raw as sys::CUgraph))?;
        Ok(Self::from_raw(ctx.clone(), copy))
    }

    /// A copy of this graph without the nodes `keep` leaves out (by position in
    /// [`Self::nodes`]), their edges going with them. Keeping every predecessor of each
    /// kept node (a prefix of a topological order) leaves a graph that runs the same
    /// kernels on the same inputs up to there: what finds the node an output's variation
    /// starts at.
    pub fn without(&self, keep: impl Fn(usize) -> bool) -> Result<Self> {
        let mut copy = ptr::null_mut();
        // SAFETY: clones this live graph into a new one, destroyed in `Drop`.
        self.ctx.call("cuGraphClone", || unsafe { sys::cuGraphClone(&mut copy, self.raw) })?;
        let pruned = Self { ctx: self.ctx.clone(), raw: copy, added: Vec::new(), functions: self.functions.clone() };
        for (_, node) in self.raw_nodes()?.into_iter().enumerate().filter(|(i, _)| !keep(*i)) {
            let mut cloned = ptr::null_mut();
            // SAFETY: `node` is a node of this graph, `copy` its clone.
            check("cuGraphNodeFindInClone", unsafe { sys::cuGraphNodeFindInClone(&mut cloned, node, copy) })?;
            // SAFETY: `cloned` is a node of `copy`, which no executable was made from yet.
            check("cuGraphDestroyNode", unsafe { sys::cuGraphDestroyNode(cloned) })?;
        }
        Ok(pruned)
    }

    /// An empty template to build node by node.
    pub fn empty(ctx: &Context) -> Result<Self> {
        let mut raw = ptr::null_mut();
        // SAFETY: writes one handle; destroyed in `Drop`.
        ctx.call("cuGraphCreate", || unsafe { sys::cuGraphCreate(&mut raw, 0) })?;
        Ok(Self::from_raw(ctx.clone(), raw))
    }

    /// Instantiates with `flags` as given; `crate::translate::Instantiate` applies the
    /// flags contract first, and is the way in from outside this crate.
    pub(crate) fn instantiate_as_given(&self, flags: u64) -> Result<GraphExec> {
        self.ctx.settle()?;
        self.wrap(instantiate_raw(self.raw, flags)?, flags)
    }

    /// Takes ownership of an executable made from this template.
    fn wrap(&self, raw: sys::CUgraphExec, flags: u64) -> Result<GraphExec> {
        LIVE_EXECUTABLES.fetch_add(1, Ordering::SeqCst);
        let mut exec = GraphExec {
            ctx: self.ctx.clone(),
            _functions: self.functions.clone(),
            raw,
            flags,
            reported: 0,
            template: String::new(),
        };
        let mut reported = 0u64;
        // SAFETY: `raw` is the executable just made.
        check("cuGraphExecGetFlags", unsafe { sys::cuGraphExecGetFlags(raw, &mut reported) })?;
        exec.reported = reported;
        Ok(exec)
    }

    /// Every node, in the driver's order, with what it does.
    pub fn nodes(&self) -> Result<Vec<NodeInfo>> {
        self.raw_nodes()?
            .into_iter()
            .enumerate()
            .map(|(i, node)| Ok(NodeInfo { id: NodeId(i), kind: node_kind(node)? }))
            .collect()
    }

    /// Each kernel node's function and the kernels of its module, by position in
    /// [`Self::nodes`]: what maps a node to the image its function was loaded from. A
    /// module is asked once per distinct function.
    pub fn kernel_functions(&self) -> Result<Vec<(NodeId, Function, LoadedModule)>> {
        let mut modules: HashMap<usize, LoadedModule> = HashMap::new();
        let mut out = Vec::new();
        for (i, node) in self.raw_nodes()?.into_iter().enumerate() {
            let Some(raw) = kernel_function(node)? else { continue };
            let function = Function::from_node(raw)?;
            let module = match modules.entry(raw as usize) {
                Entry::Occupied(known) => known.get().clone(),
                Entry::Vacant(new) => new.insert(function.module()?).clone(),
            };
            out.push((NodeId(i), function, module));
        }
        Ok(out)
    }

    /// Every edge as `(from, to, dependency)` with positions in [`Self::nodes`], sorted.
    pub fn edges(&self) -> Result<Vec<(NodeId, NodeId, Dependency)>> {
        let nodes = self.raw_nodes()?;
        let mut count = 0usize;
        // SAFETY: asks for the count only.
        check("cuGraphGetEdges", unsafe {
            sys::cuGraphGetEdges_v2(self.raw, ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), &mut count)
        })?;
        if count == 0 {
            return Ok(Vec::new()); // the driver refuses empty arrays
        }
        let (mut from, mut to) = (vec![ptr::null_mut(); count], vec![ptr::null_mut(); count]);
        let mut data = vec![edge_data(Dependency::Full); count];
        // SAFETY: the three arrays hold `count` entries.
        check("cuGraphGetEdges", unsafe {
            sys::cuGraphGetEdges_v2(self.raw, from.as_mut_ptr(), to.as_mut_ptr(), data.as_mut_ptr(), &mut count)
        })?;
        let position = |n: sys::CUgraphNode| {
            NodeId(nodes.iter().position(|&m| m == n).expect("edge endpoints are nodes of the graph"))
        };
        let mut edges = Vec::with_capacity(count);
        for ((&f, &t), d) in from.iter().zip(&to).zip(&data) {
            edges.push((position(f), position(t), dependency(d)?));
        }
        edges.sort_unstable_by_key(|&(f, t, _)| (f, t));
        Ok(edges)
    }

    fn raw_nodes(&self) -> Result<Vec<sys::CUgraphNode>> {
        let mut count = 0usize;
        // SAFETY: asks for the count only.
        check("cuGraphGetNodes", unsafe { sys::cuGraphGetNodes(self.raw, ptr::null_mut(), &mut count) })?;
        let mut nodes = vec![ptr::null_mut(); count];
        // SAFETY: `nodes` holds `count` entries.
        check("cuGraphGetNodes", unsafe { sys::cuGraphGetNodes(self.raw, nodes.as_mut_ptr(), &mut count) })?;
        Ok(nodes)
    }

    fn deps(&self, deps: &[NodeId]) -> Vec<sys::CUgraphNode> {
        deps.iter().map(|d| self.added[d.0]).collect()
    }

    fn push(&mut self, node: sys::CUgraphNode) -> NodeId {
        self.added.push(node);
        NodeId(self.added.len() - 1)
    }

    /// Adds a kernel node from recorded parameter bytes; `deps` are ids returned by
    /// earlier calls.
    pub fn add_kernel(
        &mut self,
        function: &Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem: u32,
        params: &[u8],
        deps: &[NodeId],
    ) -> Result<NodeId> {
        let spec = NodeSpec::Kernel(KernelSpec::new(function, grid, block, shared_mem, params)?);
        let deps = self.deps(deps);
        // SAFETY: the graph is live and owned by this thread; `deps` are its nodes.
        let node = unsafe { add_raw(self.raw, &spec, &deps) }?;
        self.functions.push(function.clone());
        Ok(self.push(node))
    }
}

impl Drop for RetainedGraph {
    fn drop(&mut self) {
        // SAFETY: destroys the template; executables made from it stay valid.
        let status = unsafe { sys::cuGraphDestroy(self.raw) };
        self.ctx.released("cuGraphDestroy", status);
    }
}

fn node_type(node: sys::CUgraphNode) -> Result<sys::CUgraphNodeType> {
    let mut ty = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
    // SAFETY: `node` belongs to a live graph.
    check("cuGraphNodeGetType", unsafe { sys::cuGraphNodeGetType(node, &mut ty) })?;
    Ok(ty)
}

/// A kernel node's function; `None` for other nodes.
fn kernel_function(node: sys::CUgraphNode) -> Result<Option<sys::CUfunction>> {
    if node_type(node)? != sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
        return Ok(None);
    }
    node_function(&kernel_params(node)?).map(Some)
}

/// What the driver reports of a kernel node: function or kernel, shape, parameters.
fn kernel_params(node: sys::CUgraphNode) -> Result<sys::CUDA_KERNEL_NODE_PARAMS> {
    // SAFETY: a kernel node; the struct is plain data filled by the driver.
    let mut p: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
    check("cuGraphKernelNodeGetParams", unsafe { sys::cuGraphKernelNodeGetParams_v2(node, &mut p) })?;
    Ok(p)
}

/// A kernel node's function. A node launched through a `CUkernel` (the runtime's lazy
/// loading) may carry the kernel and no function: the function is the kernel's in the
/// current context.
fn node_function(p: &sys::CUDA_KERNEL_NODE_PARAMS) -> Result<sys::CUfunction> {
    if !p.func.is_null() || p.kern.is_null() {
        return Ok(p.func);
    }
    let mut func = ptr::null_mut();
    // SAFETY: `kern` is the live kernel handle the driver just reported; writes one handle.
    check("cuKernelGetFunction", unsafe { sys::cuKernelGetFunction(&mut func, p.kern) })?;
    Ok(func)
}

fn node_kind(node: sys::CUgraphNode) -> Result<NodeKind> {
    use sys::CUgraphNodeType::*;
    match node_type(node)? {
        CU_GRAPH_NODE_TYPE_KERNEL => kernel_node(node),
        CU_GRAPH_NODE_TYPE_MEMSET => {
            // SAFETY: a memset node; the struct is plain data.
            let mut p: sys::CUDA_MEMSET_NODE_PARAMS = unsafe { std::mem::zeroed() };
            check("cuGraphMemsetNodeGetParams", unsafe { sys::cuGraphMemsetNodeGetParams(node, &mut p) })?;
            Ok(match super::extent::memset(&p) {
                Ok((dst, count)) => NodeKind::Memset { dst, value: p.value, element_size: p.elementSize, count },
                Err(shape) => NodeKind::Unflat(shape),
            })
        }
        CU_GRAPH_NODE_TYPE_MEMCPY => {
            // The struct holds enums with no zero value, so it starts as a valid device copy
            // and the driver overwrites it.
            let mut p = device_copy(0, 0, 0);
            // SAFETY: a memcpy node; writes one struct.
            check("cuGraphMemcpyNodeGetParams", unsafe { sys::cuGraphMemcpyNodeGetParams(node, &mut p) })?;
            let src_host = host_address(p.srcMemoryType, p.srcHost as u64, p.srcDevice);
            let dst_host = host_address(p.dstMemoryType, p.dstHost as u64, p.dstDevice);
            let host = src_host.map(HostEnd::Source).or(dst_host.map(HostEnd::Destination));
            Ok(match super::extent::copy(&p) {
                Ok((src, dst, bytes)) => NodeKind::Memcpy { dst, src, bytes, host },
                Err(shape) => NodeKind::Unflat(shape),
            })
        }
        CU_GRAPH_NODE_TYPE_EMPTY => Ok(NodeKind::Empty),
        other => Ok(NodeKind::Other(format!("{other:?}"))),
    }
}

/// The host address of a copy's end, when it is host memory: given as a host pointer, or
/// as a unified address the driver says is host memory.
fn host_address(kind: sys::CUmemorytype, host: u64, device: u64) -> Option<u64> {
    match kind {
        sys::CUmemorytype::CU_MEMORYTYPE_HOST => Some(host),
        sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED => {
            let mut memory = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
            let attribute = sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
            // SAFETY: writes one memory type for an address; an address the driver does not
            // know is an error, and such an end is taken as device memory.
            let known = unsafe {
                sys::cuPointerGetAttribute((&mut memory as *mut sys::CUmemorytype).cast(), attribute, device)
            };
            (known == sys::CUresult::CUDA_SUCCESS && memory == sys::CUmemorytype::CU_MEMORYTYPE_HOST).then_some(device)
        }
        _ => None,
    }
}

/// Reads a kernel node's function and copies its parameter values per the layout the
/// driver reports for that function.
fn kernel_node(node: sys::CUgraphNode) -> Result<NodeKind> {
    let p = kernel_params(node)?;
    let function = Function::from_node(node_function(&p)?)?;
    let params = param_values(&p, &function)?;
    Ok(NodeKind::Kernel {
        function: function.name().to_owned(),
        grid: [p.gridDimX, p.gridDimY, p.gridDimZ],
        block: [p.blockDimX, p.blockDimY, p.blockDimZ],
        shared_mem: p.sharedMemBytes,
        params,
        layout: function.layout().to_vec(),
        launch: node_launch_attributes(node)?,
    })
}

/// The parameter blob of a kernel node, laid out per the function's slots. The driver
/// reports either one pointer per parameter (`kernelParams`) or, for a launch made with
/// `extra`, one packed buffer already laid out that way (met in the eager GPT-2 port).
fn param_values(p: &sys::CUDA_KERNEL_NODE_PARAMS, function: &Function) -> Result<Vec<u8>> {
    let mut params = vec![0u8; function.param_bytes() as usize];
    let unreported =
        || CudaError::Unsupported(format!("the driver reports no parameter values for `{}`", function.name()));
    if !p.kernelParams.is_null() {
        for (i, slot) in function.layout().iter().enumerate() {
            // SAFETY: the driver returns one pointer per parameter, each to `slot.size`
            // bytes, valid while the node is unchanged.
            let src = unsafe { *p.kernelParams.add(i) } as *const u8;
            if src.is_null() {
                return Err(unreported());
            }
            // SAFETY: as above; the destination has room by the layout's construction.
            unsafe { ptr::copy_nonoverlapping(src, params[slot.offset as usize..].as_mut_ptr(), slot.size as usize) };
        }
        return Ok(params);
    }
    let (buffer, size) = packed_buffer(p.extra).ok_or_else(unreported)?;
    if size < params.len() {
        return Err(CudaError::Unsupported(format!(
            "`{}` was launched with {size} parameter bytes, its layout needs {}",
            function.name(),
            params.len()
        )));
    }
    // SAFETY: `buffer` holds `size` bytes, at least `params.len()`.
    unsafe { ptr::copy_nonoverlapping(buffer, params.as_mut_ptr(), params.len()) };
    Ok(params)
}

/// The buffer and size of an `extra` launch option list (`CU_LAUNCH_PARAM_BUFFER_POINTER`,
/// `CU_LAUNCH_PARAM_BUFFER_SIZE`, ended by `CU_LAUNCH_PARAM_END`).
fn packed_buffer(extra: *mut *mut std::ffi::c_void) -> Option<(*const u8, usize)> {
    const END: usize = 0;
    const BUFFER_POINTER: usize = 1;
    const BUFFER_SIZE: usize = 2;
    if extra.is_null() {
        return None;
    }
    let (mut buffer, mut size) = (None, None);
    for i in (0..).step_by(2) {
        // SAFETY: the driver's list is pairs of pointers ended by END; read pair by pair.
        let (key, value) = unsafe { (*extra.add(i) as usize, *extra.add(i + 1)) };
        match key {
            END => break,
            BUFFER_POINTER => buffer = Some(value as *const u8),
            // SAFETY: for this key the value points to a `size_t`.
            BUFFER_SIZE if !value.is_null() => size = Some(unsafe { *(value as *const usize) }),
            _ => return None,
        }
    }
    Some((buffer.filter(|b| !b.is_null())?, size?))
}

/// An executable (`CUgraphExec`), with the flags it was instantiated with and the flags
/// the driver reported right after.
pub struct GraphExec {
    ctx: Context,
    /// Keeps the modules of rebuilt kernel nodes loaded.
    _functions: Vec<Function>,
    raw: sys::CUgraphExec,
    flags: u64,
    reported: u64,
    template: String,
}

impl GraphExec {
    /// Names the template this executable was made from (for replay plans).
    pub fn named(mut self, template: &str) -> Self {
        self.template = template.into();
        self
    }

    pub fn upload(&self, stream: &Stream) -> Result<()> {
        // SAFETY: both handles are live.
        self.ctx.call("cuGraphUpload", || unsafe { sys::cuGraphUpload(self.raw, stream.raw()) })
    }

    pub fn launch(&self, stream: &Stream) -> Result<()> {
        // SAFETY: both handles are live.
        self.ctx.call("cuGraphLaunch", || unsafe { sys::cuGraphLaunch(self.raw, stream.raw()) })
    }

    /// The flags it was instantiated with.
    pub fn flags(&self) -> u64 {
        self.flags
    }

    /// What `cuGraphExecGetFlags` reported right after it was made.
    pub fn reported_flags(&self) -> u64 {
        self.reported
    }

    /// The template it was made from, as [`Self::named`] gave it.
    pub fn template(&self) -> &str {
        &self.template
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // SAFETY: destroys the executable made in `instantiate`.
        let status = unsafe { sys::cuGraphExecDestroy(self.raw) };
        self.ctx.released("cuGraphExecDestroy", status);
        LIVE_EXECUTABLES.fetch_sub(1, Ordering::SeqCst);
    }
}
