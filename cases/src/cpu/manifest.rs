//! `cpu/manifest/`: every validation rule, each with a core that breaks it and the specific
//! error it must be refused with; plus the cores that must be accepted.

use std::{fs, os::unix::fs::symlink, path::Path};

use gnomon_fixtures::{
    golden,
    sample::{CoreDraft, ARENA, BASE, CAP, GRANULARITY, MODULE_FILE, PEER_WINDOW, VARYING_FILE},
};
use gnomon_format::{
    errors::CoreError, errors::FlagsError, errors::ShardPlanError, errors::ValidationError as V,
    validate::MAX_MODULE_BYTES, BufferContents, ClusterScheduling, Core, Edge, EdgeKind, ModuleKind, NodeOp, PeerRange,
    PointerParam, Provenance, Shard, Unchecked, MANIFEST_FILE, MAX_MANIFEST_BYTES,
};

use crate::{accepted, ensure, refused, Case, Verdict};

const CLAIM: &str = "manifest-validation";

/// A core that breaks one rule: how to break it, and the error it must be refused with.
pub struct Corruption {
    pub slug: &'static str,
    corrupt: fn(&mut CoreDraft),
    on_disk: fn(&Path),
    expected: fn(&CoreError) -> bool,
}

macro_rules! invalid {
    ($($pattern:tt)+) => {
        |e: &CoreError| matches!(e, CoreError::Invalid(V::$($pattern)+))
    };
}

/// A v3 rule broken: refused as unsettled, with `what` in the text.
macro_rules! unsettled {
    ($what:literal) => {
        |e: &CoreError| matches!(e, CoreError::Invalid(V::Unsettled { what, .. }) if what.contains($what))
    };
}

/// A peer range refused, with `what` in the text.
macro_rules! peer_refused {
    ($what:literal) => {
        |e: &CoreError| matches!(e, CoreError::Invalid(V::Peer { what, .. }) if what.contains($what))
    };
}

fn provenance() -> Provenance {
    Provenance { library: "libcublasLt.so.13".into(), version: Some("13.0.2.14".into()), runtime_compiled: false }
}

fn row(slug: &'static str, corrupt: fn(&mut CoreDraft), expected: fn(&CoreError) -> bool) -> Corruption {
    Corruption { slug, corrupt, on_disk: |_| {}, expected }
}

fn on_disk(slug: &'static str, on_disk: fn(&Path), expected: fn(&CoreError) -> bool) -> Corruption {
    Corruption { slug, corrupt: |_| {}, on_disk, expected }
}

impl Corruption {
    /// Writes the sample core with this corruption under `root/core` and opens it.
    pub fn open(&self, root: &Path) -> Result<Core, CoreError> {
        let mut draft = CoreDraft::sample();
        (self.corrupt)(&mut draft);
        let dir = root.join("core");
        draft.write(&dir)?;
        (self.on_disk)(&dir);
        Core::open(&dir)
    }
}

