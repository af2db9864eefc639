//! Checks of device memory computed on the device over every buffer at once, so that
//! checking gigabytes of weights after every template costs one launch and no host
//! memory: checksums of ranges, and counts of bytes unlike a pattern. A check's table of
//! ranges goes to the device once, when it is prepared, however often it runs.

use gnomon_format::params::ParamBlob;

use crate::{
    cuda::{Context, DeviceBuffer, Function, Module, Stream},
    errors::ReplayError,
};

/// NVRTC's PTX of `checksum.cu` for the oldest arch it targets, so a restore loads the
/// check kernels in milliseconds instead of compiling them (the driver JIT-compiles PTX
/// for the device, and caches that). `tools/checksum_ptx.py` writes it; its first line
/// names the SHA-256 of the source it was made from, which a test holds against
/// `checksum.cu`.
const PTX: &str = include_str!("checksum.ptx");
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
        let module = Module::load(ctx, PTX.as_bytes())?;
        let (checksum, unlike) = (module.function("checksum_ranges")?, module.function("count_unlike_ranges")?);
        Ok(Self { _module: module, checksum, unlike, ctx: ctx.clone() })
    }

    /// A check that sums a checksum of each range, its table on the device once: each
    /// [`RangeCheck::run`] is one launch per 65 535 ranges and no upload.
    ///
    /// # Safety
    /// Every range must be device memory of this context while the check is run.
    pub unsafe fn checksums(&self, ranges: &[Range]) -> Result<RangeCheck<'_>, ReplayError> {
        self.prepare(&self.checksum, ranges, 0)
    }

    /// A check that counts, per range, the bytes that differ from `byte`.
    ///
    /// # Safety
    /// As [`Checksummer::checksums`].
    pub unsafe fn bytes_unlike(&self, ranges: &[Range], byte: u8) -> Result<RangeCheck<'_>, ReplayError> {
        self.prepare(&self.unlike, ranges, u32::from_ne_bytes([byte; 4]) as u64)
    }

    fn prepare<'c>(
        &'c self,
        function: &'c Function,
        ranges: &[Range],
        pattern: u64,
    ) -> Result<RangeCheck<'c>, ReplayError> {
        let mut launches = Vec::new();
        for rows in ranges.chunks(RANGES_PER_LAUNCH) {
            let bytes: Vec<u8> =
                rows.iter().flat_map(|&(address, len)| [address, len, pattern]).flat_map(u64::to_le_bytes).collect();
            let (table, out) = (self.ctx.alloc(bytes.len() as u64)?, self.ctx.alloc(rows.len() as u64 * 8)?);
            table.upload(&bytes)?;
            let longest = rows.iter().map(|&(_, len)| len).max().unwrap_or(0);
            let blocks = longest.div_ceil(THREADS as u64 * BYTES_PER_THREAD).clamp(1, MAX_BLOCKS) as u32;
            let params = ParamBlob::new(function.layout()).ptr(0, table.ptr())?.ptr(1, out.ptr())?.into_bytes();
            launches.push(Launch { _table: table, out, grid: [blocks, rows.len() as u32, 1], params });
        }
        Ok(RangeCheck { function, launches })
    }
}

/// A prepared check over a table of ranges; see [`Checksummer::checksums`].
pub struct RangeCheck<'c> {
    function: &'c Function,
    launches: Vec<Launch>,
}

struct Launch {
    _table: DeviceBuffer,
    out: DeviceBuffer,
    grid: [u32; 3],
    params: Vec<u8>,
}

impl RangeCheck<'_> {
    /// One sum per range: a launch, a synchronisation and a read-back per 65 535 ranges.
    pub fn run(&self, stream: &Stream) -> Result<Vec<u64>, ReplayError> {
        let mut sums = Vec::new();
        for l in &self.launches {
            l.out.upload(&vec![0u8; l.grid[1] as usize * 8])?;
            stream.launch(self.function, l.grid, [THREADS, 1, 1], 0, &l.params)?;
            stream.synchronize()?;
            sums.extend(l.out.download()?.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))));
        }
        Ok(sums)
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    /// The embedded PTX was made from the source as it is: change `checksum.cu`, and
    /// `tools/checksum_ptx.py` must write `checksum.ptx` again.
    #[test]
    fn the_embedded_ptx_was_made_from_checksum_cu() {
        let source = hex::encode(Sha256::digest(include_bytes!("checksum.cu")));
        let header = super::PTX.lines().next().unwrap_or_default();
        assert!(header.contains(&format!("checksum.cu sha256 {source},")), "checksum.ptx begins: {header}");
    }
}
