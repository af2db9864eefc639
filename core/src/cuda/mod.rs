//! The only module that talks to the CUDA driver and NVRTC; all `unsafe` in Gnomon lives
//! here. Three layers, as in cudarc: raw bindings (`cudarc::driver::sys`), calls that
//! return `Result` (the `check` helper), and the owning types below, which release their
//! handles in `Drop`. Libraries load at run time, so a binary built without CUDA runs on
//! a GPU machine unchanged, and on a machine without one [`preflight`] says why.
//!
//! Thread safety: a [`Context`] makes the device's primary context current on the thread
//! that creates it; every other type must be used on that thread. Gnomon runs each GPU
//! case in its own single-threaded process.

mod attributes;
mod build;
mod extent;
mod graph;
mod module;
mod node;
mod pinned;
mod vmm;

use std::{cell::RefCell, ffi::c_void, ptr, rc::Rc};

use cudarc::driver::{result as cu, sys};

pub use attributes::{Dependency, FunctionAttribute, KernelAttributes, SchedulingPolicy, SyncDomain};
pub use build::{build_all, build_and_instantiate, BuildFailure, GraphSpec, Overlap, Ready, ReadyFailure};
pub use graph::{
    live_executables, on_instantiating_threads, GraphExec, HostEnd, NodeId, NodeInfo, NodeKind, RetainedGraph,
};
pub use module::{compile_ptx, load_on_threads, nvrtc_version, Function, Loaded, LoadedModule, Module, ParamInfo};
pub use node::{KernelSpec, NodeSpec};
pub use pinned::{PinnedHost, HUGE_PAGE};
pub use vmm::{map_peer, ArenaMapping, MappedShard, PeerPiece, PeerWindow};

pub use crate::errors::CudaError;

pub type Result<T> = std::result::Result<T, CudaError>;

/// Turns a driver status into a `Result` that names the call.
fn check(call: &'static str, status: sys::CUresult) -> Result<()> {
    status.result().map_err(|e| CudaError::Driver { call, code: describe(e) })
}

/// `CUDA_ERROR_X (text)` for a driver error.
pub fn describe(e: cu::DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{name} ({text})")
}

/// What preflight records about one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: u32,
    pub name: String,
    /// Compute capability as major*10 + minor.
    pub sm: u32,
    pub total_memory: u64,
}

impl DeviceInfo {
    /// `sm_90` and the like: NVRTC's `--gpu-architecture` and the report's arch.
    pub fn arch(&self) -> String {
        format!("sm_{}", self.sm)
    }
}

/// The driver's and NVRTC's versions and the devices present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preflight {
    /// As `cuDriverGetVersion` reports it (13000 for CUDA 13.0).
    pub driver_version: u32,
    /// `major.minor`, or why NVRTC is unusable.
    pub nvrtc_version: std::result::Result<String, String>,
    pub devices: Vec<DeviceInfo>,
}

/// Finds the driver and the devices, or says in words why there are none.
pub fn preflight() -> std::result::Result<Preflight, String> {
    init().map_err(|e| e.to_string())?;
    let count = cu::device::get_count().map_err(describe)?;
    if count == 0 {
        return Err("the CUDA driver reports no devices".into());
    }
    let devices =
        (0..count).map(|o| device_info(o).map_err(|e| e.to_string())).collect::<std::result::Result<_, _>>()?;
    Ok(Preflight {
        driver_version: driver_version().map_err(|e| e.to_string())?,
        nvrtc_version: module::nvrtc_version(),
        devices,
    })
}

/// Whether this machine has the CUDA driver library, without initialising it.
pub fn driver_library_present() -> bool {
    // SAFETY: only probes whether the shared library can be loaded.
    unsafe { sys::is_culib_present() }
}

fn init() -> Result<()> {
    if !driver_library_present() {
        return Err(CudaError::Unavailable("the CUDA driver library (libcuda) is not installed".into()));
    }
    cu::init().map_err(|e| CudaError::Unavailable(format!("cuInit failed: {}", describe(e))))
}

