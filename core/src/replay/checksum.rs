//! Checksums of device buffers computed on the device, so that checking gigabytes of
//! weights after every template costs milliseconds and no host memory.

use crate::{
    cuda::{Context, DeviceBuffer, Function, Module, Stream},
    errors::ReplayError,
    params::ParamBlob,
};

const SOURCE: &str = include_str!("checksum.cu");

pub struct Checksummer {
    _module: Module,
    function: Function,
    unlike: Function,
    out: DeviceBuffer,
    ctx: Context,
}

impl Checksummer {
    pub fn new(ctx: &Context) -> Result<Self, ReplayError> {
        let (module, _) = Module::compile(ctx, "gnomon-checksum", SOURCE)?;
        let (function, unlike) = (module.function("checksum_words")?, module.function("count_words_unlike")?);
        Ok(Self { _module: module, function, unlike, out: ctx.alloc(8)?, ctx: ctx.clone() })
    }

    /// A checksum of `len` bytes at device address `address`: the whole 32-bit words on
    /// the device, the last `len % 4` bytes read back.
    ///
    /// # Safety
    /// `address..address + len` must be device memory of this context.
    pub unsafe fn of(&self, stream: &Stream, address: u64, len: u64) -> Result<(u64, Vec<u8>), ReplayError> {
        let words = len / 4;
        let params: [&[u8]; 2] = [&address.to_le_bytes(), &words.to_le_bytes()];
        let sum = self.reduce(stream, &self.function, &params)?;
        let tail = match len % 4 {
            0 => Vec::new(),
            rest => self.ctx.read(address + words * 4, rest)?,
        };
        Ok((sum, tail))
    }

    /// How many bytes of `address..address + len` differ from `byte`: the aligned whole
    /// words counted on the device, the bytes before and after them read back.
    ///
    /// # Safety
    /// `address..address + len` must be device memory of this context.
    pub unsafe fn bytes_unlike(&self, stream: &Stream, address: u64, len: u64, byte: u8) -> Result<u64, ReplayError> {
        let head = (address.next_multiple_of(4) - address).min(len);
        let words = (len - head) / 4;
        let tail_at = address + head + words * 4;
        let pattern = u32::from_ne_bytes([byte; 4]).to_le_bytes();
        let params: [&[u8]; 3] = [&(address + head).to_le_bytes(), &words.to_le_bytes(), &pattern];
        let differing_words = if words > 0 { self.reduce(stream, &self.unlike, &params)? } else { 0 };
        let read = |at: u64, len: u64| if len == 0 { Ok(Vec::new()) } else { self.ctx.read(at, len) };
        let mut edges = read(address, head)?;
        edges.extend(read(tail_at, address + len - tail_at)?);
        Ok(differing_words + edges.iter().filter(|b| **b != byte).count() as u64)
    }

    /// Launches `function(params…, out)` over the device and returns the sum it adds up
    /// in `out`.
    ///
    /// # Safety
    /// The addresses in `params` must be device memory of this context, as long as the
    /// counts in `params` say.
    unsafe fn reduce(&self, stream: &Stream, function: &Function, params: &[&[u8]]) -> Result<u64, ReplayError> {
        self.out.upload(&0u64.to_le_bytes())?;
        let mut blob = ParamBlob::new(function.layout());
        for (i, p) in params.iter().chain([&&self.out.ptr().to_le_bytes()[..]]).enumerate() {
            blob = blob.set(i, p)?;
        }
        stream.launch(function, [1024, 1, 1], [256, 1, 1], 0, &blob.into_bytes())?;
        stream.synchronize()?;
        Ok(u64::from_le_bytes(self.out.download()?.try_into().expect("8 bytes")))
    }
}