/// Every corruption, one per rule and variant.
pub fn corruptions() -> Vec<Corruption> {
    vec![
        row("unknown-version", |d| d.manifest.format.version = 99, invalid!(UnsupportedVersion { found: 99, .. })),
        row("wrong-format-name", |d| d.manifest.format.name = "onnx".into(), invalid!(FormatName { .. })),
        on_disk("unknown-field", add_unknown_field, |e| matches!(e, CoreError::Parse { .. })),
        row(
            "granularity-not-power-of-two",
            |d| d.manifest.arena.granularity = 3000,
            invalid!(ShardCap(ShardPlanError::Granularity { .. })),
        ),
        row("cap-zero", |d| d.manifest.arena.shard_cap = 0, invalid!(ShardCap(ShardPlanError::CapZero))),
        row(
            "cap-below-granularity",
            |d| d.manifest.arena.shard_cap = 1024,
            invalid!(ShardCap(ShardPlanError::CapBelowGranularity { .. })),
        ),
        row(
            "cap-not-multiple-of-granularity",
            |d| d.manifest.arena.shard_cap = CAP + 1024,
            invalid!(ShardCap(ShardPlanError::CapNotMultiple { .. })),
        ),
        row("base-misaligned", |d| d.manifest.arena.base = BASE + 512, invalid!(BaseMisaligned { .. })),
        row("arena-size-unreal", |d| d.manifest.arena.size = 1 << 50, invalid!(ArenaSize { .. })),
        row(
            "arena-past-address-space",
            |d| d.manifest.arena.base = (u64::MAX / GRANULARITY) * GRANULARITY,
            invalid!(ArenaOverflow { .. }),
        ),
        row(
            "shard-index-out-of-order",
            |d| d.manifest.shards[1].index = 5,
            invalid!(ShardIndex { position: 1, index: 5 }),
        ),
        row("shard-empty", |d| d.manifest.shards[1].size = 0, invalid!(ShardEmpty { index: 1, .. })),
        row(
            "shard-over-cap",
            |d| d.manifest.shards[0].size = CAP + GRANULARITY,
            invalid!(ShardOverCap { index: 0, .. }),
        ),
        row("shard-misaligned", |d| d.manifest.shards[1].offset = CAP + 16, invalid!(ShardMisaligned { index: 1, .. })),
        row("shards-overlap", |d| d.manifest.shards[1].offset = GRANULARITY, invalid!(ShardOverlap { index: 1, .. })),
        row("shards-gap", shards_gap, invalid!(ShardGap { index: 1, .. })),
        row("shard-missing", |d| drop(d.manifest.shards.pop()), invalid!(MissingShard { covered: CAP, .. })),
        row("shard-extra", extra_shard, invalid!(ExtraShard { index: 2, .. })),
        row(
            "buffer-duplicate",
            |d| d.manifest.buffers[1].name = "x".into(),
            invalid!(Duplicate { kind: "buffer", .. }),
        ),
        row("buffer-outside-arena", |d| d.manifest.buffers[3].offset = ARENA, invalid!(BufferOutsideArena { .. })),
        row("buffers-overlap", |d| d.manifest.buffers[1].offset = GRANULARITY / 2, invalid!(BuffersOverlap { .. })),
        row(
            "module-duplicate",
            |d| d.manifest.modules.push(d.manifest.modules[0].clone()),
            invalid!(Duplicate { kind: "module", .. }),
        ),
        row(
            "param-layout-overlap",
            |d| d.manifest.modules[0].functions[0].params[1].offset = 2,
            invalid!(ParamLayout { param: 1, .. }),
        ),
        row(
            "template-duplicate",
            |d| d.manifest.templates.push(d.manifest.templates[0].clone()),
            invalid!(Duplicate { kind: "template", .. }),
        ),
        row(
            "node-duplicate",
            |d| d.manifest.templates[0].nodes[1].id = "n0".into(),
            invalid!(Duplicate { kind: "node", .. }),
        ),
        row("node-unknown-module", |d| d.kernel_mut().module = "m9".into(), invalid!(UnknownModule { .. })),
        row("node-unknown-function", |d| d.kernel_mut().function = "gemm".into(), invalid!(UnknownFunction { .. })),
        row(
            "param-bytes-short",
            |d| d.kernel_mut().params.truncate(24),
            invalid!(ParamBytes { expected: 28, found: 24, .. }),
        ),
        row(
            "param-bytes-long",
            |d| d.kernel_mut().params.push(0),
            invalid!(ParamBytes { expected: 28, found: 29, .. }),
        ),
        row(
            "pointer-param-index",
            |d| d.kernel_mut().pointers.push(pointer(7)),
            invalid!(PointerParamIndex { param: 7, .. }),
        ),
        row(
            "pointer-param-not-pointer-sized",
            |d| d.kernel_mut().pointers.push(pointer(0)),
            invalid!(PointerParamSize { param: 0, size: 4, .. }),
        ),
        row(
            "pointer-outside-buffers",
            |d| set_y_pointer(d, BASE + ARENA + 64),
            invalid!(DanglingPointer { param: 2, .. }),
        ),
        row("pointer-below-arena", |d| set_y_pointer(d, BASE - 8), invalid!(DanglingPointer { param: 2, .. })),
        row(
            "pointer-at-end-of-buffer-before-gap",
            |d| {
                d.manifest.buffers[2].size = GRANULARITY / 2;
                set_y_pointer(d, BASE + 2 * GRANULARITY + GRANULARITY / 2);
            },
            invalid!(DanglingPointer { param: 2, .. }),
        ),
        row(
            "pointer-before-first-buffer",
            |d| (d.manifest.buffers[0].offset, d.manifest.buffers[0].size) = (GRANULARITY / 2, GRANULARITY / 2),
            invalid!(DanglingPointer { param: 1, .. }),
        ),
        row("memset-unknown-buffer", |d| memset_target(d, "nope"), invalid!(UnknownBuffer { .. })),
        row("memset-element-size", |d| memset_element(d, 3), invalid!(MemsetElement { element_size: 3, .. })),
        row("memcpy-past-buffer", |d| memcpy_bytes(d, GRANULARITY + 1), invalid!(BufferRange { .. })),
        row("edge-unknown-node", |d| add_edge(d, "n0", "n9"), invalid!(UnknownEdgeNode { .. })),
        row("edges-cyclic", |d| add_edge(d, "n3", "n1"), invalid!(Cycle { .. })),
        row(
            "capture-order-incomplete",
            |d| drop(d.manifest.templates[0].capture_order.pop()),
            invalid!(CaptureOrder { .. }),
        ),
        row(
            "capture-order-repeats",
            |d| d.manifest.templates[0].capture_order[3] = "n0".into(),
            invalid!(CaptureOrder { .. }),
        ),
        row(
            "flags-unsupported",
            |d| d.manifest.templates[0].flags.explicit = Some(2),
            invalid!(Flags { source: FlagsError::UnsupportedBit { bit: 2, .. }, .. }),
        ),
        row(
            "flags-ambiguous",
            |d| d.manifest.templates[0].flags.from_executable = Some(1),
            invalid!(Flags { source: FlagsError::BothSources, .. }),
        ),
        row(
            "flags-missing",
            |d| d.manifest.templates[0].flags.explicit = None,
            invalid!(Flags { source: FlagsError::NoSource, .. }),
        ),
        row(
            "expectation-unknown-template",
            |d| d.manifest.expectations[0].template = "prefill".into(),
            invalid!(ExpectationTarget { kind: "template", .. }),
        ),
        row(
            "expectation-unknown-buffer",
            |d| d.manifest.expectations[0].outputs[0].buffer = "z".into(),
            invalid!(ExpectationTarget { kind: "buffer", .. }),
        ),
        row(
            "path-parent-dir",
            |d| d.manifest.shards[1].file = "../elsewhere/001.bin".into(),
            invalid!(PathEscapes { .. }),
        ),
        row("path-absolute", |d| d.manifest.modules[0].file = "/etc/passwd".into(), invalid!(PathEscapes { .. })),
        row(
            "path-through-a-file",
            |d| d.manifest.shards[1].file = "shards/000.bin/001.bin".into(),
            invalid!(FileUnreadable { .. }),
        ),
        on_disk("path-through-link", link_modules_dir, invalid!(PathThroughLink { .. })),
        on_disk("manifest-is-link", link_manifest, invalid!(PathThroughLink { .. })),
        on_disk(
            "shard-file-missing",
            |dir| fs::remove_file(dir.join("shards/001.bin")).expect("remove shard"),
            invalid!(MissingFile { .. }),
        ),
        row("shard-file-short", |d| truncate_file(d, "shards/001.bin"), invalid!(FileSize { declared: CAP, .. })),
        row("shard-byte-flipped", |d| flip_byte(d, "shards/000.bin"), invalid!(HashMismatch { .. })),
        row("module-byte-flipped", |d| flip_byte(d, MODULE_FILE), invalid!(HashMismatch { .. })),
        row(
            "module-ptx-for-later-arch",
            |d| {
                let ptx = String::from_utf8_lossy(&d.files[MODULE_FILE]).replace(".target sm_90", ".target sm_100");
                replace_module(d, ModuleKind::Ptx, ptx.into_bytes())
            },
            invalid!(NoCodeForArch { core: 90, .. }),
        ),
        row(
            "module-cubin-for-other-major",
            |d| replace_module(d, ModuleKind::Cubin, cubin_header(0x0600_5004)),
            invalid!(NoCodeForArch { core: 90, .. }),
        ),
        row(
            "module-cubin-names-no-arch",
            |d| replace_module(d, ModuleKind::Cubin, cubin_header(0x0600_0004)),
            invalid!(ImageArch { .. }),
        ),
        on_disk("manifest-too-large", grow_manifest, |e| matches!(e, CoreError::ManifestTooLarge { .. })),
        row(
            "param-slot-past-limit",
            |d| d.manifest.modules[0].functions[0].params[3].offset = u64::MAX,
            invalid!(ParamPastLimit { param: 3, .. }),
        ),
        row(
            "param-slot-size-wraps",
            |d| d.manifest.modules[0].functions[0].params[3].size = u64::MAX - 8,
            invalid!(ParamPastLimit { param: 3, .. }),
        ),
        row("param-padding-not-zero", |d| d.kernel_mut().params[4] = 0xff, invalid!(ParamPadding { offset: 4, .. })),
        row("grid-zero", |d| d.kernel_mut().grid = [0, 1, 1], invalid!(LaunchShape { what: "grid", .. })),
        row("grid-past-limit", |d| d.kernel_mut().grid = [1 << 31, 1, 1], invalid!(LaunchShape { what: "grid", .. })),
        row("block-too-large", |d| d.kernel_mut().block = [1024, 2, 1], invalid!(LaunchShape { what: "block", .. })),
        row("block-zero", |d| d.kernel_mut().block = [0, 1, 1], invalid!(LaunchShape { what: "block", .. })),
        row("block-z-past-limit", |d| d.kernel_mut().block = [1, 1, 65], invalid!(LaunchShape { what: "block", .. })),
        row(
            "pointer-duplicate",
            |d| d.kernel_mut().pointers.push(pointer(2)),
            invalid!(DuplicateIn { kind: "pointer parameter", .. }),
        ),
        row("edge-duplicate", |d| add_edge(d, "n0", "n1"), invalid!(DuplicateIn { kind: "edge", .. })),
        row(
            "template-without-nodes",
            |d| {
                let t = &mut d.manifest.templates[0];
                (t.nodes, t.edges, t.capture_order) = (Vec::new(), Vec::new(), Vec::new());
            },
            invalid!(EmptyTemplate { .. }),
        ),
        row("memset-value-too-wide", memset_wide_value, invalid!(MemsetValue { value: 0x1ff, element_size: 1, .. })),
        row(
            "expectation-duplicate",
            |d| d.manifest.expectations.push(d.manifest.expectations[0].clone()),
            invalid!(Duplicate { kind: "expectation of template", .. }),
        ),
        row(
            "expectation-output-duplicate",
            |d| {
                let outputs = &mut d.manifest.expectations[0].outputs;
                outputs.push(outputs[0].clone());
            },
            invalid!(DuplicateIn { kind: "expected output", .. }),
        ),
        row(
            "expectation-digest-not-hex",
            |d| d.manifest.expectations[0].outputs[0].sha256 = "zz".into(),
            invalid!(DigestFormat { .. }),
        ),
        row(
            "shard-chunk-digest-uppercase",
            |d| chunks(d, 0).xxh3_128[1] = chunks(d, 0).xxh3_128[1].to_uppercase(),
            invalid!(DigestFormat { .. }),
        ),
        row("shard-chunk-digest-missing", |d| drop(chunks(d, 1).xxh3_128.pop()), unsettled!("2 are needed")),
        row("shard-chunk-size-not-power-of-two", |d| chunks(d, 0).bytes = 6144, unsettled!("chunk size 6144")),
        row("shard-chunk-size-below-a-page", |d| chunks(d, 0).bytes = 2048, unsettled!("chunk size 2048")),
        row(
            "shard-whole-digest-in-v3",
            |d| d.manifest.shards[0].sha256 = Some("0".repeat(64)),
            unsettled!("carries a whole-file sha256"),
        ),
        row("shard-without-digest-in-v3", |d| d.manifest.shards[0].chunks = None, unsettled!("no chunk digests")),
        row(
            "shard-chunks-in-v2-core",
            |d| d.manifest.format.version = 2,
            invalid!(V3FieldInOlder { field: "chunks", version: 2, .. }),
        ),
        row(
            "shard-last-chunk-byte-flipped",
            |d| d.files.get_mut("shards/001.bin").expect("sample shard")[CAP as usize - 1] ^= 0x01,
            invalid!(HashMismatch { kind: "XXH3-128", .. }),
        ),
        row("tolerance-negative", |d| d.manifest.expectations[0].tolerance = Some(-1.0), invalid!(Tolerance { .. })),
        row(
            "tp-rank-outside-world",
            |d| d.manifest.context.tp_rank = 1,
            invalid!(TensorParallel { rank: 1, world: 1 }),
        ),
        row("tp-world-zero", |d| d.manifest.context.tp_world_size = 0, invalid!(TensorParallel { world: 0, .. })),
        row(
            "path-dot-component",
            |d| d.manifest.shards[0].file = "shards/./000.bin".into(),
            invalid!(PathNotCanonical { .. }),
        ),
        row(
            "path-empty-component",
            |d| d.manifest.shards[0].file = "shards//000.bin".into(),
            invalid!(PathNotCanonical { .. }),
        ),
        on_disk("shard-is-directory", shard_directory, invalid!(NotAFile { kind: "a directory", .. })),
        on_disk("module-file-too-large", grow_module, invalid!(FileSize { declared: MAX_MODULE_BYTES, .. })),
        on_disk("shard-is-fifo", shard_fifo, invalid!(NotAFile { kind: "a special file", .. })),
        row("external-pointer", external_pointer, invalid!(ExternalPointer { param: 2, .. })),
        row(
            "event-node",
            |d| with_node(d, 3, |op| *op = NodeOp::EventRecord { event: "e0".into() }),
            invalid!(EventNode { kind: "event-record", .. }),
        ),
        row(
            "pointer-past-its-parameter",
            |d| d.kernel_mut().pointers[1].at = 8,
            invalid!(PointerParamSize { param: 2, at: 8, size: 8, .. }),
        ),
        row(
            "shared-memory-above-function-limit",
            |d| d.kernel_mut().shared_mem_bytes = 64 << 10,
            invalid!(SharedMemory { requested: 65536, allowed: 49152, .. }),
        ),
        row(
            "shared-memory-limit-unreal",
            |d| d.manifest.modules[0].functions[0].attributes.max_dynamic_shared_size_bytes = Some(1 << 20),
            invalid!(Attribute { .. }),
        ),
        row(
            "carveout-not-a-percentage",
            |d| d.manifest.modules[0].functions[0].attributes.preferred_shared_memory_carveout = Some(101),
            invalid!(Attribute { .. }),
        ),
        row("cluster-dim-zero", |d| d.kernel_mut().launch.cluster_dim = Some([0, 1, 1]), invalid!(Attribute { .. })),
        row("cluster-too-large", |d| d.kernel_mut().launch.cluster_dim = Some([4, 4, 2]), invalid!(Attribute { .. })),
        row(
            "cluster-not-dividing-grid",
            |d| d.kernel_mut().launch.cluster_dim = Some([3, 1, 1]),
            invalid!(Attribute { .. }),
        ),
        row(
            "programmatic-edge-from-memset",
            |d| d.manifest.templates[0].edges[0].kind = EdgeKind::Programmatic,
            invalid!(TypedEdge { kind: "programmatic", .. }),
        ),
        row("template-without-expectation", |d| d.manifest.expectations.clear(), invalid!(Unchecked { .. })),
        row("nothing-checked", nothing_checked, invalid!(NothingChecked)),
        row(
            "unchecked-without-reason",
            |d| unchecked(d, "decode-b1", " "),
            invalid!(Unchecked { what: "is declared unchecked without a reason", .. }),
        ),
        row(
            "unchecked-and-expected",
            |d| d.manifest.unchecked.push(Unchecked { template: "decode-b1".into(), reason: "r".into() }),
            invalid!(Unchecked { what: "is declared unchecked, but has expected outputs", .. }),
        ),
        row(
            "unchecked-unknown-template",
            |d| d.manifest.unchecked.push(Unchecked { template: "prefill".into(), reason: "r".into() }),
            invalid!(Unchecked { what: "is declared unchecked, but the core has no such template", .. }),
        ),
        row(
            "v2-field-in-v1-core",
            |d| (d.manifest.format.version, d.manifest.buffers[3].contents) = (1, BufferContents::Zero),
            invalid!(V2FieldInV1 { field: "contents", .. }),
        ),
        row(
            "v3-field-in-v2-core",
            |d| {
                d.manifest.format.version = 2;
                d.manifest.modules[0].provenance = Some(provenance());
            },
            invalid!(V3FieldInOlder { field: "provenance", version: 2, .. }),
        ),
        row(
            "v3-dynamic-shared-limit-missing",
            |d| d.manifest.modules[0].functions[0].attributes.max_dynamic_shared_size_bytes = None,
            unsettled!("max-dynamic-shared-size-bytes is missing"),
        ),
        row(
            "v3-non-portable-cluster-false",
            |d| d.manifest.modules[0].functions[0].attributes.non_portable_cluster_size_allowed = Some(false),
            unsettled!("non-portable-cluster-size-allowed is false"),
        ),
        row(
            "v3-cooperative-false",
            |d| d.kernel_mut().launch.cooperative = Some(false),
            unsettled!("cooperative is false"),
        ),
        row(
            "v3-scheduling-without-cluster",
            |d| d.kernel_mut().launch.cluster_scheduling_policy = Some(ClusterScheduling::Spread),
            unsettled!("cluster-scheduling-policy is recorded without cluster-dim"),
        ),
        row(
            "v3-cluster-dim-disagrees-with-function",
            |d| {
                d.manifest.modules[0].functions[0].attributes.required_cluster_dim = Some([2, 1, 1]);
                d.kernel_mut().launch.cluster_dim = Some([1, 1, 1]);
            },
            unsettled!("differs from its function's required-cluster-dim"),
        ),
        row(
            "v3-producer-seconds-not-seconds",
            |d| _ = d.manifest.producer_seconds.insert("warm-up-s".into(), -1.0),
            unsettled!("values finite seconds"),
        ),
        row("v3-pointer-at-unaligned", |d| d.kernel_mut().pointers[0].at = 4, unsettled!("is not a multiple of 8")),
        row(
            "v3-variation-in-v2-core",
            |d| {
                *d = CoreDraft::varying();
                d.manifest.format.version = 2;
            },
            invalid!(V3FieldInOlder { field: "variation", version: 2, .. }),
        ),
        row(
            "v3-peers-in-v2-core",
            |d| {
                *d = CoreDraft::peered();
                d.manifest.format.version = 2;
            },
            invalid!(V3FieldInOlder { field: "peers", version: 2, .. }),
        ),
        row("v3-peer-own-rank", |d| peer(d, |p| p.rank = 0), peer_refused!("this core's own rank")),
        row("v3-peer-missing-rank", |d| peer(d, |p| p.rank = 2), peer_refused!("does not exist in a world of 2")),
        row(
            "v3-peer-size-misfits-granularity",
            |d| peer(d, |p| p.size = GRANULARITY + 512),
            peer_refused!("size 0x1200 is not a multiple of the granularity 0x1000"),
        ),
        row("v3-peer-outside-arena", |d| peer(d, |p| p.offset = ARENA), peer_refused!("do not lie in an arena")),
        row("v3-peer-empty", |d| peer(d, |p| p.size = 0), peer_refused!("do not lie in an arena")),
        row(
            "v3-peer-window-past-last-address",
            |d| peer(d, |p| p.address = u64::MAX - GRANULARITY + 1),
            peer_refused!("past the last address"),
        ),
        row("v3-peer-overlaps-own-arena", |d| peer(d, |p| p.address = BASE + CAP), peer_refused!("this rank's arena")),
        row("v3-peers-overlap", |d| second_peer(d, |p| p.offset = GRANULARITY), peer_refused!("overlaps peer range 0")),
        row(
            "v3-peers-overlap-the-later-lower",
            |d| {
                second_peer(d, |p| {
                    (p.offset, p.size, p.address) = (GRANULARITY, 2 * GRANULARITY, PEER_WINDOW - GRANULARITY)
                })
            },
            peer_refused!("0x20fffffff000..0x210000001000 overlaps peer range 0"),
        ),
        row(
            "v3-pointer-past-peer-window",
            |d| {
                peer(d, |_| {});
                set_y_pointer(d, PEER_WINDOW + GRANULARITY);
            },
            invalid!(DanglingPointer { .. }),
        ),
        row(
            "v3-speed-in-v2-core",
            |d| {
                timed(d, |_| {});
                d.manifest.format.version = 2;
            },
            invalid!(V3FieldInOlder { field: "speed", version: 2, .. }),
        ),
        row("v3-speed-too-few-launches", |d| timed(d, |s| s.launches = 19), unsettled!("20 to 65536 launches")),
        row("v3-speed-median-zero", |d| timed(d, |s| s.median_us = 0.0), unsettled!("a finite median > 0")),
        row("v3-speed-spread-negative", |d| timed(d, |s| s.spread_us = -1.0), unsettled!("a finite spread ≥ 0")),
        row("v3-variation-one-launch", |d| vary(d, |v| v.launches = 1), unsettled!("2 to 65536 are recorded")),
        row("v3-variation-no-other-digest", |d| vary(d, |v| v.sha256s.clear()), unsettled!("1 to one fewer")),
        row(
            "v3-variation-first-digest-again",
            |d| {
                vary(d, |_| {});
                let first = d.manifest.expectations[0].outputs[0].sha256.clone();
                d.variation_mut().sha256s.push(first);
            },
            unsettled!("is listed twice"),
        ),
        row(
            "v3-variation-element-misfits",
            |d| {
                vary(d, |v| v.element = gnomon_format::spread::Element::Float64);
                d.manifest.buffers[1].size = 4092;
                if let NodeOp::Memcpy(copy) = &mut d.manifest.templates[0].nodes[2].op {
                    copy.bytes = 4092;
                }
            },
            unsettled!("4092 bytes are not a whole number of Float64 elements"),
        ),
        row("v3-variation-fraction-zero", |d| vary(d, |v| v.differing_fraction = 0.0), unsettled!("(0, 1]")),
        row(
            "v3-variation-spread-on-bytes",
            |d| vary(d, |v| v.element = gnomon_format::spread::Element::Bytes),
            unsettled!("for bytes neither max-abs nor max-ulp"),
        ),
        row("v3-variation-unknown-node", |d| vary(d, |v| v.nodes = vec!["n9".into()]), unsettled!("node `n9`")),
        row("v3-variation-atol-alone", |d| vary(d, |v| v.rtol = None), unsettled!("both or neither")),
        row("v3-variation-rtol-negative", |d| vary(d, |v| v.rtol = Some(-1e-3)), unsettled!("each finite ≥ 0")),
        row(
            "v3-variation-spread-taken-with-digests",
            |d| vary(d, |v| v.spread_of = Some(output_ref("decode-b1"))),
            unsettled!("takes another output's spread but lists 1 other digests of its own"),
        ),
        row(
            "v3-variation-spread-of-its-own-template",
            |d| {
                vary(d, |v| {
                    v.sha256s.clear();
                    v.spread_of = Some(output_ref("decode-b1"));
                })
            },
            unsettled!("takes the spread of template `decode-b1` output `y`, of its own template"),
        ),
        row(
            "v3-variation-first-launch-missing",
            |d| {
                vary(d, |_| {});
                d.files.remove(VARYING_FILE);
            },
            invalid!(MissingFile { .. }),
        ),
        row(
            "v3-variation-first-launch-altered",
            |d| {
                vary(d, |_| {});
                d.files.get_mut(VARYING_FILE).expect("written")[0] ^= 1;
            },
            invalid!(HashMismatch { .. }),
        ),
        row(
            "v3-variation-first-launch-short",
            |d| {
                vary(d, |_| {});
                d.files.get_mut(VARYING_FILE).expect("written").pop();
            },
            invalid!(FileSize { .. }),
        ),
        row(
            "shard-holds-unstored-bytes",
            |d| {
                // The digests fit the stored length; the file still holds the whole shard.
                d.manifest.buffers[3].contents = BufferContents::Undefined;
                chunks(d, 1).xxh3_128.pop();
            },
            invalid!(FileSize { declared: GRANULARITY, found: CAP, .. }),
        ),
        Corruption {
            slug: "param-hex-uppercase",
            // 0xab in the float's slot gives the hex text letters to spell in uppercase.
            corrupt: |d| d.kernel_mut().params[0] = 0xab,
            on_disk: uppercase_params,
            expected: |e| matches!(e, CoreError::Parse { source, .. } if source.to_string().contains("lowercase")),
        },
    ]
}