pub fn driver_version() -> Result<u32> {
    let mut version = 0;
    // SAFETY: writes one int through a valid pointer.
    check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut version) })?;
    Ok(version as u32)
}

/// Whether work issued to `stream` (a raw `CUstream` of another library, 0 for the
/// legacy stream) would be captured into a graph now. A stream the driver cannot answer
/// for counts as capturing, the side that never reuses memory a graph may hold.
///
/// # Safety
/// `stream` must be 0 or a live stream of the current context.
pub unsafe fn is_capturing(stream: usize) -> bool {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let answered = sys::cuStreamIsCapturing(stream as sys::CUstream, &mut status).result().is_ok();
    !answered || status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
}

fn device_info(ordinal: i32) -> Result<DeviceInfo> {
    use sys::CUdevice_attribute::*;
    let err = |call| move |e| CudaError::Driver { call, code: describe(e) };
    let dev = cu::device::get(ordinal).map_err(err("cuDeviceGet"))?;
    // SAFETY: `dev` is a valid device handle from cuDeviceGet.
    let (major, minor, total) = unsafe {
        (
            cu::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
                .map_err(err("cuDeviceGetAttribute"))?,
            cu::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
                .map_err(err("cuDeviceGetAttribute"))?,
            cu::device::total_mem(dev).map_err(err("cuDeviceTotalMem"))?,
        )
    };
    let name = cu::device::get_name(dev).map_err(err("cuDeviceGetName"))?;
    Ok(DeviceInfo { ordinal: ordinal as u32, name, sm: (major * 10 + minor) as u32, total_memory: total as u64 })
}

/// A driver call that failed in `Drop`, where nothing can return it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ReleaseFailure {
    call: &'static str,
    code: String,
}

struct ContextInner {
    device: sys::CUdevice,
    raw: sys::CUcontext,
    info: DeviceInfo,
    /// Releases that failed since the last call on this context, which will report them.
    failed_releases: RefCell<Vec<ReleaseFailure>>,
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: releases the retain taken in `Context::new`; every resource holding an
        // `Rc<ContextInner>` is gone by now.
        let status = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
        let mut failed = std::mem::take(self.failed_releases.get_mut());
        failed.extend(
            status.result().err().map(|e| ReleaseFailure { call: "cuDevicePrimaryCtxRelease", code: describe(e) }),
        );
        // No call on this context can come now, so stderr is the last place to say it.
        for ReleaseFailure { call, code } in failed {
            eprintln!("gnomon: releasing a handle of device {}: {call} failed: {code}", self.info.ordinal);
        }
    }
}

/// A device's primary context, current on the creating thread and bound to it (not `Send`).
/// Cheap to clone; every resource keeps one, so the context outlives what was made in it.
#[derive(Clone)]
pub struct Context(Rc<ContextInner>);

impl Context {
    pub fn new(ordinal: u32) -> Result<Self> {
        init()?;
        let info = device_info(ordinal as i32)?;
        let device = cu::device::get(ordinal as i32)
            .map_err(|e| CudaError::Driver { call: "cuDeviceGet", code: describe(e) })?;
        // SAFETY: `device` is valid; the retain is released in `ContextInner::drop`.
        let raw = unsafe { cu::primary_ctx::retain(device) }
            .map_err(|e| CudaError::Driver { call: "cuDevicePrimaryCtxRetain", code: describe(e) })?;
        // SAFETY: `raw` is the context just retained.
        unsafe { cu::ctx::set_current(raw) }
            .map_err(|e| CudaError::Driver { call: "cuCtxSetCurrent", code: describe(e) })?;
        Ok(Self(Rc::new(ContextInner { device, raw, info, failed_releases: RefCell::default() })))
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.0.info
    }

