//! CUPTI, loaded at run time like the driver: a subscriber to the resource domain's
//! module-loaded callback. Every foreign call and all `unsafe` of the recorder are here;
//! the callback copies the image out before it returns and keeps nothing CUPTI owns.

use std::{
    ffi::{c_char, c_void, CStr},
    path::PathBuf,
    sync::{Mutex, OnceLock},
};

use libloading::Library;

use crate::errors::RecordError;

/// `CUPTI_CB_DOMAIN_RESOURCE` and `CUPTI_CBID_RESOURCE_MODULE_LOADED` (CUDA 13's
/// `cupti_callbacks.h`).
const DOMAIN_RESOURCE: u32 = 3;
const MODULE_LOADED: u32 = 6;
/// `CUPTI_CB_DOMAIN_DRIVER_API`, and `CUPTI_API_EXIT` of `CUpti_ApiCallbackSite`.
const DOMAIN_DRIVER_API: u32 = 1;
const API_EXIT: u32 = 1;
/// Driver calls that load a module, or a library (cuDNN's runtime-compiled kernels come
/// so), and return its handle through their first parameter (`CUmodule *` or
/// `CUlibrary *`), the image or its file's name second. Their callback ids are asked of
/// CUPTI by name.
const MODULE_LOADS: [&str; 6] = [
    "cuModuleLoad",
    "cuModuleLoadData",
    "cuModuleLoadDataEx",
    "cuModuleLoadFatBinary",
    "cuLibraryLoadData",
    "cuLibraryLoadFromFile",
];
/// Those of [`MODULE_LOADS`] given a file's name.
const FILE_LOADS: [&str; 2] = ["cuModuleLoad", "cuLibraryLoadFromFile"];
/// Callback ids of the driver domain are below this (CUDA 13 defines about 800).
const DRIVER_CBIDS: u32 = 4096;

/// `CUpti_CallbackData`, the driver domain's callback data.
#[repr(C)]
struct ApiCallbackData {
    site: u32,
    function_name: *const c_char,
    function_params: *const c_void,
    return_value: *const c_void,
    symbol_name: *const c_char,
    context: *mut c_void,
    context_uid: u32,
    correlation_data: *mut u64,
    correlation_id: u32,
}

/// `CUpti_ResourceData`: for a module load, `descriptor` is a [`ModuleResourceData`].
#[repr(C)]
struct ResourceData {
    context: *mut c_void,
    stream: *mut c_void,
    descriptor: *const ModuleResourceData,
}

/// `CUpti_ModuleResourceData`.
#[repr(C)]
struct ModuleResourceData {
    module_id: u32,
    cubin_size: usize,
    cubin: *const c_char,
}

type Callback = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
type Subscribe = unsafe extern "C" fn(*mut *mut c_void, Callback, *mut c_void) -> u32;
type EnableCallback = unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> u32;
type Unsubscribe = unsafe extern "C" fn(*mut c_void) -> u32;
type ResultString = unsafe extern "C" fn(u32, *mut *const c_char) -> u32;
type CallbackName = unsafe extern "C" fn(u32, u32, *mut *const c_char) -> u32;

/// One image as the callback copied it: the bytes, and the shared
/// object that asked the driver to load it (the first frame of the call stack outside
/// the driver, CUDA's runtime, CUPTI and Gnomon), where the stack could be walked.
pub(super) struct Load {
    pub bytes: Vec<u8>,
    pub loader: Option<PathBuf>,
}

/// What the callbacks saw: images in load order, and the handles the loads of [`MODULE_LOADS`]
/// returned, each with the digest of the ELF image it was given and the object that
/// called it.
#[derive(Default)]
pub(super) struct Seen {
    pub loads: Vec<Load>,
    pub modules: Vec<ModuleLoad>,
}

/// A `cuModuleLoad*` or `cuLibraryLoad*` call the recorder heard return.
pub(super) struct ModuleLoad {
    pub handle: usize,
    /// Whether `handle` is a `CUlibrary`, whose module in a context the driver names.
    pub library: bool,
    pub digest: String,
    pub loader: Option<PathBuf>,
}

pub(super) type Sink = Mutex<Seen>;

/// CUPTI, opened once and never closed: it stays attached to the driver.
static CUPTI: OnceLock<(PathBuf, Library)> = OnceLock::new();

fn library(candidates: &[PathBuf]) -> Result<&'static Library, RecordError> {
    if let Some((_, lib)) = CUPTI.get() {
        return Ok(lib);
    }
    for path in candidates {
        // SAFETY: loading CUPTI runs its initialisers, which only register with the driver.
        if let Ok(lib) = unsafe { Library::new(path) } {
            return Ok(&CUPTI.get_or_init(|| (path.clone(), lib)).1);
        }
    }
    Err(RecordError::NoCupti { tried: candidates.iter().map(|p| p.display().to_string()).collect() })
}

/// A live subscription; the loads it copied go to a sink that outlives it.
pub(super) struct Subscription {
    handle: *mut c_void,
    unsubscribe: Unsubscribe,
    _sink: Box<Sink>,
    sink: *const Sink,
}