/// Spells the first kernel node's parameter bytes in uppercase hex.
fn uppercase_params(dir: &Path) {
    let path = dir.join(MANIFEST_FILE);
    let mut value: serde_json::Value =
        serde_json::from_slice(&fs::read(&path).expect("read manifest")).expect("parse manifest");
    let node = &mut value["templates"][0]["nodes"][1]["op"]["params"];
    let upper = node.as_str().expect("node 1 of the sample is a kernel").to_uppercase();
    assert!(upper.chars().any(|c| c.is_ascii_uppercase()), "the sample's parameters have hex letters");
    *node = upper.into();
    fs::write(&path, value.to_string()).expect("write manifest");
}

fn memset_wide_value(d: &mut CoreDraft) {
    with_node(d, 0, |op| match op {
        NodeOp::Memset(m) => (m.element_size, m.value) = (1, 0x1ff),
        _ => unreachable!("node 0 of the sample is a memset"),
    })
}

/// A sparse module image one byte past the limit: refused before a byte of it is hashed.
fn grow_module(dir: &Path) {
    let file = fs::OpenOptions::new().write(true).open(dir.join(MODULE_FILE)).expect("open module");
    file.set_len(MAX_MODULE_BYTES + 1).expect("grow module");
}

/// Replaces shard 1 with a directory of the same name.
fn shard_directory(dir: &Path) {
    let shard = dir.join("shards/001.bin");
    fs::remove_file(&shard).expect("remove shard");
    fs::create_dir(&shard).expect("make a directory");
}

