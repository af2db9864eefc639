//! `replay/bad-core/`: cores that are wrong in ways only the GPU path meets are refused
//! with their error, and nothing is instantiated or launched.

use std::{fs, path::Path};

use gnomon_format::{
    digest::chunk_digests, errors::CoreError, errors::ValidationError, shards::MIB, BufferRole, Core, CoreWriter,
    Manifest, NodeOp, MANIFEST_FILE,
};

use gnomon_core::{
    cuda::{live_executables, ArenaMapping, Context, CudaError},
    errors::ReplayError,
    replay::{replay, Executables},
};

use super::pipeline::ARENA_BASE;
use crate::{ensure, refused, Case, Verdict};

const CLAIM: &str = "bad-core-refused";

/// Breaks an exported core in `dir` and checks it is refused.
type Breaker = fn(&Path) -> Result<(), Verdict>;

fn bad_core_case(slug: &str, body: Breaker) -> Case {
    bad_core_of("elementwise", slug, body)
}

/// A core of `workload`, exported, then broken and refused by `body`.
fn bad_core_of(workload: &'static str, slug: &str, body: Breaker) -> Case {
    Case::gpu(&format!("replay/bad-core/{slug}"), CLAIM, move |_| {
        let (_scratch, dir) = super::exported_core(workload)?;
        body(&dir)?;
        ensure(live_executables() == 0, || format!("{} executables exist after the refusal", live_executables()))
    })
}

pub fn cases() -> Vec<Case> {
    let mut cases = vec![
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
                |e| matches!(e, ReplayError::Shard { index: 0, source, .. } if source.to_string().contains("chunk 0 has XXH3-128")),
            )
            .map(drop)
        }),
        bad_core_case("last-chunk-changed-after-validation", |dir| {
            // Chunks of one page, so the shards hold several; the last byte of the last
            // shard's last chunk changes after validation and must fail the upload.
            let manifest = read_manifest(dir)?;
            let mut rechunked = Vec::new();
            for s in &manifest.shards {
                let bytes = fs::read(dir.join(&s.file)).map_err(|e| Verdict::Blocked(e.to_string()))?;
                rechunked.push(chunk_digests(&bytes, 4096));
            }
            let last = manifest
                .shards
                .iter()
                .rposition(|s| manifest.stored_len(s) > 4096)
                .ok_or_else(|| Verdict::Blocked("no shard stores more than one page".into()))?;
            let chunks = rechunked[last].xxh3_128.len();
            edit_manifest(dir, |m| m.shards.iter_mut().zip(rechunked).for_each(|(s, c)| s.chunks = Some(c)))?;
            let core = Core::open_for_upload(dir).map_err(|e| Verdict::Failed(e.to_string()))?;
            let file = dir.join(&manifest.shards[last].file);
            let mut bytes = fs::read(&file).map_err(|e| Verdict::Blocked(e.to_string()))?;
            *bytes.last_mut().expect("a shard of more than a page") ^= 0x40;
            fs::write(&file, bytes).map_err(|e| Verdict::Blocked(e.to_string()))?;
            let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
            let says = format!("shard {last} chunk {}", chunks - 1);
            refused(
                replay(&core, &ctx, Executables::Rebuild),
                |e| matches!(e, ReplayError::Shard { source, .. } if source.to_string().contains(&says)),
            )
            .map(drop)
        }),
        bad_core_case("template-writes-weight", |dir| {
            // `out` is written by every elementwise template; declared a weight, replay
            // must find the write and name the template.
            edit_manifest(dir, |m| {
                let out = m.buffers.iter_mut().find(|b| b.name == "out").expect("elementwise has `out`");
                out.role = BufferRole::Weight;
            })?;
            let core = Core::open(dir).map_err(|e| Verdict::Failed(format!("the edited core should validate: {e}")))?;
            let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
            refused(
                replay(&core, &ctx, Executables::Rebuild),
                |e| matches!(e, ReplayError::WeightWritten { buffer, .. } if buffer == "out"),
            )
            .map(drop)
        }),
        bad_core_case("layout-differs-from-driver", |dir| {
            edit_manifest(dir, |m| widen_last_param(m, "scale_add"))?;
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
        bad_core_case("unknown-reference", |dir| {
            edit_manifest(dir, |m| m.expectations[0].reference = Some("elementwsie".into()))?;
            judged_failed(dir, "CPU reference `elementwsie`")
        }),
        bad_core_case("recorded-by-newer-driver-refused", |dir| {
            let newer = driver()? + 10;
            edit_manifest(dir, |m| m.context.driver_version = newer)?;
            let core = Core::open(dir).map_err(|e| Verdict::Failed(e.to_string()))?;
            let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
            refused(replay(&core, &ctx, Executables::Rebuild), |e| {
                matches!(e, ReplayError::ContextMismatch { what: "driver version", .. })
            })
            .map(drop)
        }),
        bad_core_case("recorded-by-older-driver-accepted", |dir| {
            let older = driver()? - 10;
            edit_manifest(dir, |m| m.context.driver_version = older)?;
            let core = Core::open(dir).map_err(|e| Verdict::Failed(e.to_string()))?;
            let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
            replay(&core, &ctx, Executables::Rebuild)
                .map(drop)
                .map_err(|e| Verdict::Failed(format!("a core recorded by driver {older} was refused: {e}")))
        }),
        bad_core_case("recorded-on-another-arch-refused", |dir| {
            let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
            // A later arch, which the core's PTX still has code for: only the context
            // check can refuse it (an earlier one is refused by validation already).
            let other = ctx.info().sm + 10;
            edit_manifest(dir, |m| m.context.sm = other)?;
            let core = Core::open(dir).map_err(|e| Verdict::Failed(e.to_string()))?;
            refused(replay(&core, &ctx, Executables::Rebuild), |e| {
                matches!(e, ReplayError::ContextMismatch { what: "SM", .. })
            })
            .map(drop)
        }),
        bad_core_case("module-for-later-arch-refused", |dir| {
            // The exported module retargeted past the runner, its digest updated: the
            // core is refused before anything is mapped, naming both archs.
            let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
            let later = format!(".target sm_{}", ctx.info().sm + 10);
            let module = read_manifest(dir)?.modules[0].clone();
            let path = dir.join(&module.file);
            let ptx = fs::read_to_string(&path).map_err(|e| Verdict::Blocked(e.to_string()))?;
            let retargeted = ptx.replace(&format!(".target {}", ctx.info().arch()), &later);
            ensure(retargeted != ptx, || format!("module `{}` has no `.target {}`", module.id, ctx.info().arch()))?;
            fs::write(&path, &retargeted).map_err(|e| Verdict::Blocked(e.to_string()))?;
            let digest = gnomon_format::hash_hex(retargeted.as_bytes()).expect("hash memory");
            edit_manifest(dir, |m| m.modules[0].sha256 = digest)?;
            let error =
                refused(Core::open(dir), |e| matches!(e, CoreError::Invalid(ValidationError::NoCodeForArch { .. })))?;
            ensure(error.contains(&later[".target ".len()..]), || {
                format!("the refusal does not name the arch: {error}")
            })
        }),
        bad_core_case("no-expectations", |dir| {
            edit_manifest(dir, |m| m.expectations.clear())?;
            refused(Core::open(dir), |e| matches!(e, CoreError::Invalid(ValidationError::Unchecked { .. }))).map(drop)
        }),
    ];
    // A digest the replay must find wrong wherever it is: the checker compares every
    // template's outputs, not only the first.
    let wrong: [(&str, Breaker); 3] = [
        ("first", |dir| wrong_digest(dir, 0)),
        ("middle", |dir| wrong_digest(dir, 2)),
        ("last", |dir| wrong_digest(dir, 3)),
    ];
    for (slug, body) in wrong {
        cases.push(bad_core_of("decode", &format!("wrong-digest-template={slug}"), body));
    }
    cases
}

