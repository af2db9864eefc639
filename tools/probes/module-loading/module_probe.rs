//! Temporary probe: how fast a core's modules load, by way and thread count.
use std::{
    ffi::{c_void, CString},
    os::fd::AsRawFd,
    path::Path,
    ptr,
    sync::atomic::{AtomicUsize, Ordering},
    time::Instant,
};

use cudarc::driver::sys;
use gnomon_format::{hash_hex, Core};
use gnomon_core::cuda::Context;

#[derive(Clone, Copy, Debug)]
enum Way {
    ReadHashModule,
    ReadModule,
    MmapModule,
    MmapHashModule,
    MmapLibrary,
    ReadHashOnly,
}

fn mmap(file: &std::fs::File) -> (*mut c_void, usize) {
    let len = file.metadata().unwrap().len() as usize;
    let p = unsafe { libc::mmap(ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
    assert!(p != libc::MAP_FAILED);
    (p, len)
}

fn main() {
    let dir = std::env::args().nth(1).expect("CORE");
    let ctx = Context::new(0).unwrap();
    let raw_ctx = { let mut c = ptr::null_mut(); unsafe { sys::cuCtxGetCurrent(&mut c) }; assert!(!c.is_null()); let _ = &ctx; c as usize };
    let core = Core::open_for_upload(Path::new(&dir)).unwrap();
    let modules = &core.manifest().modules;
    let total: u64 = modules.iter().map(|m| core.open_file(&m.file, "m").unwrap().metadata().unwrap().len()).sum();
    let funcs: usize = modules.iter().map(|m| m.functions.len()).sum();
    println!("{} modules, {} MB, {funcs} functions, CUDA_MODULE_LOADING={:?}", modules.len(), total / 1_000_000, std::env::var("CUDA_MODULE_LOADING").ok());
    let mut sizes: Vec<(u64, usize)> = modules.iter().map(|m| (core.open_file(&m.file, "m").unwrap().metadata().unwrap().len(), m.functions.len())).collect();
    sizes.sort();
    println!("largest (bytes, functions): {:?}", &sizes[sizes.len().saturating_sub(4)..]);
    for round in 0..2 {
        for way in [Way::ReadHashOnly, Way::ReadHashModule, Way::ReadModule, Way::MmapModule, Way::MmapHashModule, Way::MmapLibrary] {
            for threads in [1, 4, 8, 16] {
                let next = AtomicUsize::new(0);
                let t = Instant::now();
                let loaded: Vec<Vec<(usize, usize)>> = std::thread::scope(|s| {
                    let hs: Vec<_> = (0..threads)
                        .map(|_| {
                            let next = &next;
                            let core = &core;
                            s.spawn(move || {
                                unsafe { sys::cuCtxSetCurrent(raw_ctx as sys::CUcontext) };
                                let mut out = Vec::new();
                                loop {
                                    let i = next.fetch_add(1, Ordering::SeqCst);
                                    let Some(m) = modules.get(i) else { break };
                                    let file = core.open_file(&m.file, "m").unwrap();
                                    let names: Vec<CString> = m.functions.iter().map(|f| CString::new(f.name.clone()).unwrap()).collect();
                                    let image: Vec<u8>;
                                    let (p, len) = match way {
                                        Way::ReadHashOnly | Way::ReadHashModule | Way::ReadModule => {
                                            let mut v = std::fs::read(core.dir().join(&m.file)).unwrap();
                                            if !matches!(way, Way::ReadModule) {
                                                assert_eq!(hash_hex(v.as_slice()).unwrap(), m.sha256);
                                            }
                                            v.push(0);
                                            image = v;
                                            (image.as_ptr() as *mut c_void, image.len())
                                        }
                                        _ => {
                                            let (p, len) = mmap(&file);
                                            if matches!(way, Way::MmapHashModule) {
                                                let sl = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
                                                assert_eq!(hash_hex(sl).unwrap(), m.sha256);
                                            }
                                            (p, len)
                                        }
                                    };
                                    match way {
                                        Way::ReadHashOnly => {}
                                        Way::MmapLibrary => {
                                            let mut lib = ptr::null_mut();
                                            let r = unsafe { sys::cuLibraryLoadData(&mut lib, p, ptr::null_mut(), ptr::null_mut(), 0, ptr::null_mut(), ptr::null_mut(), 0) };
                                            assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{}", m.id);
                                            for n in &names {
                                                let mut k = ptr::null_mut();
                                                assert_eq!(unsafe { sys::cuLibraryGetKernel(&mut k, lib, n.as_ptr()) }, sys::CUresult::CUDA_SUCCESS);
                                                let mut f = ptr::null_mut();
                                                assert_eq!(unsafe { sys::cuKernelGetFunction(&mut f, k) }, sys::CUresult::CUDA_SUCCESS);
                                            }
                                            out.push((1, lib as usize));
                                        }
                                        _ => {
                                            let mut module = ptr::null_mut();
                                            let r = unsafe { sys::cuModuleLoadData(&mut module, p) };
                                            assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{}", m.id);
                                            for n in &names {
                                                let mut f = ptr::null_mut();
                                                assert_eq!(unsafe { sys::cuModuleGetFunction(&mut f, module, n.as_ptr()) }, sys::CUresult::CUDA_SUCCESS);
                                            }
                                            out.push((0, module as usize));
                                        }
                                    }
                                    if !matches!(way, Way::ReadHashOnly | Way::ReadHashModule | Way::ReadModule) {
                                        unsafe { libc::munmap(p, len) };
                                    }
                                }
                                out
                            })
                        })
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).collect()
                });
                let s = t.elapsed().as_secs_f64();
                for (kind, h) in loaded.into_iter().flatten() {
                    unsafe {
                        if kind == 0 { sys::cuModuleUnload(h as sys::CUmodule); } else { sys::cuLibraryUnload(h as sys::CUlibrary); }
                    }
                }
                println!("round {round} {way:?} threads={threads}: {s:.3} s");
            }
        }
    }
}
