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
    out: DeviceBuffer,
    ctx: Context,
}

impl Checksummer {
    pub fn new(ctx: &Context) -> Result<Self, ReplayError> {
        let (module, _) = Module::compile(ctx, "gnomon-checksum", SOURCE)?;
        let function = module.function("checksum_words")?;
        Ok(Self { _module: module, function, out: ctx.alloc(8)?, ctx: ctx.clone() })
    }

    /// A checksum of `len` bytes at device address `address`: the whole 32-bit words on
    /// the device, the last `len % 4` bytes read back.
    ///
    /// # Safety
    /// `address..address + len` must be device memory of this context.
    pub unsafe fn of(&self, stream: &Stream, address: u64, len: u64) -> Result<(u64, Vec<u8>), ReplayError> {
        let words = len / 4;
        self.out.upload(&0u64.to_le_bytes())?;
        let params = [address.to_le_bytes(), words.to_le_bytes(), self.out.ptr().to_le_bytes()];
        let mut blob = ParamBlob::new(self.function.layout());
        for (i, p) in params.iter().enumerate() {
            blob = blob.set(i, p)?;
        }
        stream.launch(&self.function, [1024, 1, 1], [256, 1, 1], 0, &blob.into_bytes())?;
        stream.synchronize()?;
        let sum = u64::from_le_bytes(self.out.download()?.try_into().expect("8 bytes"));
        let tail = match len % 4 {
            0 => Vec::new(),
            rest => self.ctx.read(address + words * 4, rest)?,
        };
        Ok((sum, tail))
    }
}