impl Subscription {
    /// Subscribes and enables the module-loaded callback; CUPTI allows one subscriber per
    /// process, so a second recorder is refused with CUPTI's own words.
    pub(super) fn start(candidates: &[PathBuf]) -> Result<Self, RecordError> {
        let lib = library(candidates)?;
        let call = |name: &'static str, code: u32| -> Result<(), RecordError> {
            match code {
                0 => Ok(()),
                code => Err(RecordError::Cupti { call: name, code, text: result_string(lib, code) }),
            }
        };
        // SAFETY (the three look-ups): the symbols have the C signatures of `cupti.h`.
        let (subscribe, enable, unsubscribe) = unsafe {
            (
                *lib.get::<Subscribe>(b"cuptiSubscribe\0").map_err(missing("cuptiSubscribe"))?,
                *lib.get::<EnableCallback>(b"cuptiEnableCallback\0").map_err(missing("cuptiEnableCallback"))?,
                *lib.get::<Unsubscribe>(b"cuptiUnsubscribe\0").map_err(missing("cuptiUnsubscribe"))?,
            )
        };
        let sink: Box<Sink> = Box::default();
        let sink_ptr: *const Sink = &*sink;
        let mut handle = std::ptr::null_mut();
        // SAFETY: `on_callback` matches `CUpti_CallbackFunc`; the sink it is handed lives
        // in this value until after `cuptiUnsubscribe` in `Drop`.
        call("cuptiSubscribe", unsafe { subscribe(&mut handle, on_callback, sink_ptr as *mut c_void) })?;
        let subscription = Self { handle, unsubscribe, _sink: sink, sink: sink_ptr };
        // SAFETY: a live subscriber handle and a domain and callback id CUPTI defines.
        call("cuptiEnableCallback", unsafe { enable(1, handle, DOMAIN_RESOURCE, MODULE_LOADED) })?;
        for cbid in module_load_callbacks(lib) {
            // SAFETY: as above, with an id CUPTI named.
            call("cuptiEnableCallback", unsafe { enable(1, handle, DOMAIN_DRIVER_API, cbid) })?;
        }
        Ok(subscription)
    }

    pub(super) fn seen(&self) -> &Sink {
        // SAFETY: points into `_sink`, which this value owns.
        unsafe { &*self.sink }
    }

    pub(super) fn library_path() -> Option<PathBuf> {
        CUPTI.get().map(|(path, _)| path.clone())
    }
}

// SAFETY: the subscriber handle is process-wide (CUPTI allows one per process), and the
// sink it writes is behind a mutex; nothing in a subscription is tied to a thread.
unsafe impl Send for Subscription {}

impl Drop for Subscription {
    fn drop(&mut self) {
        // SAFETY: the handle came from `cuptiSubscribe`; after this no callback runs, so
        // the sink may go.
        let _ = unsafe { (self.unsubscribe)(self.handle) };
    }
}

/// The driver-domain callback ids of [`MODULE_LOADS`], found by name; none where this
/// CUPTI cannot name its callbacks (images are then mapped by their kernels alone).
fn module_load_callbacks(lib: &Library) -> Vec<u32> {
    // SAFETY: the symbol has the C signature of `cupti.h`.
    let Ok(name_of) = (unsafe { lib.get::<CallbackName>(b"cuptiGetCallbackName\0") }) else { return Vec::new() };
    (1..DRIVER_CBIDS)
        .filter(|&cbid| {
            let mut name = std::ptr::null();
            // SAFETY: CUPTI writes a pointer to a static NUL-terminated string, or fails.
            let named = unsafe { name_of(DOMAIN_DRIVER_API, cbid, &mut name) } == 0 && !name.is_null();
            // SAFETY: as above.
            named && MODULE_LOADS.iter().any(|m| unsafe { CStr::from_ptr(name) }.to_bytes() == m.as_bytes())
        })
        .collect()
}

fn missing(name: &'static str) -> impl Fn(libloading::Error) -> RecordError {
    move |e| RecordError::Cupti { call: name, code: u32::MAX, text: e.to_string() }
}

fn result_string(lib: &Library, code: u32) -> String {
    // SAFETY: `cuptiGetResultString` writes a pointer to a static NUL-terminated string.
    unsafe {
        let Ok(describe) = lib.get::<ResultString>(b"cuptiGetResultString\0") else { return format!("code {code}") };
        let mut text = std::ptr::null();
        match describe(code, &mut text) {
            0 if !text.is_null() => CStr::from_ptr(text).to_string_lossy().into_owned(),
            _ => format!("code {code}"),
        }
    }
}

