//! `cpu/manifest/`: every validation rule, each with a core that breaks it and the specific
//! error it must be refused with (`gnomon_fixtures::corruptions`); plus the cores that must
//! be accepted.

use gnomon_fixtures::{
    corruptions::{corruptions, with_node},
    golden,
    sample::{CoreDraft, ARENA, BASE, GRANULARITY, PEER_WINDOW},
};
use gnomon_format::{BufferContents, Core, EdgeKind, NodeOp, PeerRange};

use crate::{accepted, ensure, refused, Case, Verdict};

const CLAIM: &str = "manifest-validation";

fn temp_root() -> Result<tempfile::TempDir, Verdict> {
    tempfile::tempdir().map_err(|e| Verdict::Blocked(format!("no temporary directory: {e}")))
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
            for (element_size, value) in [(1, 0xff), (2, 0xffff), (4, u32::MAX)] {
                let root = temp_root()?;
                let mut draft = CoreDraft::sample();
                with_node(&mut draft, 0, |op| match op {
                    NodeOp::Memset(m) => (m.element_size, m.value, m.count) = (element_size, value, 64),
                    _ => unreachable!("node 0 of the sample is a memset"),
                });
                draft.write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
                accepted(Core::open(root.path()), &format!("a memset of {value:#x} in {element_size}-byte elements"))?;
            }
            Ok(())
        }),
        Case::new("cpu/manifest/tolerance-zero-accepted", CLAIM, |_| {
            let root = temp_root()?;
            let mut draft = CoreDraft::sample();
            draft.manifest.expectations[0].tolerance = Some(0.0);
            draft.write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
            accepted(Core::open(root.path()), "a core that asks for an exact match").map(drop)
        }),
        Case::new("cpu/manifest/speed-at-its-bounds-accepted", CLAIM, |_| {
            for (launches, median_us, spread_us) in [(20, 1e-3, 0.0), (1 << 16, 1e6, 1e6)] {
                let root = temp_root()?;
                let mut draft = CoreDraft::sample();
                let speed = gnomon_format::Speed { launches, median_us, spread_us };
                draft.manifest.expectations[0].speed = Some(speed);
                draft.write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
                let core = accepted(Core::open(root.path()), &format!("a core recording the speed {speed:?}"))?;
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
            // Windows that touch each other or the arena's ends, and overlap nothing.
            let root = temp_root()?;
            let mut draft = CoreDraft::peered();
            let range = draft.manifest.peers[0];
            draft.manifest.peers.extend([
                PeerRange { offset: GRANULARITY, address: PEER_WINDOW + GRANULARITY, ..range },
                PeerRange { offset: 2 * GRANULARITY, address: BASE - GRANULARITY, ..range },
                PeerRange { offset: 3 * GRANULARITY, address: BASE + ARENA, ..range },
            ]);
            draft.write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
            accepted(Core::open(root.path()), "four peer windows, each touching another or the arena").map(drop)
        }),
        Case::new("cpu/manifest/launch-at-limits-accepted", CLAIM, |_| {
            let root = temp_root()?;
            let mut draft = CoreDraft::sample();
            (draft.kernel_mut().grid, draft.kernel_mut().block) = ([(1 << 31) - 1, 65_535, 65_535], [1024, 1, 1]);
            draft.write(root.path()).map_err(|e| Verdict::Blocked(e.to_string()))?;
            accepted(Core::open(root.path()), "opening a core whose launch is at the limits").map(drop)
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
