//! The fixed-address arena: per shard one `cuMemAddressReserve` at its exact address, one
//! `cuMemCreate`, one `cuMemMap`. The driver treats the address as a hint, so every
//! reservation is compared with the address asked for and refused on a mismatch. The
//! ranks of a rank set create theirs shareable, hand each other the shards as POSIX file
//! descriptors (`crate::rendezvous`) and map a peer's at a fixed address of their own.

use std::{
    ffi::{c_int, c_void},
    os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
};

use cudarc::driver::sys;

use super::{check, Context, CudaError, Result};

/// One shard: its reserved address range, and the physical allocation mapped at its start.
pub struct MappedShard {
    ctx: Context,
    pub address: u64,
    pub size: u64,
    /// Bytes from `address` backed by device memory.
    pub backed: u64,
    handle: Option<sys::CUmemGenericAllocationHandle>,
    mapped: bool,
}

/// Shards mapped at fixed addresses, and the windows onto peers' memory kept with them;
/// unmapped and released in `Drop`.
pub struct ArenaMapping {
    ctx: Context,
    shards: Vec<MappedShard>,
    windows: Vec<PeerWindow>,
}

impl ArenaMapping {
    /// The device's minimum allocation granularity for pinned device memory.
    pub fn granularity(ctx: &Context) -> Result<u64> {
        let prop = allocation_prop(ctx);
        let mut granularity = 0usize;
        // SAFETY: `prop` is fully initialised; writes one size.
        check("cuMemGetAllocationGranularity", unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        })?;
        Ok(granularity as u64)
    }

    /// Reserves and maps each `(address, size)` exactly where asked. On any failure what
    /// was mapped so far is released and nothing stays reserved.
    pub fn map(ctx: &Context, shards: &[(u64, u64)]) -> Result<Self> {
        let whole: Vec<(u64, u64, u64)> = shards.iter().map(|&(address, size)| (address, size, size)).collect();
        Self::map_parts(ctx, &whole)
    }

    /// Reserves each `(address, size, backed)` exactly where asked and maps device memory
    /// over its first `backed` bytes (a multiple of the granularity, possibly 0): the
    /// reservation is address space only, the memory is what a core uses.
    pub fn map_parts(ctx: &Context, shards: &[(u64, u64, u64)]) -> Result<Self> {
        Self::map_with(ctx, shards, Sharing::Private)
    }

    /// [`Self::map_parts`] with memory other processes may map: each shard's
    /// [`MappedShard::export`] gives it as a file descriptor. Not yet run on a GPU.
    pub fn map_shareable(ctx: &Context, shards: &[(u64, u64, u64)]) -> Result<Self> {
        Self::map_with(ctx, shards, Sharing::PosixFd)
    }

    fn map_with(ctx: &Context, shards: &[(u64, u64, u64)], sharing: Sharing) -> Result<Self> {
        ctx.settle()?;
        let mut arena = Self { ctx: ctx.clone(), shards: Vec::with_capacity(shards.len()), windows: Vec::new() };
        for &(address, size, backed) in shards {
            arena.shards.push(reserve_exact(ctx, address, size)?);
            if backed == 0 {
                continue;
            }
            let shard = arena.shards.last_mut().expect("just pushed");
            shard.handle = Some(create(ctx, backed, sharing)?);
            // SAFETY: the range is reserved by us and the handle covers `backed` ≤ `size` bytes.
            check("cuMemMap", unsafe {
                sys::cuMemMap(address, backed as usize, 0, shard.handle.expect("set above"), 0)
            })?;
            (shard.mapped, shard.backed) = (true, backed);
            grant_access(ctx, address, backed)?;
        }
        Ok(arena)
    }

    /// Whether a reservation of `size` at `address` lands there; nothing stays reserved.
    pub fn honours(ctx: &Context, address: u64, size: u64) -> Result<bool> {
        ctx.settle()?;
        match reserve_exact(ctx, address, size) {
            Ok(_released_on_drop) => Ok(true),
            Err(CudaError::AddressNotHonoured { .. }) => Ok(false),
            Err(other) => Err(other),
        }
    }

    pub fn shards(&self) -> &[MappedShard] {
        &self.shards
    }

    /// The bytes its shards reserve, backed or not.
    pub fn size(&self) -> u64 {
        self.shards.iter().map(|s| s.size).sum()
    }

    /// Keeps `windows` (peers' memory, [`map_peer`]) mapped as long as this arena.
    pub fn keep_windows(&mut self, windows: Vec<PeerWindow>) {
        self.windows.extend(windows);
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }
}