    /// The ordinal of the device the driver runs this thread's work on, asked of the driver
    /// (`cuCtxGetDevice`) rather than taken from what this context was made for.
    pub fn current_device(&self) -> Result<u32> {
        let mut device = 0;
        // SAFETY: writes one device handle through a valid pointer.
        self.call("cuCtxGetDevice", || unsafe { sys::cuCtxGetDevice(&mut device) })?;
        Ok(device as u32)
    }

    /// The module a library loaded with `cuLibraryLoad*` has in this context: the handle
    /// its kernels' `cuFuncGetModule` gives. `library` is a handle the recorder heard
    /// returned and not unloaded since: the driver does not check it (an unloaded one
    /// crashed the process on the H200).
    pub fn library_module(&self, library: usize) -> Result<usize> {
        let mut module = std::ptr::null_mut();
        // SAFETY: a library handle not unloaded (the caller's promise); writes one module handle.
        self.call("cuLibraryGetModule", || unsafe { sys::cuLibraryGetModule(&mut module, library as sys::CUlibrary) })?;
        Ok(module as usize)
    }

    pub(crate) fn raw(&self) -> sys::CUcontext {
        self.0.raw
    }

    /// Makes a driver call on this context. A release that failed since the last call
    /// fails this one instead, before it is made: what `Drop` met is reported, never lost.
    fn call(&self, call: &'static str, make: impl FnOnce() -> sys::CUresult) -> Result<()> {
        self.settle()?;
        check(call, make())
    }

    /// Reports, once, the releases that failed since the last call on this context.
    fn settle(&self) -> Result<()> {
        let failed = std::mem::take(&mut *self.0.failed_releases.borrow_mut());
        match failed.split_first() {
            None => Ok(()),
            Some((first, rest)) => {
                Err(CudaError::Release { call: first.call, code: first.code.clone(), more: rest.len() })
            }
        }
    }

