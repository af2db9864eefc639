//! Modules, their functions and parameter layouts, and NVRTC.

use std::{
    collections::BTreeSet,
    ffi::{c_void, CStr, CString},
    ptr,
    rc::Rc,
    sync::atomic::{AtomicUsize, Ordering},
    time::Instant,
};

use cudarc::driver::sys;

use super::{check, Context, CudaError, FunctionAttribute, Result};

/// Compiles CUDA C to PTX for `arch` (`sm_90`); a failure keeps the options and the log.
pub fn compile_ptx(name: &str, source: &str, arch: &str) -> Result<String> {
    use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
    // SAFETY: only probes whether the shared library can be loaded.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(CudaError::Unavailable("NVRTC (libnvrtc) is not installed".into()));
    }
    let options = CompileOptions { arch: Some(leak(arch)), ..Default::default() };
    let compile_error = |log: String| CudaError::Compile {
        name: name.into(),
        options: vec![format!("--gpu-architecture={arch}")],
        log,
    };
    match compile_ptx_with_opts(source, options) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(CompileError::CompileError { log, .. }) => Err(compile_error(log.to_string_lossy().into_owned())),
        Err(other) => Err(compile_error(format!("{other:?}"))),
    }
}

/// cudarc's options take `&'static str`; arch names are few and fixed, so leaking is bounded.
fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

/// NVRTC's `major.minor`, or why it is unusable.
pub fn nvrtc_version() -> std::result::Result<String, String> {
    use cudarc::nvrtc::sys as nv;
    // SAFETY: only probes whether the shared library can be loaded.
    if !unsafe { nv::is_culib_present() } {
        return Err("NVRTC (libnvrtc) is not installed".into());
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints through valid pointers.
    unsafe { nv::nvrtcVersion(&mut major, &mut minor) }.result().map_err(|e| format!("{e:?}"))?;
    Ok(format!("{major}.{minor}"))
}

struct ModuleInner {
    ctx: Context,
    raw: sys::CUlibrary,
    /// The image, kept until the library is unloaded: the driver was told it may read it
    /// at any time instead of copying it.
    _image: Vec<u8>,
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        // SAFETY: unloads the library loaded in `Module::load`; no `Function` outlives it.
        let status = unsafe { sys::cuLibraryUnload(self.raw) };
        self.ctx.released("cuLibraryUnload", status);
    }
}

/// A loaded module (PTX or cubin), held as a context-independent library: the driver
/// loads each kernel into the context when its function is first got (measured faster
/// than `cuModuleLoadData` for images of tens of MB, `docs/driver-facts.md`).
#[derive(Clone)]
pub struct Module(Rc<ModuleInner>);

impl Module {
    /// Loads a PTX text or cubin image.
    pub fn load(ctx: &Context, image: &[u8]) -> Result<Self> {
        ctx.settle()?;
        let mut owned = Vec::with_capacity(image.len() + 1);
        owned.extend_from_slice(image);
        let (raw, image) = load_raw(owned)?;
        Ok(Self::owning(ctx, raw, image))
    }

    /// Takes ownership of a loaded library and the image it reads.
    fn owning(ctx: &Context, raw: sys::CUlibrary, image: Vec<u8>) -> Self {
        Self(Rc::new(ModuleInner { ctx: ctx.clone(), raw, _image: image }))
    }

    /// Compiles CUDA C with NVRTC for this context's device and loads it; returns the PTX
    /// too, for exporters that carry it.
    pub fn compile(ctx: &Context, name: &str, source: &str) -> Result<(Self, String)> {
        let ptx = compile_ptx(name, source, &ctx.info().arch())?;
        Ok((Self::load(ctx, ptx.as_bytes())?, ptx))
    }

    /// The names of the module's kernels, as the driver lists them.
    pub fn entries(&self) -> Result<BTreeSet<String>> {
        let mut module = ptr::null_mut();
        // SAFETY: a loaded library; the driver writes its module in the current context.
        check("cuLibraryGetModule", unsafe { sys::cuLibraryGetModule(&mut module, self.0.raw) })?;
        entries_of(module)
    }

    pub fn function(&self, name: &str) -> Result<Function> {
        self.wrap(raw_function(self.0.raw, name)?, name)
    }

    fn wrap(&self, raw: sys::CUfunction, name: &str) -> Result<Function> {
        Ok(Function { _module: Some(self.clone()), raw, name: name.into(), layout: param_layout(raw)? })
    }
}

/// A module the process has loaded, as a function's `cuFuncGetModule` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedModule {
    /// The `CUmodule` handle, as a number: compared, never used to call the driver.
    pub handle: usize,
    /// Its kernels' names.
    pub entries: BTreeSet<String>,
}

