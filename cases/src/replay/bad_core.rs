//! `replay/bad-core/`: cores that are wrong in ways only the GPU path meets are refused
//! with their error, and nothing is instantiated or launched.

use std::{fs, path::Path};

use gnomon_core::{
    cuda::{live_executables, ArenaMapping, Context, CudaError},
    errors::{CoreError, ReplayError, ValidationError},
    format::{BufferRole, Core, CoreWriter, Manifest, NodeOp, MANIFEST_FILE},
    replay::{replay, Executables},
    shards::MIB,
};
use gnomon_fixtures::workloads::by_name;

use super::pipeline::{export, Handover, ARENA_BASE};
use crate::{ensure, refused, Case, Verdict};

const CLAIM: &str = "bad-core-refused";

fn bad_core_case(slug: &str, body: fn(&Path) -> Result<(), Verdict>) -> Case {
    Case::gpu(&format!("replay/bad-core/{slug}"), CLAIM, move |_| {
        let tmp = tempfile::tempdir().map_err(|e| Verdict::Blocked(e.to_string()))?;
        let dir = tmp.path().join("core");
        let workload = by_name("elementwise").expect("the elementwise workload exists");
        drop(export(workload, 64 * MIB, &dir, Handover::Exit)?);
        body(&dir)?;
        ensure(live_executables() == 0, || format!("{} executables exist after the refusal", live_executables()))
    })
}

pub fn cases() -> Vec<Case> {
    vec![
        bad_core_case("flipped-shard-byte", |dir| {
            flip_byte(&dir.join("shards/0000.bin"))?;
            refused(Core::open(dir), |e| matches!(e, CoreError::Invalid(ValidationError::HashMismatch { .. })))
                .map(drop)
        }),
        bad_core_case("shard-changed-after-validation", |dir| {
            let core = Core::open_for_upload(dir).map_err(|e| Verdict::Failed(e.to_string()))?;
            flip_byte(&dir.join("shards/0000.bin"))?;
            let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
            refused(
                replay(&core, &ctx, Executables::Rebuild),
                |e| matches!(e, ReplayError::Shard { index: 0, source, .. } if source.to_string().contains("SHA-256")),
            )
            .map(drop)
        }),
        bad_core_case("template-writes-weight", |dir| {
            // `out` is written by every elementwise template; declared a weight, replay
            // must find the write and name the template.
            let mut manifest = read_manifest(dir)?;
            let out = manifest.buffers.iter_mut().find(|b| b.name == "out").expect("elementwise has `out`");
            out.role = BufferRole::Weight;
            CoreWriter::create(dir)
                .and_then(|w| w.write_manifest(&manifest))
                .map_err(|e| Verdict::Blocked(e.to_string()))?;
            let core = Core::open(dir).map_err(|e| Verdict::Failed(format!("the edited core should validate: {e}")))?;
            let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
            refused(
                replay(&core, &ctx, Executables::Rebuild),
                |e| matches!(e, ReplayError::WeightWritten { buffer, .. } if buffer == "out"),
            )
            .map(drop)
        }),
        bad_core_case("layout-differs-from-driver", |dir| {
            let mut manifest = read_manifest(dir)?;
            widen_last_param(&mut manifest, "scale_add");
            CoreWriter::create(dir)
                .and_then(|w| w.write_manifest(&manifest))
                .map_err(|e| Verdict::Blocked(e.to_string()))?;
            let core =
                Core::open(dir).map_err(|e| Verdict::Failed(format!("the edited core should still validate: {e}")))?;
            let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
            refused(
                replay(&core, &ctx, Executables::Rebuild),
                |e| matches!(e, ReplayError::LayoutMismatch { function, .. } if function == "scale_add"),
            )
            .map(drop)
        }),
        bad_core_case("arena-overlaps-used-address", |dir| {
            let core = Core::open(dir).map_err(|e| Verdict::Failed(e.to_string()))?;
            let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
            let _squatter = ArenaMapping::map(&ctx, &[(ARENA_BASE, 64 * MIB)])
                .map_err(|e| Verdict::Blocked(format!("occupy the arena address: {e}")))?;
            refused(replay(&core, &ctx, Executables::Rebuild), |e| {
                matches!(e, ReplayError::Cuda(CudaError::AddressNotHonoured { wanted, .. }) if *wanted == ARENA_BASE)
                    || matches!(e, ReplayError::Cuda(CudaError::Driver { call: "cuMemAddressReserve", .. }))
            })
            .map(drop)
        }),
    ]
}

/// Flips one bit of a byte in `file`, keeping its size.
fn flip_byte(file: &Path) -> Result<(), Verdict> {
    let mut bytes = fs::read(file).map_err(|e| Verdict::Blocked(e.to_string()))?;
    bytes[4096] ^= 0x40;
    fs::write(file, bytes).map_err(|e| Verdict::Blocked(e.to_string()))
}

fn read_manifest(dir: &Path) -> Result<Manifest, Verdict> {
    let text = fs::read_to_string(dir.join(MANIFEST_FILE)).map_err(|e| Verdict::Blocked(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| Verdict::Blocked(e.to_string()))
}

/// Records `function`'s last parameter as 8 bytes instead of what the driver reports,
/// and pads every node's bytes to match, so the core still passes validation.
fn widen_last_param(m: &mut Manifest, function: &str) {
    for f in m.modules.iter_mut().flat_map(|m| m.functions.iter_mut()).filter(|f| f.name == function) {
        f.params.last_mut().expect("scale_add has parameters").size = 8;
    }
    for t in &mut m.templates {
        for n in &mut t.nodes {
            if let NodeOp::Kernel(k) = &mut n.op {
                if k.function == function {
                    k.params.extend([0u8; 4]);
                }
            }
        }
    }
}