    /// Keeps the failure of a release made in `Drop` for the next call to report.
    fn released(&self, call: &'static str, status: sys::CUresult) {
        if let Err(e) = status.result() {
            self.0.failed_releases.borrow_mut().push(ReleaseFailure { call, code: describe(e) });
        }
    }

    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments; waits for the current context.
        self.call("cuCtxSynchronize", || unsafe { sys::cuCtxSynchronize() })
    }

    /// Free and total device memory, in bytes.
    pub fn memory(&self) -> Result<(u64, u64)> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writes two sizes through valid pointers.
        self.call("cuMemGetInfo", || unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
        Ok((free as u64, total as u64))
    }

    pub fn stream(&self) -> Result<Stream> {
        let mut raw = ptr::null_mut();
        // SAFETY: writes one handle; destroyed in `Stream::drop`.
        self.call("cuStreamCreate", || unsafe {
            sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(Stream { ctx: self.clone(), raw })
    }

    pub fn event(&self) -> Result<Event> {
        let mut raw = ptr::null_mut();
        // SAFETY: writes one handle; destroyed in `Event::drop`.
        self.call("cuEventCreate", || unsafe {
            sys::cuEventCreate(&mut raw, sys::CUevent_flags::CU_EVENT_DEFAULT as u32)
        })?;
        Ok(Event { ctx: self.clone(), raw })
    }

    /// Device memory from `cuMemAlloc`, zeroed before this returns.
    pub fn alloc(&self, bytes: u64) -> Result<DeviceBuffer> {
        let mut ptr = 0;
        // SAFETY: writes one device pointer; freed in `DeviceBuffer::drop`.
        self.call("cuMemAlloc", || unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes as usize) })?;
        let buffer = DeviceBuffer { ctx: self.clone(), ptr, bytes };
        // SAFETY: `ptr` covers `bytes` bytes just allocated.
        check("cuMemsetD8", unsafe { sys::cuMemsetD8_v2(ptr, 0, bytes as usize) })?;
        self.legacy_stream_done()?;
        Ok(buffer)
    }

    /// Copies host bytes to device address `dst`; they are on the device when this returns.
    ///
    /// # Safety
    /// `dst..dst + bytes.len()` must be device memory mapped in this context.
    pub unsafe fn write(&self, dst: u64, bytes: &[u8]) -> Result<()> {
        self.call("cuMemcpyHtoD", || sys::cuMemcpyHtoD_v2(dst, bytes.as_ptr() as *const c_void, bytes.len()))?;
        self.legacy_stream_done()
    }

    /// Waits for the legacy default stream, where `cuMemsetD8` and `cuMemcpyHtoD` run.
    /// Both may return before the device has written (a memset always; a copy from
    /// pageable memory once it is staged), and this crate's streams are non-blocking, so
    /// they do not wait for it: a copy into a fresh buffer enqueued on one of them raced
    /// the zeroing, and a rank launched with zeros in its input (issue 27).
    fn legacy_stream_done(&self) -> Result<()> {
        // SAFETY: the null stream is the context's legacy default stream.
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(ptr::null_mut()) })
    }

    /// Copies `len` bytes at device address `src` to the host, into memory whose pages
    /// were made first on every core (see `host_pages`).
    ///
    /// # Safety
    /// `src..src + len` must be device memory mapped in this context.
    pub unsafe fn read(&self, src: u64, len: u64) -> Result<Vec<u8>> {
        let mut out = host_pages(len as usize);
        self.read_into(src, &mut out)?;
        Ok(out)
    }

    /// Copies `dst.len()` bytes from the device at `src` into `dst`: at full bus speed
    /// when `dst` is page-locked ([`PinnedHost`]), through a bounce buffer otherwise.
    ///
    /// # Safety
    /// `src..src + dst.len()` must be device memory mapped in this context.
    pub unsafe fn read_into(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        self.call("cuMemcpyDtoH", || read_raw(src, dst))
    }

    /// Lends this context's reads to another thread ([`LentReads`]).
    pub fn lend_reads(&self) -> LentReads<'_> {
        LentReads { ctx: self.raw() as usize, _lent: Default::default() }
    }
}

/// The context lent, as a raw handle, to one other thread that copies device memory to
/// the host: an export's snapshot, while the owning thread launches the templates. Like
/// [`LentStream`], what a worker thread holds instead of a CUDA type, for no longer than
/// the borrow.
pub struct LentReads<'a> {
    ctx: usize,
    _lent: std::marker::PhantomData<&'a ()>,
}

impl LentReads<'_> {
    /// As [`Context::read_into`], on the calling thread (the lender's context made current
    /// on it first).
    ///
    /// # Safety
    /// As [`Context::read_into`].
    pub unsafe fn read_into(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        check("cuCtxSetCurrent", sys::cuCtxSetCurrent(self.ctx as sys::CUcontext))?;
        check("cuMemcpyDtoH", read_raw(src, dst))
    }
}

/// The one device-to-host copy both [`Context::read_into`] and [`LentReads::read_into`]
/// make, on the legacy default stream, returning when the bytes are in `dst`.
///
/// # Safety
/// As [`Context::read_into`], with the context current on the calling thread.
unsafe fn read_raw(src: u64, dst: &mut [u8]) -> sys::CUresult {
    sys::cuMemcpyDtoH_v2(dst.as_mut_ptr() as *mut c_void, src, dst.len())
}

/// Vectors of fewer bytes than this are made on the calling thread.
const PAGES_ALONE_BELOW: usize = 16 << 20;

