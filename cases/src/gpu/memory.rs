//! `gpu/memory/`: what the context's synchronous calls write (an allocation's zeroing, a
//! host write) is on the device when they return, so work on the harness's non-blocking
//! streams sees it. It once did not: a kept device copy of an input raced the zeroing of
//! its fresh buffer, and a rank launched with zeros in its input (issue 27).

use gnomon_core::cuda::DeviceBuffer;

use super::Gpu;
use crate::{accepted, Case, Verdict};

const BYTES: u64 = 64 << 20;
/// An allocation made just before each copied one: its zeroing (about 0.4 ms on the H200)
/// holds the next one back on the legacy stream, as when several buffers are kept in a row.
const AHEAD: u64 = 1 << 30;
const ROUNDS: u32 = 8;

pub fn cases() -> Vec<Case> {
    vec![Case::gpu("gpu/memory/written-before-the-call-returns", "synchronous-writes-complete", |_| {
        let gpu = Gpu::open()?;
        let pattern: Vec<u8> = (0..BYTES).map(|i| (i % 251) as u8 | 1).collect();
        let (source, staged) = (allocate(&gpu)?, allocate(&gpu)?);
        accepted(source.upload(&pattern), "upload the pattern")?;
        for round in 0..ROUNDS {
            let _ahead = accepted(gpu.ctx.alloc(AHEAD), "allocate the buffer ahead")?;
            let fresh = allocate(&gpu)?;
            copy_on_stream(&gpu, &fresh, &source)?;
            same_as(&pattern, &fresh, || format!("round {round}: a copy into a buffer just allocated"))?;
            accepted(staged.upload(&pattern), "write the pattern")?;
            copy_on_stream(&gpu, &fresh, &staged)?;
            same_as(&pattern, &fresh, || format!("round {round}: a copy of a buffer just written"))?;
        }
        Ok(())
    })]
}

fn allocate(gpu: &Gpu) -> Result<DeviceBuffer, Verdict> {
    accepted(gpu.ctx.alloc(BYTES), "allocate")
}

/// Copies `src` over `dst` on the case's (non-blocking) stream, right away, and waits.
fn copy_on_stream(gpu: &Gpu, dst: &DeviceBuffer, src: &DeviceBuffer) -> Result<(), Verdict> {
    // SAFETY: both buffers were allocated with `BYTES` bytes.
    accepted(unsafe { gpu.stream.copy(dst.ptr(), src.ptr(), BYTES) }, "copy on the stream")?;
    accepted(gpu.stream.synchronize(), "synchronize the stream")
}

fn same_as(pattern: &[u8], buffer: &DeviceBuffer, what: impl FnOnce() -> String) -> Result<(), Verdict> {
    let got = accepted(buffer.download(), "download")?;
    lost(&got, pattern).map_or(Ok(()), |lost| Err(Verdict::Failed(format!("{} {lost}", what()))))
}

/// How many bytes of `got` differ from `pattern`, how many of them read 0, and where the
/// first and last lie; `None` when none differs. One pass, nothing collected.
fn lost(got: &[u8], pattern: &[u8]) -> Option<String> {
    let mut differing = got.iter().zip(pattern).enumerate().filter(|(_, (g, p))| g != p);
    let (first, (&g, _)) = differing.next()?;
    let (mut lost, mut zeros, mut last) = (1, usize::from(g == 0), first);
    for (i, (&g, _)) in differing {
        (lost, zeros, last) = (lost + 1, zeros + usize::from(g == 0), i);
    }
    Some(format!("lost {lost} of {} bytes ({zeros} read 0), from byte {first} to {last}", got.len()))
}

#[cfg(test)]
mod tests {
    use super::lost;

    #[test]
    fn lost_bytes_are_counted_with_their_zeros_and_span() {
        let pattern = [7u8; 8];
        assert_eq!(lost(&pattern, &pattern), None);
        let got = [7, 0, 7, 3, 0, 7, 7, 7];
        assert_eq!(lost(&got, &pattern).as_deref(), Some("lost 3 of 8 bytes (2 read 0), from byte 1 to 4"));
    }
}
