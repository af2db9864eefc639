//! Temporary probe (issue 25): can a core's libraries load while the context is made, and
//! how much of a module's load is left for after (getting each kernel's function)?
//! `prelude_probe CORE after|ahead`: one JSON line.
use std::{
    ffi::{c_void, CString},
    path::Path,
    ptr,
    sync::atomic::{AtomicUsize, Ordering},
    time::Instant,
};

use cudarc::driver::sys;
use gnomon_format::Core;
use gnomon_core::cuda::Context;

const THREADS: usize = 8;

fn minflt() -> i64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_minflt
}

/// Runs `f(i)` for every i < n on THREADS threads, `ctx` current on each when given.
fn on_threads<T: Send>(n: usize, ctx: Option<usize>, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let mut out: Vec<(usize, T)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|_| {
                let (next, f) = (&next, &f);
                s.spawn(move || {
                    if let Some(c) = ctx {
                        assert_eq!(unsafe { sys::cuCtxSetCurrent(c as sys::CUcontext) }, sys::CUresult::CUDA_SUCCESS);
                    }
                    let mut made = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= n {
                            break made;
                        }
                        made.push((i, f(i)));
                    }
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, t)| t).collect()
}

/// Loads every kept image as a preserved library, in whatever context is current (none).
fn libraries(core: &Core, ctx: Option<usize>) -> (Vec<(usize, Vec<u8>)>, f64) {
    let t = Instant::now();
    let n = core.manifest().modules.len();
    let libs = on_threads(n, ctx, |i| {
        let mut image = core.take_image(i).expect("kept image");
        image.push(0);
        let mut raw = ptr::null_mut();
        let mut options = [sys::CUlibraryOption::CU_LIBRARY_BINARY_IS_PRESERVED];
        let mut values = [ptr::without_provenance_mut::<c_void>(1)];
        let status = unsafe {
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
        };
        assert_eq!(status, sys::CUresult::CUDA_SUCCESS, "cuLibraryLoadData of module {i}");
        (raw as usize, image)
    });
    (libs, t.elapsed().as_secs_f64())
}

/// Gets every recorded function of every library in the context.
fn functions(core: &Core, libs: &[(usize, Vec<u8>)], ctx: usize) -> (usize, f64) {
    let t = Instant::now();
    let modules = &core.manifest().modules;
    let got = on_threads(modules.len(), Some(ctx), |i| {
        for f in &modules[i].functions {
            let name = CString::new(f.name.clone()).unwrap();
            let (mut kernel, mut func) = (ptr::null_mut(), ptr::null_mut());
            assert_eq!(
                unsafe { sys::cuLibraryGetKernel(&mut kernel, libs[i].0 as sys::CUlibrary, name.as_ptr()) },
                sys::CUresult::CUDA_SUCCESS
            );
            assert_eq!(unsafe { sys::cuKernelGetFunction(&mut func, kernel) }, sys::CUresult::CUDA_SUCCESS);
        }
        modules[i].functions.len()
    });
    (got.iter().sum(), t.elapsed().as_secs_f64())
}

fn current() -> usize {
    let mut c = ptr::null_mut();
    unsafe { sys::cuCtxGetCurrent(&mut c) };
    assert!(!c.is_null());
    c as usize
}

fn main() {
    let dir = std::env::args().nth(1).expect("CORE");
    let mode = std::env::args().nth(2).expect("after|ahead");
    let (t0, f0) = (Instant::now(), minflt());
    let (core, ctx, context_s, open_s, libs, libraries_s, libraries_at) = match mode.as_str() {
        "after" => {
            let (core, ctx) = std::thread::scope(|s| {
                let o = s.spawn(|| (Core::open_for_upload(Path::new(&dir)).unwrap(), t0.elapsed().as_secs_f64()));
                let ctx = Context::new(0).unwrap();
                let at = t0.elapsed().as_secs_f64();
                (o.join().unwrap(), (ctx, at))
            });
            let ((core, open_s), (ctx, context_s)) = (core, ctx);
            let (libs, libraries_s) = libraries(&core, Some(current()));
            (core, ctx, context_s, open_s, libs, libraries_s, t0.elapsed().as_secs_f64())
        }
        "ahead" => {
            let (opened, ctx) = std::thread::scope(|s| {
                let o = s.spawn(|| {
                    let core = Core::open_for_upload(Path::new(&dir)).unwrap();
                    let open_s = t0.elapsed().as_secs_f64();
                    assert_eq!(unsafe { sys::cuInit(0) }, sys::CUresult::CUDA_SUCCESS);
                    let (libs, libraries_s) = libraries(&core, None);
                    (core, open_s, libs, libraries_s, t0.elapsed().as_secs_f64())
                });
                let ctx = Context::new(0).unwrap();
                let at = t0.elapsed().as_secs_f64();
                (o.join().unwrap(), (ctx, at))
            });
            let ((core, open_s, libs, libraries_s, libraries_at), (ctx, context_s)) = (opened, ctx);
            (core, ctx, context_s, open_s, libs, libraries_s, libraries_at)
        }
        other => panic!("mode {other}"),
    };
    let (count, functions_s) = functions(&core, &libs, current());
    let total_s = t0.elapsed().as_secs_f64();
    println!(
        "{{\"mode\":\"{mode}\",\"modules\":{},\"functions\":{count},\"open_s\":{open_s:.4},\"context_s\":{context_s:.4},\"libraries_s\":{libraries_s:.4},\"libraries_at\":{libraries_at:.4},\"functions_s\":{functions_s:.4},\"total_s\":{total_s:.4},\"minflt\":{}}}",
        libs.len(),
        minflt() - f0
    );
    for (raw, _) in libs {
        unsafe { sys::cuLibraryUnload(raw as sys::CUlibrary) };
    }
    drop(ctx);
}
