//! Checks of device memory computed on the device over every buffer at once, so that
//! checking gigabytes of weights after every template costs one launch and no host
//! memory: checksums of ranges, and counts of bytes unlike a pattern.

use crate::{
    cuda::{Context, Function, Module, Stream},
    errors::ReplayError,
    params::ParamBlob,
};

const SOURCE: &str = include_str!("checksum.cu");
/// Ranges one launch takes: the grid's rows (65 535 at most).
const RANGES_PER_LAUNCH: usize = 65_535;
/// Threads per block, and at most this many blocks per range: enough to fill the device
/// for one buffer of gigabytes (a whole 1 GiB weight at 64 blocks took three times as long).
const THREADS: u32 = 256;
const MAX_BLOCKS: u64 = 1024;
/// Bytes a thread takes at least before another block is worth starting.
const BYTES_PER_THREAD: u64 = 64;

pub struct Checksummer {
    _module: Module,
    checksum: Function,
    unlike: Function,
    ctx: Context,
}

/// A range of device memory: address and length in bytes.
pub type Range = (u64, u64);

impl Checksummer {
    pub fn new(ctx: &Context) -> Result<Self, ReplayError> {
        let (module, _) = Module::compile(ctx, "gnomon-checksum", SOURCE)?;
        let (checksum, unlike) = (module.function("checksum_ranges")?, module.function("count_unlike_ranges")?);
        Ok(Self { _module: module, checksum, unlike, ctx: ctx.clone() })
    }

    /// A checksum of each range, in one launch per 65 535 ranges.
    ///
    /// # Safety
    /// Every range must be device memory of this context.
    pub unsafe fn checksums(&self, stream: &Stream, ranges: &[Range]) -> Result<Vec<u64>, ReplayError> {
        let table: Vec<[u64; 3]> = ranges.iter().map(|&(address, len)| [address, len, 0]).collect();
        // SAFETY: the caller vouches for the ranges.
        unsafe { self.reduce(stream, &self.checksum, &table) }
    }

    /// How many bytes of each range differ from `byte`.
    ///
    /// # Safety
    /// Every range must be device memory of this context.
    pub unsafe fn bytes_unlike(&self, stream: &Stream, ranges: &[Range], byte: u8) -> Result<Vec<u64>, ReplayError> {
        let pattern = u32::from_ne_bytes([byte; 4]) as u64;
        let table: Vec<[u64; 3]> = ranges.iter().map(|&(address, len)| [address, len, pattern]).collect();
        // SAFETY: the caller vouches for the ranges.
        unsafe { self.reduce(stream, &self.unlike, &table) }
    }

    /// Runs `function(table, out)` over the table, a launch per 65 535 rows, and returns
    /// `out`: one sum per row.
    ///
    /// # Safety
    /// Every address in `table` must be device memory of this context, as long as its row says.
    unsafe fn reduce(&self, stream: &Stream, function: &Function, table: &[[u64; 3]]) -> Result<Vec<u64>, ReplayError> {
        let mut sums = Vec::with_capacity(table.len());
        for rows in table.chunks(RANGES_PER_LAUNCH) {
            let bytes: Vec<u8> = rows.iter().flatten().flat_map(|v| v.to_le_bytes()).collect();
            let (device_table, out) = (self.ctx.alloc(bytes.len() as u64)?, self.ctx.alloc(rows.len() as u64 * 8)?);
            device_table.upload(&bytes)?;
            out.upload(&vec![0u8; rows.len() * 8])?;
            let blob = ParamBlob::new(function.layout()).ptr(0, device_table.ptr())?.ptr(1, out.ptr())?;
            let longest = rows.iter().map(|r| r[1]).max().unwrap_or(0);
            let blocks = longest.div_ceil(THREADS as u64 * BYTES_PER_THREAD).clamp(1, MAX_BLOCKS) as u32;
            stream.launch(function, [blocks, rows.len() as u32, 1], [THREADS, 1, 1], 0, &blob.into_bytes())?;
            stream.synchronize()?;
            let read = out.download()?;
            sums.extend(read.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))));
        }
        Ok(sums)
    }
}
