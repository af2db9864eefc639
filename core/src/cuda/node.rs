//! One node described ([`NodeSpec`], [`KernelSpec`]) and added to a raw graph
//! ([`add_raw`]): what the template builder (`build.rs`) and the graph wrapper
//! (`graph.rs`) both add nodes with, below both of them.

use std::ptr;

use cudarc::driver::sys;

use super::{check, Function, KernelAttributes, Result};

/// A kernel node: the function, launch shape, parameter bytes and launch attributes.
#[derive(Clone, Copy)]
pub struct KernelSpec<'a> {
    function: &'a Function,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem: u32,
    params: &'a [u8],
    pub launch: KernelAttributes,
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
        function.check_param_len(params)?;
        Ok(Self { function, grid, block, shared_mem, params, launch: KernelAttributes::default() })
    }

    pub fn with_launch(self, launch: KernelAttributes) -> Self {
        Self { launch, ..self }
    }
}

/// What a node does.
#[derive(Clone, Copy)]
pub enum NodeSpec<'a> {
    Kernel(KernelSpec<'a>),
    Memset { dst: u64, value: u32, element_size: u32, count: u64 },
    Memcpy { dst: u64, src: u64, bytes: u64 },
    Empty,
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
            let mut pointers = k.function.param_pointers(k.params)?;
            let mut p: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
            p.func = k.function.raw();
            (p.gridDimX, p.gridDimY, p.gridDimZ) = (k.grid[0], k.grid[1], k.grid[2]);
            (p.blockDimX, p.blockDimY, p.blockDimZ) = (k.block[0], k.block[1], k.block[2]);
            p.sharedMemBytes = k.shared_mem;
            p.kernelParams = pointers.as_mut_ptr();
            // The driver copies the parameter values while adding the node.
            check("cuGraphAddKernelNode", sys::cuGraphAddKernelNode_v2(&mut node, graph, d, n, &p))?;
            super::attributes::set_node_launch_attributes(node, &k.launch)?;
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
            check("cuGraphAddMemsetNode", sys::cuGraphAddMemsetNode(&mut node, graph, d, n, &p, current()?))?;
        }
        NodeSpec::Memcpy { dst, src, bytes } => {
            let p = device_copy(*dst, *src, *bytes);
            check("cuGraphAddMemcpyNode", sys::cuGraphAddMemcpyNode(&mut node, graph, d, n, &p, current()?))?;
        }
        NodeSpec::Empty => check("cuGraphAddEmptyNode", sys::cuGraphAddEmptyNode(&mut node, graph, d, n))?,
    }
    Ok(node)
}

/// The context current on this thread, which memset and memcpy nodes name.
fn current() -> Result<sys::CUcontext> {
    let mut ctx = ptr::null_mut();
    // SAFETY: writes one handle through a valid pointer.
    check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut ctx) })?;
    Ok(ctx)
}

/// A one-dimensional device-to-device `CUDA_MEMCPY3D`.
pub(super) fn device_copy(dst: u64, src: u64, bytes: u64) -> sys::CUDA_MEMCPY3D {
    let mut p = std::mem::MaybeUninit::<sys::CUDA_MEMCPY3D>::zeroed();
    let raw = p.as_mut_ptr();
    // SAFETY: every field but the two memory types is valid when zero; those are written
    // before the value is assumed initialised.
    unsafe {
        (*raw).srcMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
        (*raw).dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
        let mut p = p.assume_init();
        (p.srcDevice, p.dstDevice) = (src, dst);
        (p.WidthInBytes, p.Height, p.Depth) = (bytes as usize, 1, 1);
        p
    }
}