/// `len` zero bytes whose pages the kernel has already given, made on as many threads as
/// there are cores. A pageable copy from the device into fresh memory faults its pages in
/// one at a time on one thread: the kit read a serving catalogue's outputs at 1.2 GB/s
/// that way, where the pageable floor into made pages is 14 GB/s.
fn host_pages(len: usize) -> Vec<u8> {
    if len < PAGES_ALONE_BELOW {
        return vec![0; len];
    }
    let mut out = Vec::with_capacity(len);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for part in out.spare_capacity_mut()[..len].chunks_mut(len.div_ceil(threads)) {
            s.spawn(|| part.fill(std::mem::MaybeUninit::new(0)));
        }
    });
    // SAFETY: the threads above wrote every one of the first `len` bytes.
    unsafe { out.set_len(len) };
    out
}

/// A `cuMemAlloc` allocation. Reads and writes are bounds-checked against its size.
pub struct DeviceBuffer {
    ctx: Context,
    ptr: u64,
    bytes: u64,
}

impl DeviceBuffer {
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn len(&self) -> u64 {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    pub fn upload(&self, bytes: &[u8]) -> Result<()> {
        self.fits(bytes.len() as u64)?;
        // SAFETY: bounds checked against this allocation.
        unsafe { self.ctx.write(self.ptr, bytes) }
    }

    pub fn download(&self) -> Result<Vec<u8>> {
        // SAFETY: the whole allocation.
        unsafe { self.ctx.read(self.ptr, self.bytes) }
    }

    fn fits(&self, len: u64) -> Result<()> {
        if len > self.bytes {
            return Err(CudaError::Unsupported(format!("{len} bytes do not fit a buffer of {}", self.bytes)));
        }
        Ok(())
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: frees the allocation made in `Context::alloc`.
        let status = unsafe { sys::cuMemFree_v2(self.ptr) };
        self.ctx.released("cuMemFree", status);
    }
}

/// How to launch a kernel: its shape, dynamic shared memory and launch attributes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem: u32,
    pub attributes: KernelAttributes,
    /// May start before the previous kernel on the stream completes (programmatic
    /// dependent launch); it waits for it with `griddepcontrol.wait`.
    pub programmatic: bool,
}

/// A non-blocking stream.
pub struct Stream {
    ctx: Context,
    raw: sys::CUstream,
}