impl MappedShard {
    /// This shard's device memory as a POSIX file descriptor, for a peer process to map
    /// ([`map_peer`]); only a shard of [`ArenaMapping::map_shareable`] has one.
    pub fn export(&self) -> Result<OwnedFd> {
        let handle = self.handle.ok_or_else(|| {
            CudaError::Unsupported(format!("the shard at {:#x} has no device memory to share", self.address))
        })?;
        let mut fd: c_int = -1;
        // SAFETY: writes one descriptor, owned from here by the value returned.
        check("cuMemExportToShareableHandle", unsafe {
            sys::cuMemExportToShareableHandle((&mut fd as *mut c_int).cast(), handle, POSIX_FD, 0)
        })?;
        // SAFETY: the driver just opened `fd` for this process and gave it to us alone.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// Part of a peer's allocation, as its [`MappedShard::export`] gave it: `len` bytes from
/// `offset` into it (both multiples of the granularity).
#[derive(Clone, Copy, Debug)]
pub struct PeerPiece<'f> {
    pub fd: BorrowedFd<'f>,
    pub offset: u64,
    pub len: u64,
}

/// A window onto peers' memory: one reservation at a fixed address, with each piece mapped
/// after the last. Unmapped and released in `Drop`.
pub struct PeerWindow {
    ctx: Context,
    pub address: u64,
    pub size: u64,
    /// Each piece's handle, and the bytes from `address` it starts at and covers.
    mapped: Vec<(sys::CUmemGenericAllocationHandle, u64, u64)>,
}

/// Reserves exactly `address` for all of `pieces` (one reservation, as the arena's shards
/// are, since the driver honours a large reservation's address where it may not a
/// small one's), maps them one after another and grants this context's device access.
/// Not yet run on a GPU with more than one piece or an offset other than 0.
pub fn map_peer(ctx: &Context, address: u64, pieces: &[PeerPiece<'_>]) -> Result<PeerWindow> {
    ctx.settle()?;
    let size = pieces.iter().map(|p| p.len).sum();
    reserve(address, size)?;
    let mut window = PeerWindow { ctx: ctx.clone(), address, size, mapped: Vec::with_capacity(pieces.len()) };
    let mut at = 0;
    for piece in pieces {
        let mut handle = 0;
        // SAFETY: writes one handle, released by the window's `Drop`; a POSIX descriptor
        // is passed as its value in the pointer.
        check("cuMemImportFromShareableHandle", unsafe {
            sys::cuMemImportFromShareableHandle(&mut handle, piece.fd.as_raw_fd() as usize as *mut c_void, POSIX_FD)
        })?;
        // SAFETY: the range lies in our reservation; the driver refuses one past the allocation.
        let mapped = check("cuMemMap", unsafe {
            sys::cuMemMap(address + at, piece.len as usize, piece.offset as usize, handle, 0)
        });
        window.mapped.push((handle, at, if mapped.is_ok() { piece.len } else { 0 }));
        mapped?;
        at += piece.len;
    }
    grant_access(ctx, address, size)?;
    Ok(window)
}

impl Drop for PeerWindow {
    fn drop(&mut self) {
        // SAFETY: undoes exactly what `map_peer` did, pieces first, then the reservation.
        unsafe {
            for &(handle, at, len) in &self.mapped {
                if len > 0 {
                    self.ctx.released("cuMemUnmap", sys::cuMemUnmap(self.address + at, len as usize));
                }
                self.ctx.released("cuMemRelease", sys::cuMemRelease(handle));
            }
            self.ctx.released("cuMemAddressFree", sys::cuMemAddressFree(self.address, self.size as usize));
        }
    }
}

/// Whether a shard's memory may leave this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sharing {
    Private,
    PosixFd,
}

const POSIX_FD: sys::CUmemAllocationHandleType =
    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

/// Reserves `size` bytes at `address`, as a shard whose `Drop` frees them.
fn reserve_exact(ctx: &Context, address: u64, size: u64) -> Result<MappedShard> {
    reserve(address, size)?;
    Ok(MappedShard { ctx: ctx.clone(), address, size, backed: 0, handle: None, mapped: false })
}

/// Reserves `size` bytes at exactly `address`, for the caller to free; a reservation
/// placed elsewhere is freed and refused.
fn reserve(address: u64, size: u64) -> Result<()> {
    let mut got = 0;
    // SAFETY: writes one address, freed by the caller or right below.
    check("cuMemAddressReserve", unsafe { sys::cuMemAddressReserve(&mut got, size as usize, 0, address, 0) })?;
    if got != address {
        // SAFETY: reserved just above, and nothing is mapped in it.
        let freed = check("cuMemAddressFree", unsafe { sys::cuMemAddressFree(got, size as usize) });
        return freed.and(Err(CudaError::AddressNotHonoured { wanted: address, got, size }));
    }
    Ok(())
}

fn allocation_prop(ctx: &Context) -> sys::CUmemAllocationProp {
    // SAFETY: zeroed is a valid bit pattern for this C struct; the fields that matter are set.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ctx.info().ordinal as i32;
    prop
}

fn create(ctx: &Context, size: u64, sharing: Sharing) -> Result<sys::CUmemGenericAllocationHandle> {
    let mut prop = allocation_prop(ctx);
    if sharing == Sharing::PosixFd {
        prop.requestedHandleTypes = POSIX_FD;
    }
    let mut handle = 0;
    // SAFETY: `prop` is initialised; the handle is released in `MappedShard::drop`.
    check("cuMemCreate", unsafe { sys::cuMemCreate(&mut handle, size as usize, &prop, 0) })?;
    Ok(handle)
}

fn grant_access(ctx: &Context, address: u64, size: u64) -> Result<()> {
    // SAFETY: zero is a valid bit pattern for this C struct (its enums have a zero value).
    let mut desc: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
    desc.location = allocation_prop(ctx).location;
    desc.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    // SAFETY: the range is mapped by us.
    check("cuMemSetAccess", unsafe { sys::cuMemSetAccess(address, size as usize, &desc, 1) })
}

impl Drop for MappedShard {
    fn drop(&mut self) {
        // SAFETY: undoes, in reverse, exactly the steps that succeeded for this shard.
        unsafe {
            if self.mapped {
                self.ctx.released("cuMemUnmap", sys::cuMemUnmap(self.address, self.backed as usize));
            }
            if let Some(handle) = self.handle {
                self.ctx.released("cuMemRelease", sys::cuMemRelease(handle));
            }
            self.ctx.released("cuMemAddressFree", sys::cuMemAddressFree(self.address, self.size as usize));
        }
    }
}
