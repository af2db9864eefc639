//! The process's heap: jemalloc serves every allocation, the CUDA driver's included, and
//! the threads that instantiate graphs allocate from an arena of their own on transparent
//! huge pages. A fresh process's first instantiations take about 6 KB of driver heap per
//! node; on small pages that is a page fault for every 4 KiB, about twice the driver's own
//! cost per node on the H200 runner. Huge pages for the whole process slowed the ports'
//! uploads instead (docs/driver-facts.md), so only this arena has them.

use std::{ptr::NonNull, sync::OnceLock};

use rustix::mm::{madvise, Advice};
use tikv_jemalloc_ctl::raw;
use tikv_jemalloc_sys::{dallocx, mallocx, MALLOCX_ALIGN, MALLOCX_ARENA, MALLOCX_TCACHE_NONE};

/// Address space the arena starts with, advised onto huge pages; untouched it costs no
/// memory. The nightly core's 64 000 nodes take 395 MB; beyond it the arena grows on small
/// pages.
const RESERVED_BYTES: usize = 1 << 30;
const HUGE_PAGE: usize = 2 << 20;

/// The arena's index and the start of the range reserved for it, made by the first
/// instantiating thread; `None` where jemalloc refused (the threads keep their own).
static ARENA: OnceLock<Option<(u32, usize)>> = OnceLock::new();

/// Has core's instantiating threads allocate from the arena. Nothing is made until a
/// process instantiates: commands that never do pay nothing at start-up.
pub fn instantiate_on_huge_pages() {
    gnomon_core::cuda::on_instantiating_threads(bind_thread);
}

/// Makes the arena. The range is reserved by allocating it in the arena and freeing it
/// again: jemalloc keeps freed extents for the arena's later allocations, and the advice
/// stays with the mapping. Where the kernel refuses the advice, it works on small pages.
fn make_arena() -> Result<(u32, usize), String> {
    // SAFETY: `arenas.create` writes one unsigned index.
    let arena: u32 = unsafe { raw::read(b"arenas.create\0") }.map_err(|e| format!("jemalloc arenas.create: {e}"))?;
    let flags = MALLOCX_ARENA(arena as usize) | MALLOCX_ALIGN(HUGE_PAGE) | MALLOCX_TCACHE_NONE;
    // SAFETY: a fresh allocation of a non-zero size in the arena just made.
    let range =
        NonNull::new(unsafe { mallocx(RESERVED_BYTES, flags) }).ok_or("jemalloc: reserve the huge-page arena")?;
    // SAFETY: the range is this allocation, unused; advice changes no contents.
    let _refused_leaves_small_pages = unsafe { madvise(range.as_ptr(), RESERVED_BYTES, Advice::LinuxHugepage) };
    // SAFETY: allocated above with the same flags, never used.
    unsafe { dallocx(range.as_ptr(), flags) };
    Ok((arena, range.as_ptr() as usize))
}

/// Has this thread allocate from the arena from now on, making it first if need be.
fn bind_thread() {
    let made = ARENA.get_or_init(|| {
        make_arena().inspect_err(|e| eprintln!("gnomon: graphs are instantiated on the default heap: {e}")).ok()
    });
    if let Some((arena, _)) = made {
        // SAFETY: `thread.arena` takes one unsigned index of an existing arena.
        let _unbound_keeps_its_own = unsafe { raw::write(b"thread.arena\0", *arena) };
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::c_void;

    use super::*;

    /// The instantiating threads' allocations come from the reserved range: the routing
    /// that gives them huge pages (whether the kernel backs them is the runner's business).
    #[test]
    fn instantiating_threads_allocate_in_the_reserved_range() {
        let on_bound_thread = std::thread::spawn(|| {
            bind_thread();
            let blocks: Vec<Box<[u8; 4096]>> = (0..64).map(|_| Box::new([1; 4096])).collect();
            blocks.iter().map(|b| b.as_ptr() as usize).collect::<Vec<_>>()
        });
        let addresses = on_bound_thread.join().unwrap();
        let (_, start) = ARENA.get().copied().flatten().expect("the arena was made");
        let inside = |p: *const c_void| (start..start + RESERVED_BYTES).contains(&(p as usize));
        assert!(addresses.iter().all(|&a| inside(a as *const c_void)), "{addresses:x?} outside {start:#x}");
        let elsewhere = Box::new([2u8; 4096]);
        assert!(!inside(elsewhere.as_ptr().cast()), "an unbound thread allocated in the arena");
    }
}