/// Replaces shard 1 with a FIFO, which would block a reader forever.
fn shard_fifo(dir: &Path) {
    let shard = dir.join("shards/001.bin");
    fs::remove_file(&shard).expect("remove shard");
    let made = std::process::Command::new("mkfifo").arg(&shard).status().expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
}

fn external_pointer(d: &mut CoreDraft) {
    set_y_pointer(d, 0x7f00_0000_0000);
    d.kernel_mut().pointers[1].external = true;
}

fn unchecked(d: &mut CoreDraft, template: &str, reason: &str) {
    d.manifest.expectations.clear();
    d.manifest.unchecked.push(Unchecked { template: template.into(), reason: reason.into() });
}

/// The peered sample with its peer range changed by `change`.
fn peer(d: &mut CoreDraft, change: fn(&mut PeerRange)) {
    *d = CoreDraft::peered();
    change(&mut d.manifest.peers[0]);
}

/// The peered sample with a second range: a copy of its first, changed by `change`.
fn second_peer(d: &mut CoreDraft, change: fn(&mut PeerRange)) {
    *d = CoreDraft::peered();
    let mut again = d.manifest.peers[0];
    change(&mut again);
    d.manifest.peers.push(again);
}

/// The sample with a speed recorded for its template, changed by `change`.
fn timed(d: &mut CoreDraft, change: fn(&mut gnomon_format::Speed)) {
    let mut speed = gnomon_format::Speed { launches: 20, median_us: 100.0, spread_us: 1.0 };
    change(&mut speed);
    d.manifest.expectations[0].speed = Some(speed);
}

