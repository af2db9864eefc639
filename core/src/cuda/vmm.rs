//! The fixed-address arena: per shard one `cuMemAddressReserve` at its exact address, one
//! `cuMemCreate`, one `cuMemMap`. The driver treats the address as a hint, so every
//! reservation is compared with the address asked for and refused on a mismatch.

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

/// Shards mapped at fixed addresses; unmapped and released in `Drop`.
pub struct ArenaMapping {
    ctx: Context,
    shards: Vec<MappedShard>,
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
        ctx.settle()?;
        let mut arena = Self { ctx: ctx.clone(), shards: Vec::with_capacity(shards.len()) };
        for &(address, size, backed) in shards {
            arena.shards.push(reserve_exact(ctx, address, size)?);
            if backed == 0 {
                continue;
            }
            let shard = arena.shards.last_mut().expect("just pushed");
            shard.handle = Some(create(ctx, backed)?);
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

    pub fn context(&self) -> &Context {
        &self.ctx
    }
}

/// Reserves `size` bytes at `address`; a reservation placed elsewhere is freed and refused.
fn reserve_exact(ctx: &Context, address: u64, size: u64) -> Result<MappedShard> {
    let mut got = 0;
    // SAFETY: writes one address; freed by `MappedShard::drop` or right below.
    check("cuMemAddressReserve", unsafe { sys::cuMemAddressReserve(&mut got, size as usize, 0, address, 0) })?;
    let shard = MappedShard { ctx: ctx.clone(), address: got, size, backed: 0, handle: None, mapped: false };
    if got != address {
        drop(shard);
        return Err(CudaError::AddressNotHonoured { wanted: address, got, size });
    }
    Ok(shard)
}

fn allocation_prop(ctx: &Context) -> sys::CUmemAllocationProp {
    // SAFETY: zeroed is a valid bit pattern for this C struct; the fields that matter are set.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ctx.info().ordinal as i32;
    prop
}

fn create(ctx: &Context, size: u64) -> Result<sys::CUmemGenericAllocationHandle> {
    let prop = allocation_prop(ctx);
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