impl Stream {
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: `raw` is a live stream.
        self.ctx.call("cuStreamSynchronize", || unsafe { sys::cuStreamSynchronize(self.raw) })
    }

    /// Launches `function` with parameters laid out per its recorded slots.
    pub fn launch(
        &self,
        function: &Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem: u32,
        params: &[u8],
    ) -> Result<()> {
        self.launch_with(function, Launch { grid, block, shared_mem, ..Launch::default() }, params)
    }

    /// Launches `function` with launch attributes (`cuLaunchKernelEx`): a captured launch
    /// becomes a kernel node carrying them, and a programmatic one a programmatic edge.
    pub fn launch_with(&self, function: &Function, launch: Launch, params: &[u8]) -> Result<()> {
        let mut pointers = function.param_pointers(params)?;
        let mut attrs = attributes::launch_attribute_list(&launch.attributes, launch.programmatic);
        let config = sys::CUlaunchConfig {
            gridDimX: launch.grid[0],
            gridDimY: launch.grid[1],
            gridDimZ: launch.grid[2],
            blockDimX: launch.block[0],
            blockDimY: launch.block[1],
            blockDimZ: launch.block[2],
            sharedMemBytes: launch.shared_mem,
            hStream: self.raw,
            attrs: attrs.as_mut_ptr(),
            numAttrs: attrs.len() as u32,
        };
        // SAFETY: `pointers` holds one pointer per parameter into `params`, and `attrs`
        // the attributes, both alive until the call returns; the driver copies them.
        self.ctx.call("cuLaunchKernelEx", || unsafe {
            sys::cuLaunchKernelEx(&config, function.raw(), pointers.as_mut_ptr(), ptr::null_mut())
        })
    }

    /// Sets `count` 32-bit words at `dst` to `value`.
    ///
    /// # Safety
    /// `dst..dst + 4 * count` must be device memory of this context.
    pub unsafe fn memset_u32(&self, dst: u64, value: u32, count: u64) -> Result<()> {
        self.ctx.call("cuMemsetD32Async", || sys::cuMemsetD32Async(dst, value, count as usize, self.raw))
    }

    /// Sets `count` bytes at `dst` to `value`.
    ///
    /// # Safety
    /// `dst..dst + count` must be device memory of this context.
    pub unsafe fn memset_u8(&self, dst: u64, value: u8, count: u64) -> Result<()> {
        self.ctx.call("cuMemsetD8Async", || sys::cuMemsetD8Async(dst, value, count as usize, self.raw))
    }

    /// Enqueues a copy of `src` (page-locked host memory) to device address `dst`.
    ///
    /// # Safety
    /// `dst..dst + src.len()` must be device memory of this context, and `src` must stay
    /// alive and unwritten until an event recorded after this call has completed.
    pub unsafe fn upload_async(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.ctx.settle()?;
        upload_raw(self.raw, dst, src)
    }

    /// Copies `bytes` from `src` to `dst` on the device.
    ///
    /// # Safety
    /// Both ranges must be device memory of this context.
    pub unsafe fn copy(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        self.ctx.call("cuMemcpyDtoDAsync", || sys::cuMemcpyDtoDAsync_v2(dst, src, bytes as usize, self.raw))
    }

    pub fn record(&self, event: &Event) -> Result<()> {
        self.ctx.settle()?;
        record_raw(event.raw, self.raw)
    }

    pub fn wait(&self, event: &Event) -> Result<()> {
        // SAFETY: both handles are live.
        self.ctx.call("cuStreamWaitEvent", || unsafe { sys::cuStreamWaitEvent(self.raw, event.raw, 0) })
    }

    /// Captures what `issue` enqueues (on this stream and on streams that join it) into a
    /// retained template. No executable is created. Capture is ended even if `issue`
    /// fails, so the stream is usable afterwards.
    pub fn capture(&self, issue: impl FnOnce(&Stream) -> Result<()>) -> Result<RetainedGraph> {
        use sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL as MODE;
        // SAFETY: `raw` is a live stream not already capturing.
        self.ctx.call("cuStreamBeginCapture", || unsafe { sys::cuStreamBeginCapture_v2(self.raw, MODE) })?;
        let issued = issue(self);
        let mut graph = ptr::null_mut();
        // SAFETY: ends the capture begun above; on success `graph` is a new template.
        let ended = check("cuStreamEndCapture", unsafe { sys::cuStreamEndCapture(self.raw, &mut graph) });
        let template = (!graph.is_null()).then(|| RetainedGraph::from_raw(self.ctx.clone(), graph));
        // A handle released inside `issue` may fail and invalidate the capture: name that
        // cause before the invalidation it led to.
        self.ctx.settle()?;
        issued?;
        ended?;
        template.ok_or_else(|| CudaError::Unsupported("capture produced no graph".into()))
    }

    /// Lends this stream and `events` to another thread ([`LentStream`]).
    pub fn lend<'a>(&'a self, events: &'a [Event]) -> LentStream<'a> {
        let events = events.iter().map(|e| e.raw as usize).collect();
        LentStream { ctx: self.ctx.raw() as usize, stream: self.raw as usize, events, _lent: Default::default() }
    }

    pub(crate) fn raw(&self) -> sys::CUstream {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: destroys the stream made in `Context::stream`.
        let status = unsafe { sys::cuStreamDestroy_v2(self.raw) };
        self.ctx.released("cuStreamDestroy", status);
    }
}

// The calls a stream and its events make, shared by the owning types (which first report
// a failed release, `Context::settle`) and a `LentStream` (whose thread holds no context).

/// # Safety
/// As [`Stream::upload_async`], on the live `stream`.
unsafe fn upload_raw(stream: sys::CUstream, dst: u64, src: &[u8]) -> Result<()> {
    check("cuMemcpyHtoDAsync", sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr().cast(), src.len(), stream))
}