/// The varying sample with its variation changed by `change`.
fn vary(d: &mut CoreDraft, change: fn(&mut gnomon_format::Variation)) {
    *d = CoreDraft::varying();
    change(d.variation_mut());
}

fn output_ref(template: &str) -> gnomon_format::OutputRef {
    gnomon_format::OutputRef { template: template.into(), buffer: "y".into() }
}

fn nothing_checked(d: &mut CoreDraft) {
    unchecked(d, "decode-b1", "its outputs depend on the clock");
}

fn pointer(param: u32) -> PointerParam {
    PointerParam { param, at: 0, external: false }
}

fn set_y_pointer(d: &mut CoreDraft, address: u64) {
    d.kernel_mut().params[16..24].copy_from_slice(&address.to_le_bytes());
}

fn shards_gap(d: &mut CoreDraft) {
    d.manifest.arena.size = 3 * CAP;
    d.manifest.shards[1].offset = 2 * CAP;
}

fn extra_shard(d: &mut CoreDraft) {
    let extra = Shard { index: 2, offset: 2 * CAP, ..d.manifest.shards[1].clone() };
    d.manifest.shards.push(extra);
}

fn with_node<T>(d: &mut CoreDraft, index: usize, f: impl FnOnce(&mut NodeOp) -> T) -> T {
    f(&mut d.manifest.templates[0].nodes[index].op)
}

