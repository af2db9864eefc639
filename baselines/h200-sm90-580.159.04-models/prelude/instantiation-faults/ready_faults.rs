//! Temporary probe (issue 25): where a fresh process's first instantiations spend their
//! time. `ready_faults CORE ROUNDS keep|drop PREFAULT_MIB`: maps the arena, loads the
//! modules and builds every template on this thread (`rebuild_only`), then each round
//! instantiates them all on one new thread, as replay's instantiating thread does, the
//! executables kept or dropped after each round. With PREFAULT_MIB > 0, the first round's
//! thread first allocates and touches that much heap in 64 KiB pieces and frees it, the trim
//! threshold raised so that glibc might keep it (it did not: README). One JSON line per
//! phase: wall seconds, that thread's minor faults and CPU seconds (`RUSAGE_THREAD`), the
//! process's glibc heap growth (`mallinfo2`: arena + mmapped bytes).
use std::{path::Path, time::Instant};

use gnomon_format::{validate::recorded_flags, Core};

use gnomon_core::{cuda::Context, replay::rebuild_only};

#[derive(Clone, Copy)]
struct Usage {
    minflt: i64,
    user: f64,
    sys: f64,
    heap: usize,
}

fn usage() -> Usage {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let m = unsafe { libc::mallinfo2() };
    Usage { minflt: u.ru_minflt, user: secs(u.ru_utime), sys: secs(u.ru_stime), heap: m.arena + m.hblkhd }
}

fn line(phase: &str, wall: f64, nodes: usize, a: Usage, b: Usage) {
    println!(
        "{{\"phase\":\"{phase}\",\"wall_s\":{wall:.4},\"us_per_node\":{:.2},\"minflt\":{},\"user_s\":{:.4},\"sys_s\":{:.4},\"heap_growth_mb\":{:.1}}}",
        wall / nodes as f64 * 1e6,
        b.minflt - a.minflt,
        b.user - a.user,
        b.sys - a.sys,
        (b.heap as f64 - a.heap as f64) / 1e6
    );
}

/// Allocates `mib` MiB in 64 KiB pieces, touches every page, frees it all.
fn prefault(mib: usize) {
    let pieces: Vec<Vec<u8>> = (0..mib * 16).map(|_| vec![1u8; 64 << 10]).collect();
    std::hint::black_box(&pieces);
}

struct Shared<'a>(&'a [gnomon_core::cuda::RetainedGraph]);
unsafe impl Send for Shared<'_> {}
unsafe impl Sync for Shared<'_> {}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, rounds, keep, prefault_mib) =
        (&args[1], args[2].parse::<usize>().unwrap(), args[3] == "keep", args[4].parse::<usize>().unwrap());
    unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX) };
    let core = Core::open_for_upload(Path::new(dir)).unwrap();
    let ctx = Context::new(0).unwrap();
    let flags: Vec<u64> =
        core.manifest().templates.iter().map(|t| recorded_flags(&t.flags).unwrap().bits()).collect();
    let nodes: usize = core.manifest().templates.iter().map(|t| t.nodes.len()).sum();
    let (t, a) = (Instant::now(), usage());
    let rebuilt = rebuild_only(&core, &ctx).unwrap();
    line("map-modules-build", t.elapsed().as_secs_f64(), nodes, a, usage());
    let graphs = Shared(&rebuilt.graphs);
    let mut current = std::ptr::null_mut();
    unsafe { cudarc::driver::sys::cuCtxGetCurrent(&mut current) };
    let current = current as usize;
    let mut kept = Vec::new();
    for round in 0..rounds {
        let execs = std::thread::scope(|s| {
            let graphs = &graphs;
            let flags = &flags;
            s.spawn(move || {
                unsafe { cudarc::driver::sys::cuCtxSetCurrent(current as cudarc::driver::sys::CUcontext) };
                if round == 0 && prefault_mib > 0 {
                    let (t, a) = (Instant::now(), usage());
                    prefault(prefault_mib);
                    line("prefault", t.elapsed().as_secs_f64(), nodes, a, usage());
                }
                let (t, a) = (Instant::now(), usage());
                let execs: Vec<_> = graphs.0.iter().zip(flags).map(|(g, &f)| g.instantiate(f).unwrap()).collect();
                line(&format!("instantiate-{round}"), t.elapsed().as_secs_f64(), nodes, a, usage());
                Shared2(execs)
            })
            .join()
            .unwrap()
        });
        if keep {
            kept.push(execs);
        } else {
            let (t, a) = (Instant::now(), usage());
            drop(execs);
            line(&format!("destroy-{round}"), t.elapsed().as_secs_f64(), nodes, a, usage());
        }
    }
    let (t, a) = (Instant::now(), usage());
    drop(kept);
    drop(rebuilt);
    line("destroy-rest", t.elapsed().as_secs_f64(), nodes, a, usage());
}

struct Shared2(Vec<gnomon_core::cuda::GraphExec>);
unsafe impl Send for Shared2 {}
