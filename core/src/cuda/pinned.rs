//! Page-locked host memory for staging uploads: the driver copies from it asynchronously
//! and at full bus speed, where pageable memory goes through a bounce buffer.

use std::{ffi::c_void, ptr};

use cudarc::driver::sys;

use super::{Context, Result};

/// A `cuMemHostAlloc` allocation, freed in `Drop`. It is plain host memory: slices of it
/// may be lent to threads that only read files into them.
pub struct PinnedHost {
    ctx: Context,
    ptr: *mut u8,
    len: usize,
}

impl PinnedHost {
    pub fn new(ctx: &Context, len: usize) -> Result<Self> {
        let mut raw: *mut c_void = ptr::null_mut();
        // SAFETY: writes one host pointer to `len` page-locked bytes; freed in `Drop`.
        ctx.call("cuMemHostAlloc", || unsafe { sys::cuMemHostAlloc(&mut raw, len, 0) })?;
        Ok(Self { ctx: ctx.clone(), ptr: raw.cast(), len })
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points to `len` bytes owned by this value for its whole life, and
        // `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        // SAFETY: frees the allocation made in `new`; no copy from it is in flight, since
        // every user synchronizes before letting go of its slices.
        let status = unsafe { sys::cuMemFreeHost(self.ptr.cast()) };
        self.ctx.released("cuMemFreeHost", status);
    }
}