fn memset_target(d: &mut CoreDraft, buffer: &str) {
    with_node(d, 0, |op| match op {
        NodeOp::Memset(m) => m.dst.buffer = buffer.into(),
        _ => unreachable!("node 0 of the sample is a memset"),
    })
}

fn memset_element(d: &mut CoreDraft, element_size: u32) {
    with_node(d, 0, |op| match op {
        NodeOp::Memset(m) => m.element_size = element_size,
        _ => unreachable!("node 0 of the sample is a memset"),
    })
}

fn memcpy_bytes(d: &mut CoreDraft, bytes: u64) {
    with_node(d, 2, |op| match op {
        NodeOp::Memcpy(c) => c.bytes = bytes,
        _ => unreachable!("node 2 of the sample is a memcpy"),
    })
}

fn add_edge(d: &mut CoreDraft, from: &str, to: &str) {
    d.manifest.templates[0].edges.push(Edge { from: from.into(), to: to.into(), kind: EdgeKind::Full });
}

fn truncate_file(d: &mut CoreDraft, file: &str) {
    d.files.get_mut(file).expect("sample file").truncate(100);
}

fn chunks(d: &mut CoreDraft, shard: usize) -> &mut gnomon_format::Chunks {
    d.manifest.shards[shard].chunks.as_mut().expect("the sample is a v3 core")
}