/// The driver's CUDA version as the manifest records it (13000 for 13.0).
fn driver() -> Result<u32, Verdict> {
    gnomon_core::cuda::driver_version().map_err(|e| Verdict::Blocked(format!("ask the driver its version: {e}")))
}

/// Replaces the expected digest of the decode core's template at `position` and expects
/// the replay to fail naming that template.
fn wrong_digest(dir: &Path, position: usize) -> Result<(), Verdict> {
    let template = read_manifest(dir)?.templates[position].name.clone();
    edit_manifest(dir, |m| {
        let e = m.expectations.iter_mut().find(|e| e.template == template).expect("every template is expected");
        e.outputs[0].sha256 = "0123456789abcdef".repeat(4);
    })?;
    judged_failed(dir, &format!("template `{template}` output"))
}

fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut Manifest)) -> Result<(), Verdict> {
    let mut manifest = read_manifest(dir)?;
    edit(&mut manifest);
    CoreWriter::rewrite_manifest(dir, &manifest).map_err(|e| Verdict::Blocked(e.to_string()))
}

/// Replays the core in this process as `gnomon replay` would and expects it to be judged
/// failed with a reason containing `says`.
fn judged_failed(dir: &Path, says: &str) -> Result<(), Verdict> {
    let started = std::time::Instant::now();
    let (core, open) = super::native::open_timed(dir)?;
    let ctx = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
    let replayed = super::native::replay_and_check(
        &core,
        &ctx,
        Executables::Rebuild,
        Default::default(),
        started,
        vec![open],
        0.0,
    );
    match replayed {
        Err(Verdict::Failed(reason)) if reason.contains(says) => Ok(()),
        Err(other) => Err(Verdict::Failed(format!("judged {other:?}, expected a failure saying `{says}`"))),
        Ok(_) => Err(Verdict::Failed(format!("the broken core passed; expected a failure saying `{says}`"))),
    }
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
