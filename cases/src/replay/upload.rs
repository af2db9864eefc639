//! `replay/upload/`: the streaming upload where the ordinary runs never take it. Copies
//! that lag the readers, behind a kernel that keeps the stream busy, with two 1 MiB
//! staging slots reused for every chunk: a slot lent again before its copy has run would
//! be refilled under the copy, and the device would hold other bytes than the file.
//! Pinning the staging memory and unloading a module both wait for an idle device (two
//! earlier versions of this case passed with the planted defect for that reason), so the
//! spin is loaded first, enqueued after the upload is prepared, and kept loaded until the
//! copies are done; `upload-behind-spin-s` shows the copies did wait.

use gnomon_format::{params::ParamBlob, Core};

use gnomon_core::{
    cuda::{Context, CudaError, Function, Module, Stream},
    replay::{map_arena, Staging, Upload},
};
use gnomon_fixtures::kernels::FILL;

use crate::{accepted, measured, Case, Verdict};

/// Clock cycles the stream is kept busy for: about 0.1 s at the H200's 1.98 GHz.
const BUSY_CYCLES: u64 = 200_000_000;
const SLOT_BYTES: usize = 1 << 20;

pub fn cases() -> Vec<Case> {
    vec![Case::gpu("replay/upload/copies-lag-readers", super::CLAIM, |ctx| {
        let (_scratch, dir) = super::exported_core("elementwise")?;
        let core = Core::open(&dir).map_err(|e| Verdict::Failed(format!("the exported core: {e}")))?;
        let m = core.manifest();
        let gpu = Context::new(0).map_err(|e| Verdict::Blocked(format!("open device 0: {e}")))?;
        let _mapping = accepted(map_arena(m, &gpu), "map the arena")?;
        let stream = accepted(gpu.stream(), "make a stream")?;
        let spin = Spin::load(&gpu)?;
        let staging = Staging { slot_bytes: SLOT_BYTES, slots: 2, readers: 2 };
        let upload = Upload::prepare(&core, &gpu, staging).map_err(|e| Verdict::Blocked(e.to_string()))?;
        spin.keep_busy(&stream)?;
        let uploaded = upload.run(&stream).map_err(|e| Verdict::Failed(e.to_string()))?;
        accepted(stream.synchronize(), "wait for the copies")?;
        let compared = device_equals_files(&core, &gpu)?;
        let chunks = (uploaded.bytes as f64 / SLOT_BYTES as f64).ceil();
        // An upload that took less than the spin did not wait for it: the copies never lagged.
        let lagged = measured("upload-behind-spin-s", uploaded.seconds, "s");
        ctx.metrics([measured("chunks", chunks, "1"), measured("bytes-compared", compared as f64, "B"), lagged].into());
        Ok(())
    })]
}

/// The `spin` fixture, loaded before the upload is prepared and kept loaded until its
/// copies are done: loading and unloading a module may wait for the device.
struct Spin {
    _module: Module,
    function: Function,
}

impl Spin {
    fn load(gpu: &Context) -> Result<Self, Verdict> {
        let blocked = |e: CudaError| Verdict::Blocked(format!("fixture `spin`: {e}"));
        let (module, _) = Module::compile(gpu, FILL.name, FILL.source).map_err(blocked)?;
        let function = module.function("spin").map_err(blocked)?;
        Ok(Self { _module: module, function })
    }

    /// Enqueues the spin on `stream`, so what is queued next waits for it.
    fn keep_busy(&self, stream: &Stream) -> Result<(), Verdict> {
        let params = ParamBlob::new(self.function.layout())
            .set(0, &BUSY_CYCLES.to_le_bytes())
            .map_err(|e| Verdict::Blocked(e.to_string()))?;
        accepted(stream.launch(&self.function, [1, 1, 1], [1, 1, 1], 0, &params.into_bytes()), "launch `spin`")
    }
}

/// Every stored byte of every shard, read back from the device, equals the file's.
fn device_equals_files(core: &Core, gpu: &Context) -> Result<u64, Verdict> {
    let m = core.manifest();
    let mut compared = 0;
    for shard in &m.shards {
        let mut file = core.open_file(&shard.file, "shard").map_err(|e| Verdict::Blocked(e.to_string()))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| Verdict::Blocked(e.to_string()))?;
        let mut at = 0usize;
        for range in m.stored_ranges(shard) {
            let len = (range.end - range.start) as usize;
            // SAFETY: a stored range of the validated core lies in the arena mapped above.
            let device = accepted(unsafe { gpu.read(m.arena.base + range.start, len as u64) }, "read the arena back")?;
            if let Some(i) = device.iter().zip(&bytes[at..at + len]).position(|(d, f)| d != f) {
                return Err(Verdict::Failed(format!(
                    "shard {} byte {} on the device is {:#04x}, the file's is {:#04x}: a staging slot was \
                     refilled before its copy ran",
                    shard.index,
                    at + i,
                    device[i],
                    bytes[at + i]
                )));
            }
            (at, compared) = (at + len, compared + len as u64);
        }
    }
    Ok(compared)
}