/// Replaces the sample's module with `bytes` of `kind`, its digest updated, so only what
/// the image says of its arch is wrong.
fn replace_module(d: &mut CoreDraft, kind: ModuleKind, bytes: Vec<u8>) {
    let module = &mut d.manifest.modules[0];
    (module.kind, module.sha256) = (kind, gnomon_format::hash_hex(bytes.as_slice()).expect("hash memory"));
    d.files.insert(MODULE_FILE.into(), bytes);
}

/// The 64-byte header of a CUDA ELF ABI 8 cubin with `e_flags` (sm in the second byte).
fn cubin_header(flags: u32) -> Vec<u8> {
    let mut head = vec![0u8; 64];
    head[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
    head[8] = 8;
    head[0x30..0x34].copy_from_slice(&flags.to_le_bytes());
    head
}

fn flip_byte(d: &mut CoreDraft, file: &str) {
    d.files.get_mut(file).expect("sample file")[7] ^= 0x01;
}

/// Moves `modules/` out of the core and leaves a link to it in its place.
fn link_modules_dir(dir: &Path) {
    let outside = dir.with_file_name("outside-modules");
    fs::rename(dir.join("modules"), &outside).expect("move modules");
    symlink(&outside, dir.join("modules")).expect("link modules");
}

fn link_manifest(dir: &Path) {
    let outside = dir.with_file_name("outside-manifest.json");
    fs::rename(dir.join(MANIFEST_FILE), &outside).expect("move manifest");
    symlink(&outside, dir.join(MANIFEST_FILE)).expect("link manifest");
}

/// A field v1 does not define (a typo in an outside exporter, say).
fn add_unknown_field(dir: &Path) {
    let path = dir.join(MANIFEST_FILE);
    let mut value: serde_json::Value =
        serde_json::from_slice(&fs::read(&path).expect("read manifest")).expect("parse manifest");
    value["arena"]["shard-size"] = 8192.into();
    fs::write(&path, value.to_string()).expect("write manifest");
}

/// A sparse manifest past the size limit: refused before a byte of it is read.
fn grow_manifest(dir: &Path) {
    let file = fs::OpenOptions::new().write(true).open(dir.join(MANIFEST_FILE)).expect("open manifest");
    file.set_len(MAX_MANIFEST_BYTES + 1).expect("grow manifest");
}

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
