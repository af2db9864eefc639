//! Page-locked host memory for staging uploads: the driver copies from it asynchronously
//! and at full bus speed, where pageable memory goes through a bounce buffer.
//!
//! Page-locking costs the pages themselves: on the H200 runner `cuMemHostAlloc` of 32 MiB
//! took 0.011-0.020 s, and registering memory already touched 0.002 s, so the touching is
//! the cost (`docs/driver-facts.md`). Memory on transparent huge pages takes a fault per
//! 2 MiB instead of per 4 KiB, so the pool is mapped privately, advised onto huge pages,
//! touched, and only then registered: 0.005-0.008 s for 32 MiB.

use std::{ffi::c_void, ptr};

use cudarc::driver::sys;

use super::{Context, CudaError, Result};

/// A transparent huge page on x86-64; the pool starts at a multiple of it.
pub const HUGE_PAGE: usize = 2 << 20;
/// The smallest page: touching one byte of each faults the whole pool in.
const PAGE: usize = 4096;

/// Host memory registered with `cuMemHostRegister`, unregistered in `Drop` before its
/// memory is freed. It is plain host memory: slices of it may be lent to threads that only
/// read files into them.
pub struct PinnedHost {
    ctx: Context,
    memory: HostMemory,
}

impl PinnedHost {
    /// `len` bytes, faulted in, then page-locked.
    pub fn new(ctx: &Context, len: usize) -> Result<Self> {
        let mut memory = HostMemory::on_huge_pages(len)?;
        memory.as_mut_slice().iter_mut().step_by(PAGE).for_each(|byte| {
            // Volatile: fresh anonymous memory is zero, so a plain store of zero could
            // be dropped as dead. SAFETY: a write through a unique reference.
            unsafe { ptr::write_volatile(byte, 0) }
        });
        let (ptr, size) = (memory.start, memory.len);
        // SAFETY: registers memory this value owns, which outlives the registration.
        ctx.call("cuMemHostRegister", || unsafe { sys::cuMemHostRegister_v2(ptr.cast(), size, 0) })?;
        Ok(Self { ctx: ctx.clone(), memory })
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.memory.as_mut_slice()
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        // SAFETY: unregisters the range registered in `new` (its memory is freed after
        // this, with the field); no copy from it is in flight, since every user
        // synchronizes before letting go of its slices.
        let status = unsafe { sys::cuMemHostUnregister(self.memory.start.cast::<c_void>()) };
        self.ctx.released("cuMemHostUnregister", status);
    }
}

/// A private anonymous mapping holding `len` bytes from a huge-page boundary, advised
/// onto transparent huge pages; unmapped in `Drop`.
struct HostMemory {
    mapping: *mut c_void,
    mapped: usize,
    start: *mut u8,
    len: usize,
}

impl HostMemory {
    fn on_huge_pages(len: usize) -> Result<Self> {
        let too_large = || CudaError::Unsupported(format!("a staging pool of {len} bytes is too large"));
        let advised = len.max(1).checked_next_multiple_of(HUGE_PAGE).ok_or_else(too_large)?;
        let mapped = advised.checked_add(HUGE_PAGE).ok_or_else(too_large)?;
        let (protection, flags) = (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS);
        // SAFETY: a new private anonymous mapping, owned by the value below.
        let mapping = unsafe { libc::mmap(ptr::null_mut(), mapped, protection, flags, -1, 0) };
        if mapping == libc::MAP_FAILED {
            let why = std::io::Error::last_os_error();
            return Err(CudaError::Unsupported(format!("mmap for a staging pool of {len} bytes: {why}")));
        }
        let start = mapping.cast::<u8>().wrapping_add(mapping.align_offset(HUGE_PAGE));
        let memory = Self { mapping, mapped, start, len };
        // SAFETY: advises `advised` bytes from a boundary inside the mapping (it holds a
        // huge page more); advice changes how pages are backed, never what they hold.
        // Refused advice (a kernel without transparent huge pages) leaves small pages,
        // which only pin slower.
        let _ = unsafe { libc::madvise(start.cast(), advised, libc::MADV_HUGEPAGE) };
        Ok(memory)
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `start..start + len` lies in the mapping this value owns for its whole
        // life (zeroed by the kernel), and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.start, self.len) }
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `on_huge_pages`, once.
        unsafe { libc::munmap(self.mapping, self.mapped) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_starts_on_a_huge_page_and_holds_exactly_what_was_asked() {
        for len in [1, PAGE, HUGE_PAGE, 3 * HUGE_PAGE + 1] {
            let mut memory = HostMemory::on_huge_pages(len).expect("a small mapping");
            assert_eq!(memory.start as usize % HUGE_PAGE, 0, "{len} bytes");
            let slice = memory.as_mut_slice();
            assert_eq!(slice.len(), len);
            assert!(slice.iter().all(|&b| b == 0), "fresh anonymous memory reads zero");
            slice.fill(0xA5);
            let end = memory.start as usize + len;
            assert!(end <= memory.mapping as usize + memory.mapped, "{len} bytes fit the mapping");
        }
    }

    #[test]
    fn a_pool_larger_than_the_address_space_is_refused_in_words() {
        let e = HostMemory::on_huge_pages(usize::MAX - 1).err().expect("refused");
        assert_eq!(e.to_string(), format!("a staging pool of {} bytes is too large", usize::MAX - 1));
    }
}