/// A kernel with its parameter layout as the driver reports it.
#[derive(Clone)]
pub struct Function {
    /// Keeps the module loaded; `None` for functions found in a graph node.
    _module: Option<Module>,
    raw: sys::CUfunction,
    name: String,
    layout: Vec<ParamInfo>,
}

/// Where one kernel parameter lies in the parameter buffer (`cuFuncGetParamInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    pub offset: u64,
    pub size: u64,
}

impl Function {
    /// A function handle read from a graph node; its module outlives the graph.
    pub(super) fn from_node(raw: sys::CUfunction) -> Result<Self> {
        Ok(Self { _module: None, raw, name: function_name(raw)?, layout: param_layout(raw)? })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The module this function belongs to: its handle and its kernels, which identify
    /// the image a node's function came from.
    pub fn module(&self) -> Result<LoadedModule> {
        let mut module = ptr::null_mut();
        // SAFETY: a live function; the driver writes its module's handle.
        check("cuFuncGetModule", unsafe { sys::cuFuncGetModule(&mut module, self.raw) })?;
        Ok(LoadedModule { handle: module as usize, entries: entries_of(module)? })
    }

    pub fn layout(&self) -> &[ParamInfo] {
        &self.layout
    }

    pub fn param_bytes(&self) -> u64 {
        self.layout.iter().map(|p| p.offset + p.size).max().unwrap_or(0)
    }

    pub(super) fn raw(&self) -> sys::CUfunction {
        self.raw
    }

    /// What the driver reports for one of this function's attributes.
    pub fn attribute(&self, attribute: FunctionAttribute) -> Result<i32> {
        super::attributes::get_function(self.raw, attribute)
    }

    /// Sets one attribute (what a kernel using more than 48 KiB of dynamic shared memory
    /// needs before any node of it is built).
    pub fn set_attribute(&self, attribute: FunctionAttribute, value: i32) -> Result<()> {
        super::attributes::set_function(self.raw, &self.name, attribute, value)
    }

    /// One pointer per parameter into `params`, after checking its length.
    pub(super) fn param_pointers(&self, params: &[u8]) -> Result<Vec<*mut c_void>> {
        self.check_param_len(params)?;
        Ok(self.layout.iter().map(|slot| params[slot.offset as usize..].as_ptr() as *mut c_void).collect())
    }

    /// Whether `params` is as long as this function's layout needs.
    pub(super) fn check_param_len(&self, params: &[u8]) -> Result<()> {
        if params.len() as u64 != self.param_bytes() {
            return Err(CudaError::Unsupported(format!(
                "`{}` takes {} parameter bytes, {} given",
                self.name,
                self.param_bytes(),
                params.len()
            )));
        }
        Ok(())
    }
}

/// Loads `image` as a library the driver reads in place (no copy of its own), and gives
/// the image back to be kept as long as the library.
fn load_raw(mut image: Vec<u8>) -> Result<(sys::CUlibrary, Vec<u8>)> {
    image.push(0); // PTX must be NUL-terminated; a cubin ignores trailing bytes.
    let mut raw = ptr::null_mut();
    let mut options = [sys::CUlibraryOption::CU_LIBRARY_BINARY_IS_PRESERVED];
    // The option's value (true) travels in a pointer-sized slot, as JIT options do.
    let mut values = [ptr::without_provenance_mut::<c_void>(1)];
    // SAFETY: `image` is a complete image; the caller keeps it, unmoved, until the library
    // is unloaded (a `Vec`'s heap buffer does not move with the vector).
    check("cuLibraryLoadData", unsafe {
        sys::cuLibraryLoadData(
            &mut raw,
            image.as_ptr() as *const c_void,
            ptr::null_mut(),
            ptr::null_mut(),
            0,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
            1,
        )
    })?;
    Ok((raw, image))
}

/// Modules loaded by [`load_on_threads`], each with the functions asked of it, in order.
pub struct Loaded {
    pub modules: Vec<(Module, Vec<Function>)>,
    /// From the threads' start until the last module was loaded.
    pub seconds: f64,
}

/// What a loading thread made of one image: the library and its functions' handles, as
/// integers that only the driver is given until they are owned on the calling thread,
/// and the image the library reads.
type RawLoad<E> = std::result::Result<(usize, Vec<u8>, Result<Vec<usize>>), E>;

/// Loads `wanted.len()` modules on `threads` threads of `ctx`'s context, and gets from
/// each module `wanted[i]`'s functions there too: the driver loads a kernel lazily, when
/// its function is first got, so that is loading as well. `image(i)` reads (and checks)
/// the i-th image on the loading thread.
pub fn load_on_threads<E: From<CudaError> + Send>(
    ctx: &Context,
    wanted: &[Vec<&str>],
    image: impl Fn(usize) -> std::result::Result<Vec<u8>, E> + Sync,
    threads: usize,
) -> std::result::Result<Loaded, E> {
    ctx.settle()?;
    let (raw_ctx, next, started) = (ctx.raw() as usize, AtomicUsize::new(0), Instant::now());
    let load = |i: usize| -> RawLoad<E> {
        let (library, image) = load_raw(image(i)?)?;
        let functions = wanted[i].iter().map(|name| raw_function(library, name).map(|f| f as usize)).collect();
        Ok((library as usize, image, functions))
    };
    let made = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.clamp(1, wanted.len().max(1)))
            .map(|_| {
                let (next, load) = (&next, &load);
                scope.spawn(move || {
                    // SAFETY: `raw_ctx` is the live context `ctx` holds for the whole scope.
                    let current = check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(raw_ctx as sys::CUcontext) });
                    let mut made = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= wanted.len() {
                            break;
                        }
                        made.push((i, current.clone().map_err(E::from).and_then(|()| load(i))));
                    }
                    (made, started.elapsed().as_secs_f64())
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("a loading thread does not panic")).collect::<Vec<_>>()
    });
    let seconds = made.iter().map(|(_, s)| *s).fold(0.0, f64::max);
    let mut made: Vec<(usize, RawLoad<E>)> = made.into_iter().flat_map(|(m, _)| m).collect();
    made.sort_by_key(|(i, _)| *i);
    own_loaded(ctx, wanted, made).map(|modules| Loaded { modules, seconds })
}

