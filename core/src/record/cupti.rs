//! CUPTI, loaded at run time like the driver: a subscriber to the resource domain's
//! module-loaded callback. Every foreign call and all `unsafe` of the recorder are here;
//! the callback copies the image out before it returns and keeps nothing CUPTI owns.

use std::{
    ffi::{c_char, c_void, CStr},
    path::PathBuf,
    sync::{Mutex, OnceLock},
};

use cudarc::cupti::sys::{
    CUptiResult, CUpti_ApiCallbackSite, CUpti_CallbackData, CUpti_CallbackDomain, CUpti_CallbackIdResource,
    CUpti_ModuleResourceData, CUpti_ResourceData, CUpti_SubscriberHandle, CUpti_driver_api_trace_cbid_enum as Driver,
};
use libloading::Library;

use crate::errors::RecordError;

const DOMAIN_RESOURCE: u32 = CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE as u32;
const MODULE_LOADED: u32 = CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_MODULE_LOADED as u32;
const DOMAIN_DRIVER_API: u32 = CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API as u32;
/// Driver calls that load a module, or a library (cuDNN's runtime-compiled kernels come
/// so), and return its handle through their first parameter (`CUmodule *` or
/// `CUlibrary *`), the image or its file's name second.
const MODULE_LOADS: [Driver; 6] = [
    Driver::CUPTI_DRIVER_TRACE_CBID_cuModuleLoad,
    Driver::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData,
    Driver::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx,
    Driver::CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary,
    Driver::CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData,
    Driver::CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile,
];
/// Driver calls that unload what a load of [`MODULE_LOADS`] returned, given its handle
/// first: a handle unloaded must never be handed to the driver again (`cuLibraryGetModule`
/// of an unloaded library crashed the process on the H200).
const UNLOADS: [Driver; 2] =
    [Driver::CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, Driver::CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload];
/// Those of [`MODULE_LOADS`] given a file's name.
const FILE_LOADS: [&str; 2] = ["cuModuleLoad", "cuLibraryLoadFromFile"];

const SUCCESS: u32 = CUptiResult::CUPTI_SUCCESS as u32;

// cudarc's types and constants, with the functions looked up in the CUPTI found by path:
// cudarc's own loader searches library names only, and panics where none is found.
// Domains and results cross as plain integers, as `cupti.h` has them: a value newer than
// cudarc's enums must not be read into one.
type Callback = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
type Subscribe = unsafe extern "C" fn(*mut CUpti_SubscriberHandle, Callback, *mut c_void) -> u32;
type EnableCallback = unsafe extern "C" fn(u32, CUpti_SubscriberHandle, u32, u32) -> u32;
type Unsubscribe = unsafe extern "C" fn(CUpti_SubscriberHandle) -> u32;
type ResultString = unsafe extern "C" fn(u32, *mut *const c_char) -> u32;

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
    handle: CUpti_SubscriberHandle,
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
                SUCCESS => Ok(()),
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
        for cbid in MODULE_LOADS.into_iter().chain(UNLOADS) {
            // SAFETY: as above.
            call("cuptiEnableCallback", unsafe { enable(1, handle, DOMAIN_DRIVER_API, cbid as u32) })?;
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

fn missing(name: &'static str) -> impl Fn(libloading::Error) -> RecordError {
    move |e| RecordError::Cupti { call: name, code: u32::MAX, text: e.to_string() }
}

fn result_string(lib: &Library, code: u32) -> String {
    // SAFETY: `cuptiGetResultString` writes a pointer to a static NUL-terminated string.
    unsafe {
        let Ok(describe) = lib.get::<ResultString>(b"cuptiGetResultString\0") else { return format!("code {code}") };
        let mut text = std::ptr::null();
        match describe(code, &mut text) {
            SUCCESS if !text.is_null() => CStr::from_ptr(text).to_string_lossy().into_owned(),
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
        let (call, sink) = unsafe { (&*(cbdata as *const CUpti_CallbackData), &*(userdata as *const Sink)) };
        match UNLOADS.iter().find(|u| **u as u32 == cbid) {
            Some(unload) => on_unload_call(call, *unload == Driver::CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload, sink),
            None => on_module_load_call(call, sink),
        }
        return;
    }
    if domain != DOMAIN_RESOURCE || cbid != MODULE_LOADED {
        return;
    }
    // SAFETY: for this domain and id CUPTI passes a `CUpti_ResourceData` whose descriptor
    // is a `CUpti_ModuleResourceData`, valid until the callback returns; `userdata` is the
    // sink the subscription keeps alive.
    let (module, sink) = unsafe {
        let descriptor = (*(cbdata as *const CUpti_ResourceData)).resourceDescriptor;
        (descriptor as *const CUpti_ModuleResourceData, &*(userdata as *const Sink))
    };
    if module.is_null() {
        return;
    }
    let module = unsafe { &*module };
    if module.pCubin.is_null() || module.cubinSize == 0 {
        return;
    }
    // SAFETY: CUPTI says the image is `cubinSize` bytes at `pCubin`, until we return.
    let bytes = unsafe { std::slice::from_raw_parts(module.pCubin as *const u8, module.cubinSize) }.to_vec();
    let loader = loader();
    sink.lock().unwrap_or_else(|e| e.into_inner()).loads.push(Load { bytes, loader });
}

/// Whether this is the exit of a call that succeeded.
fn succeeded(call: &CUpti_CallbackData) -> bool {
    let exit = call.callbackSite == CUpti_ApiCallbackSite::CUPTI_API_EXIT;
    // SAFETY: at exit, a non-null `functionReturnValue` points to the call's `CUresult`.
    exit && !call.functionParams.is_null()
        && !call.functionReturnValue.is_null()
        && unsafe { *(call.functionReturnValue as *const u32) } == 0
}

/// On the successful exit of an unload of [`UNLOADS`], forgets the loads that returned
/// its handle.
fn on_unload_call(call: &CUpti_CallbackData, library: bool, sink: &Sink) {
    if !succeeded(call) {
        return;
    }
    // SAFETY: both unloads take the handle, by value, as their one parameter.
    let handle = unsafe { *(call.functionParams as *const usize) };
    let mut seen = sink.lock().unwrap_or_else(|e| e.into_inner());
    seen.modules.retain(|m| m.handle != handle || m.library != library);
}

/// On the successful exit of a load of [`MODULE_LOADS`] given an ELF image or a file, notes the
/// module handle it returned with the digest of that image: the recorded image of the
/// same digest is the module's, even when the driver loads it lazily, after the call.
fn on_module_load_call(call: &CUpti_CallbackData, sink: &Sink) {
    if !succeeded(call) {
        return;
    }
    // SAFETY: the parameters of every call in `MODULE_LOADS` begin with the handle's
    // address (written on success) followed by the image pointer, or for `cuModuleLoad`
    // the file name.
    let (module, image) = unsafe {
        let params = call.functionParams as *const *const c_void;
        let out = *params as *const *mut c_void;
        if out.is_null() {
            return;
        }
        (*out as usize, *params.add(1) as *const u8)
    };
    let name = match call.functionName.is_null() {
        true => &[][..],
        // SAFETY: the driver names its call with a static NUL-terminated string.
        false => unsafe { CStr::from_ptr(call.functionName) }.to_bytes(),
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