fn record_raw(event: sys::CUevent, stream: sys::CUstream) -> Result<()> {
    // SAFETY: the caller holds both live handles.
    check("cuEventRecord", unsafe { sys::cuEventRecord(event, stream) })
}

fn event_synchronized(event: sys::CUevent) -> Result<()> {
    // SAFETY: the caller holds the live event.
    check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(event) })
}

fn event_completed(event: sys::CUevent) -> Result<bool> {
    // SAFETY: the caller holds the live event.
    match unsafe { sys::cuEventQuery(event) } {
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        status => check("cuEventQuery", status).map(|_| true),
    }
}

/// A stream and events lent, as raw handles, to one other thread of the context, which
/// issues copies on it and records and waits for the events (the upload's copies, while
/// the thread that owns them builds templates). Worker threads hold no CUDA type: this
/// is what they are handed instead, for no longer than the borrow.
pub struct LentStream<'a> {
    ctx: usize,
    stream: usize,
    events: Vec<usize>,
    _lent: std::marker::PhantomData<&'a ()>,
}

impl LentStream<'_> {
    /// Makes the lender's context current on this thread; first, on the borrowing thread.
    pub fn make_current(&self) -> Result<()> {
        // SAFETY: the lender's context is live while the borrow lasts.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.ctx as sys::CUcontext) })
    }

    pub fn events(&self) -> usize {
        self.events.len()
    }

    /// As [`Stream::upload_async`].
    ///
    /// # Safety
    /// As [`Stream::upload_async`].
    pub unsafe fn upload_async(&self, dst: u64, src: &[u8]) -> Result<()> {
        upload_raw(self.stream as sys::CUstream, dst, src)
    }

    /// Records event `i` on the stream (both live while the borrow lasts).
    pub fn record(&self, i: usize) -> Result<()> {
        record_raw(self.event(i), self.stream as sys::CUstream)
    }

    /// As [`Event::completed`], for event `i`.
    pub fn completed(&self, i: usize) -> Result<bool> {
        event_completed(self.event(i))
    }

    /// As [`Event::synchronize`], for event `i`.
    pub fn synchronize(&self, i: usize) -> Result<()> {
        event_synchronized(self.event(i))
    }

    fn event(&self, i: usize) -> sys::CUevent {
        self.events[i] as sys::CUevent
    }
}

/// A timing event.
pub struct Event {
    ctx: Context,
    raw: sys::CUevent,
}

impl Event {
    /// Waits until the work before the last record of this event has completed.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.settle()?;
        event_synchronized(self.raw)
    }

    /// Whether the work before the last record of this event has completed, without waiting.
    pub fn completed(&self) -> Result<bool> {
        self.ctx.settle()?;
        event_completed(self.raw)
    }

    /// Milliseconds from `self` to `end`, both recorded and completed.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        let mut ms = 0.0;
        // SAFETY: both events are live; synchronizes on `end` first.
        unsafe {
            self.ctx.call("cuEventSynchronize", || sys::cuEventSynchronize(end.raw))?;
            check("cuEventElapsedTime", sys::cuEventElapsedTime_v2(&mut ms, self.raw, end.raw))?;
        }
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: destroys the event made in `Context::event`.
        let status = unsafe { sys::cuEventDestroy_v2(self.raw) };
        self.ctx.released("cuEventDestroy", status);
    }
}

#[cfg(test)]
mod tests {
    /// Made on the calling thread or on many, every byte is there and zero.
    #[test]
    fn host_pages_are_zeroed_to_the_last_byte() {
        for len in [0, 4097, super::PAGES_ALONE_BELOW + 4097] {
            let pages = super::host_pages(len);
            assert_eq!(pages.len(), len);
            assert!(pages.iter().all(|&b| b == 0), "{len} bytes");
        }
    }
}