/// CUPTI's callback: copies a loaded module's image into the sink and returns; it must
/// not unwind into CUPTI, and holds the lock only to push.
unsafe extern "C" fn on_callback(userdata: *mut c_void, domain: u32, cbid: u32, cbdata: *const c_void) {
    if userdata.is_null() || cbdata.is_null() {
        return;
    }
    if domain == DOMAIN_DRIVER_API {
        // SAFETY: for the driver domain CUPTI passes a `CUpti_CallbackData`; the sink is
        // the one the subscription keeps alive.
        unsafe { on_module_load_call(&*(cbdata as *const ApiCallbackData), &*(userdata as *const Sink)) };
        return;
    }
    if domain != DOMAIN_RESOURCE || cbid != MODULE_LOADED {
        return;
    }
    // SAFETY: for this domain and id CUPTI passes a `CUpti_ResourceData` whose descriptor
    // is a `CUpti_ModuleResourceData`, valid until the callback returns; `userdata` is the
    // sink the subscription keeps alive.
    let (module, sink) = unsafe { ((*(cbdata as *const ResourceData)).descriptor, &*(userdata as *const Sink)) };
    if module.is_null() {
        return;
    }
    let module = unsafe { &*module };
    if module.cubin.is_null() || module.cubin_size == 0 {
        return;
    }
    // SAFETY: CUPTI says the image is `cubin_size` bytes at `cubin`, until we return.
    let bytes = unsafe { std::slice::from_raw_parts(module.cubin as *const u8, module.cubin_size) }.to_vec();
    let loader = loader();
    sink.lock().unwrap_or_else(|e| e.into_inner()).loads.push(Load { bytes, loader });
}

/// On the successful exit of a load of [`MODULE_LOADS`] given an ELF image or a file, notes the
/// module handle it returned with the digest of that image: the recorded image of the
/// same digest is the module's, even when the driver loads it lazily, after the call.
fn on_module_load_call(call: &ApiCallbackData, sink: &Sink) {
    if call.site != API_EXIT || call.function_params.is_null() || call.return_value.is_null() {
        return;
    }
    // SAFETY: at exit, `return_value` points to the call's `CUresult`, and the parameters
    // of every call in `MODULE_LOADS` begin with the handle's address (written on success)
    // followed by the image pointer, or for `cuModuleLoad` the file name.
    let (module, image) = unsafe {
        if *(call.return_value as *const u32) != 0 {
            return;
        }
        let params = call.function_params as *const *const c_void;
        let out = *params as *const *mut c_void;
        if out.is_null() {
            return;
        }
        (*out as usize, *params.add(1) as *const u8)
    };
    let name = match call.function_name.is_null() {
        true => &[][..],
        // SAFETY: the driver names its call with a static NUL-terminated string.
        false => unsafe { CStr::from_ptr(call.function_name) }.to_bytes(),
    };
    let digest = if FILE_LOADS.iter().any(|f| f.as_bytes() == name) {
        // SAFETY: the load succeeded with this NUL-terminated file name; PyTorch's static
        // launcher of Inductor's kernels loads their cubins so.
        let path = unsafe { CStr::from_ptr(image as *const c_char) }.to_string_lossy().into_owned();
        let Ok(bytes) = std::fs::read(path) else { return };
        super::load_digest(&bytes)
    } else {
        // SAFETY: a load the driver accepted was given a readable image; its
        // ELF header says how long it is.
        let Some(bytes) = (unsafe { elf_image(image) }) else { return };
        super::load_digest(bytes)
    };
    let load = ModuleLoad { handle: module, library: name.starts_with(b"cuLibrary"), digest, loader: loader() };
    sink.lock().unwrap_or_else(|e| e.into_inner()).modules.push(load);
}

/// The bytes of the ELF image at `image`, as long as its headers say.
///
/// # Safety
/// `image` must be null or point to a readable image the driver accepted.
unsafe fn elf_image<'a>(image: *const u8) -> Option<&'a [u8]> {
    if image.is_null() || std::slice::from_raw_parts(image, 4) != b"\x7fELF" {
        return None;
    }
    // The header, then as far as the section header table it names: an image the driver
    // accepted holds both.
    let len = super::elf_len(|n| Some(std::slice::from_raw_parts(image, n)))?;
    Some(std::slice::from_raw_parts(image, len))
}

/// Objects on the stack of a module load that are the loading machinery, not its user.
const MACHINERY: [&str; 4] = ["libcuda.so", "libcupti.so", "libcudart.so", "libcudadebugger.so"];

/// The shared object whose code asked for the load now under way.
fn loader() -> Option<PathBuf> {
    let own = object_of(on_callback as *const c_void);
    let mut found = None;
    // SAFETY: walks this thread's own stack inside the callback; the closure only reads
    // each frame's instruction pointer and looks it up.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let object = object_of(frame.ip());
            let machinery = |o: &PathBuf| {
                let name = o.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                MACHINERY.iter().any(|m| name.starts_with(m)) || Some(o) == own.as_ref()
            };
            match object {
                Some(o) if !machinery(&o) => {
                    found = Some(o);
                    false
                }
                _ => true,
            }
        })
    };
    found
}

/// The file of the shared object (or executable) that holds `address`.
fn object_of(address: *const c_void) -> Option<PathBuf> {
    // SAFETY: `dladdr` fills `info` for any address, or returns 0; the name it points to
    // belongs to the loader and is copied before the next call.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(address, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some(PathBuf::from(CStr::from_ptr(info.dli_fname).to_string_lossy().into_owned()))
    }
}