/// Takes ownership of every module the threads loaded (so each is unloaded, whatever
/// failed), then gives the first failure or them all with their functions.
fn own_loaded<E: From<CudaError>>(
    ctx: &Context,
    wanted: &[Vec<&str>],
    made: Vec<(usize, RawLoad<E>)>,
) -> std::result::Result<Vec<(Module, Vec<Function>)>, E> {
    let mut failure = None;
    let mut modules = Vec::with_capacity(made.len());
    for (i, load) in made {
        let owned = load.and_then(|(raw, image, functions)| {
            let module = Module::owning(ctx, raw as sys::CUlibrary, image);
            let functions = functions?.into_iter().zip(&wanted[i]);
            let functions = functions.map(|(raw, name)| module.wrap(raw as sys::CUfunction, name));
            Ok(functions.collect::<Result<Vec<_>>>().map(|f| (module, f))?)
        });
        match owned {
            Ok(loaded) => modules.push(loaded),
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    failure.map_or(Ok(modules), Err)
}

/// The function of kernel `name` in the current context, which loads the kernel there.
fn raw_function(library: sys::CUlibrary, name: &str) -> Result<sys::CUfunction> {
    let c_name =
        CString::new(name).map_err(|_| CudaError::Unsupported(format!("function name `{name}` holds a NUL")))?;
    let (mut kernel, mut raw) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: the library is loaded and `c_name` is NUL-terminated.
    check("cuLibraryGetKernel", unsafe { sys::cuLibraryGetKernel(&mut kernel, library, c_name.as_ptr()) })?;
    // SAFETY: a kernel of a loaded library; the driver writes its function in this context.
    check("cuKernelGetFunction", unsafe { sys::cuKernelGetFunction(&mut raw, kernel) })?;
    Ok(raw)
}

/// The names of a loaded module's kernels.
fn entries_of(module: sys::CUmodule) -> Result<BTreeSet<String>> {
    let mut count = 0u32;
    // SAFETY: a loaded module; the driver writes a count.
    check("cuModuleGetFunctionCount", unsafe { sys::cuModuleGetFunctionCount(&mut count, module) })?;
    let mut functions = vec![ptr::null_mut(); count as usize];
    // SAFETY: `functions` has room for `count` handles.
    check("cuModuleEnumerateFunctions", unsafe {
        sys::cuModuleEnumerateFunctions(functions.as_mut_ptr(), count, module)
    })?;
    functions.into_iter().map(function_name).collect()
}

fn function_name(raw: sys::CUfunction) -> Result<String> {
    let mut name_ptr = ptr::null();
    // SAFETY: a live function handle.
    check("cuFuncGetName", unsafe { sys::cuFuncGetName(&mut name_ptr, raw) })?;
    // SAFETY: the driver returns a NUL-terminated name it owns.
    Ok(unsafe { CStr::from_ptr(name_ptr) }.to_string_lossy().into_owned())
}

/// Asks `cuFuncGetParamInfo` for each parameter until the driver says there is none.
fn param_layout(raw: sys::CUfunction) -> Result<Vec<ParamInfo>> {
    let mut layout = Vec::new();
    loop {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: `raw` is a live function; writes two sizes through valid pointers.
        let status = unsafe { sys::cuFuncGetParamInfo(raw, layout.len(), &mut offset, &mut size) };
        match status {
            sys::CUresult::CUDA_SUCCESS => layout.push(ParamInfo { offset: offset as u64, size: size as u64 }),
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Ok(layout),
            other => return check("cuFuncGetParamInfo", other).map(|_| layout),
        }
    }
}
