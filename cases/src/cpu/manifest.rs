//! `cpu/manifest/`: every validation rule, each with a core that breaks it and the specific
//! error it must be refused with (`gnomon_fixtures::corruptions`); plus the cores that must
//! be accepted.

use gnomon_fixtures::{
    bounds,
    corruptions::corruptions,
    golden,
    sample::{CoreDraft, GRANULARITY},
};
use gnomon_format::{BufferContents, Core, EdgeKind};

use crate::{accepted, ensure, refused, Case, Verdict};

const CLAIM: &str = "manifest-validation";

fn temp_root() -> Result<tempfile::TempDir, Verdict> {
    tempfile::tempdir().map_err(|e| Verdict::Blocked(format!("no temporary directory: {e}")))
}

/// `draft` written to a scratch directory and opened, which must succeed; `what` says
/// what it is in the verdict.
fn open_written(draft: &CoreDraft, what: &str) -> Result<Core, Verdict> {
    let root = temp_root()?;
    draft.write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
    accepted(Core::open(root.path()), what)
}

pub fn cases() -> Vec<Case> {
    let mut cases: Vec<Case> = corruptions()
        .into_iter()
        .map(|c| {
            Case::new(&format!("cpu/manifest/{}-refused", c.slug), CLAIM, move |_| {
                let root = temp_root()?;
                refused(c.open(root.path()), c.expected).map(drop)
            })
        })
        .collect();
    cases.extend([
        Case::new("cpu/manifest/sample-accepted", CLAIM, |_| {
            let root = temp_root()?;
            CoreDraft::sample().write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
            accepted(Core::open(root.path()), "opening the sample core").map(drop)
        }),
        Case::new("cpu/manifest/v2-features-accepted", CLAIM, |_| {
            let root = temp_root()?;
            gnomon_fixtures::sample::v2_features().write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
            let core = accepted(Core::open(root.path()), "opening the sample with every v2 feature")?;
            let stored: u64 = core.manifest().shards.iter().map(|s| core.manifest().stored_len(s)).sum();
            ensure(stored == 2 * GRANULARITY, || format!("{stored} bytes stored; only `x` and `w` are"))
        }),
        Case::new("cpu/manifest/memset-values-that-fit-accepted", CLAIM, |_| {
            for (element_size, value) in bounds::MEMSETS_THAT_FIT {
                let what = format!("a memset of {value:#x} in {element_size}-byte elements");
                open_written(&bounds::memset(element_size, value), &what)?;
            }
            Ok(())
        }),
        Case::new("cpu/manifest/tolerance-zero-accepted", CLAIM, |_| {
            open_written(&bounds::tolerance_zero(), "a core that asks for an exact match").map(drop)
        }),
        Case::new("cpu/manifest/speed-at-its-bounds-accepted", CLAIM, |_| {
            for speed in bounds::SPEEDS_AT_THE_BOUNDS {
                let core = open_written(&bounds::timed(speed), &format!("a core recording the speed {speed:?}"))?;
                let read = core.manifest().expectations[0].speed;
                ensure(read == Some(speed), || format!("its speed read back as {read:?}"))?;
            }
            Ok(())
        }),
        Case::new("cpu/manifest/varying-output-accepted", CLAIM, |_| {
            let root = temp_root()?;
            CoreDraft::varying().write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
            let core = accepted(Core::open(root.path()), "a core with an output recorded as varying")?;
            let v = core.manifest().expectations[0].outputs[0].variation.as_ref();
            ensure(v.is_some_and(|v| v.nodes == ["n1"]), || format!("its variation read back as {v:?}"))?;
            let lines = gnomon_format::account::Account::of(core.manifest()).lines();
            let said = "outputs varying between launches: decode-b1/y (2 digests over 8 launches: \
                        |x − first| ≤ 2.500e-1 + 9.537e-7·|first|, at most 0.2500 of elements, from node n1)";
            ensure(lines.iter().any(|l| l == said), || format!("its account says {lines:?}"))
        }),
        Case::new("cpu/manifest/peer-ranges-accepted", CLAIM, |_| {
            let root = temp_root()?;
            CoreDraft::peered().write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
            let core = accepted(Core::open(root.path()), "a rank whose kernel holds an address in its peer's range")?;
            let lines = gnomon_format::account::Account::of(core.manifest()).lines();
            let said = "peer ranges mapped: rank 1 bytes 0x0..0x1000 at 0x210000000000";
            ensure(lines.iter().any(|l| l == said), || format!("its account says {lines:?}"))?;
            // Until replay maps peers, it refuses such a core before any kernel is built.
            refused(gnomon_core::replay::check_supported(core.manifest()), |e| {
                matches!(e, gnomon_core::errors::ReplayError::PeersNotMapped { ranges: 1 })
            })
            .map(drop)
        }),
        Case::new("cpu/manifest/peer-windows-side-by-side-accepted", CLAIM, |_| {
            let what = "four peer windows, each touching another or the arena";
            open_written(&bounds::peer_windows_side_by_side(), what).map(drop)
        }),
        Case::new("cpu/manifest/launch-at-limits-accepted", CLAIM, |_| {
            open_written(&bounds::launch_at_limits(), "opening a core whose launch is at the limits").map(drop)
        }),
        Case::new("cpu/format/golden-v1-read", "format-compatibility", |_| {
            let dir =
                golden::v1().map_err(|e| Verdict::Blocked(format!("writing out the embedded golden core: {e}")))?;
            let core = accepted(Core::open(dir.path()), "opening the golden v1 core")?;
            let m = core.manifest();
            ensure(m.format.version == 1 && m.templates.len() == 1 && m.shards.len() == 2, || {
                format!("golden core reads as version {} with {} templates", m.format.version, m.templates.len())
            })
        }),
        Case::new("cpu/format/golden-v2-read", "format-compatibility", |_| {
            let dir =
                golden::v2().map_err(|e| Verdict::Blocked(format!("writing out the embedded golden core: {e}")))?;
            let core = accepted(Core::open(dir.path()), "opening the golden v2 core")?;
            let m = core.manifest();
            let f = &m.modules[0].functions[0];
            let read = [
                m.format.version == 2,
                f.attributes.max_dynamic_shared_size_bytes == Some(96 << 10),
                m.templates[1].edges[0].kind == EdgeKind::Programmatic,
                m.unchecked.len() == 1,
                m.buffers[3].contents == BufferContents::Undefined,
                m.shards.iter().map(|s| m.stored_len(s)).sum::<u64>() == 2 * GRANULARITY,
            ];
            ensure(read.iter().all(|&r| r), || format!("the golden v2 core read back as {read:?} (version, attributes, edge kind, unchecked, contents, stored bytes)"))
        }),
        Case::new("cpu/format/golden-v3-read", "format-compatibility", |_| {
            let dir =
                golden::v3().map_err(|e| Verdict::Blocked(format!("writing out the embedded golden core: {e}")))?;
            let core = accepted(Core::open(dir.path()), "opening the golden v3 core")?;
            let m = core.manifest();
            let provenance = m.modules[0].provenance.as_ref().map(|p| (p.library.as_str(), p.version.as_deref()));
            let read = [
                m.format.version == 3,
                provenance == Some(("libcublasLt.so.13", Some("13.1.0.3"))),
                m.producer_seconds.get("warm-up-s") == Some(&1.25),
                m.templates[1].edges[0].kind == EdgeKind::Programmatic,
            ];
            ensure(read.iter().all(|&r| r), || format!("the golden v3 core read back as {read:?} (version, provenance, producer seconds, edge kind)"))
        }),
        Case::new("cpu/format/write-read-round-trip", "format-compatibility", |_| {
            let root = temp_root()?;
            let draft = CoreDraft::sample();
            draft.write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
            let core = accepted(Core::open(root.path()), "reading back the written core")?;
            ensure(*core.manifest() == draft.manifest, || "manifest read back differs from the one written".into())
        }),
    ]);
    cases
}
