use serde::{Deserialize, Serialize};

/// The value of `format.name` in every core.
pub const FORMAT_NAME: &str = "gnomon-core";
/// The version this crate writes.
pub const FORMAT_VERSION: u32 = 3;
/// Every version this crate reads. Readers keep every version they ever wrote; a v1 core
/// reads as the v2 core it migrates to (`docs/format-v2.md`, "Migration from v1").
pub const READABLE_VERSIONS: &[u32] = &[1, 2, 3];

/// The whole manifest of a core (`manifest.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Manifest {
    pub format: FormatTag,
    pub context: Context,
    pub arena: Arena,
    pub shards: Vec<Shard>,
    pub buffers: Vec<Buffer>,
    pub modules: Vec<Module>,
    /// Parsed on several threads (`fast_parse.rs`).
    #[serde(deserialize_with = "super::fast_parse::templates")]
    pub templates: Vec<Template>,
    #[serde(default)]
    pub expectations: Vec<Expectation>,
    /// (v2) Templates that replay launches but whose outputs nobody compares, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unchecked: Vec<Unchecked>,
    /// (v3) Seconds the producing process spent (warm-up, capture, instantiate, export),
    /// by name: reported beside the restore's metrics, so the two can be compared.
    #[serde(
        default,
        skip_serializing_if = "std::collections::BTreeMap::is_empty",
        deserialize_with = "unique_keys::deserialize"
    )]
    pub producer_seconds: std::collections::BTreeMap<String, f64>,
    /// (v3) Ranges of other ranks' arenas this rank maps (a peer-mapped arena): its
    /// kernels may hold addresses in them, as a custom all-reduce holds its peers' buffers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerRange>,
    /// (v3) Random-number generators whose seed and offset the kernels read from the
    /// arena, and how each drawing template's launch advances the offset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generators: Vec<crate::Generator>,
}

/// A range of rank `rank`'s arena, mapped by this rank at `address` (v3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PeerRange {
    pub rank: u32,
    /// From the peer's `arena.base`.
    pub offset: u64,
    pub size: u64,
    /// Where this rank maps the range's first byte.
    pub address: u64,
}

impl PeerRange {
    /// The addresses this rank maps, empty where `address + size` would overflow.
    pub fn window(&self) -> std::ops::Range<u64> {
        self.address..self.address.checked_add(self.size).unwrap_or(self.address)
    }
}

/// A template whose outputs are not compared, and why (v2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Unchecked {
    pub template: String,
    pub reason: String,
}

impl Manifest {
    /// The arena ranges (offsets from `arena.base`, in address order) whose bytes `shard`'s
    /// file holds, one after another: the whole shard in v1; in v2 the parts of stored
    /// buffers that lie in it.
    pub fn stored_ranges(&self, shard: &Shard) -> Vec<std::ops::Range<u64>> {
        let span = shard.offset..shard.offset.saturating_add(shard.size);
        if self.format.version < 2 {
            return vec![span];
        }
        let mut ranges: Vec<_> = self
            .buffers
            .iter()
            .filter(|b| b.contents.is_stored())
            .map(|b| b.offset.max(span.start)..b.offset.saturating_add(b.size).min(span.end))
            .filter(|r| r.start < r.end)
            .collect();
        ranges.sort_by_key(|r| r.start);
        ranges
    }

    /// Each template's expectation by template name, looked up once per template instead
    /// of searched for (a core may hold tens of thousands). Validation allows one each.
    pub fn expectations_by_template(&self) -> std::collections::HashMap<&str, &Expectation> {
        self.expectations.iter().map(|e| (e.template.as_str(), e)).collect()
    }

    /// The length `shard`'s file must have.
    pub fn stored_len(&self, shard: &Shard) -> u64 {
        self.stored_ranges(shard).iter().map(|r| r.end - r.start).sum()
    }

    /// The end of what the core uses, as an offset: the last buffer's end (or a v1
    /// shard's, whose file fills it), rounded up to the granularity. A capture's arena is
    /// reserved generously; replay maps only this much of it.
    pub fn used_end(&self) -> u64 {
        let v1_shards = self.shards.iter().filter(|_| self.format.version < 2).map(|s| s.offset.saturating_add(s.size));
        let v1_end = granules_end(v1_shards.max().unwrap_or(0), self.arena.granularity);
        buffers_end(&self.buffers, self.arena.granularity).max(v1_end).min(self.arena.size)
    }

    /// Of each shard, in order, the bytes below [`Self::used_end`]: what replay backs with
    /// memory.
    pub fn mapped_lens(&self) -> Vec<u64> {
        let end = self.used_end();
        self.shards.iter().map(|s| s.size.min(end.saturating_sub(s.offset))).collect()
    }

    /// Each shard's part below [`Self::used_end`], as (offset, bytes); shards wholly above
    /// it are left out.
    pub fn mapped_ranges(&self) -> Vec<(u64, u64)> {
        let parts = self.shards.iter().zip(self.mapped_lens()).map(|(s, len)| (s.offset, len));
        parts.filter(|&(_, len)| len > 0).collect()
    }
}

/// The end of `buffers` as an offset, rounded up to `granularity`: what an arena holding
/// them uses, and all that replay maps of it.
pub fn buffers_end(buffers: &[Buffer], granularity: u64) -> u64 {
    granules_end(buffers.iter().map(|b| b.offset.saturating_add(b.size)).max().unwrap_or(0), granularity)
}

fn granules_end(end: u64, granularity: u64) -> u64 {
    let granule = granularity.max(1);
    end.div_ceil(granule).saturating_mul(granule)
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FormatTag {
    pub name: String,
    pub version: u32,
}

impl FormatTag {
    /// Whether this crate reads cores of this format and version.
    pub fn readable(&self) -> Result<(), crate::errors::ValidationError> {
        use crate::errors::ValidationError as E;
        if self.name != FORMAT_NAME {
            return Err(E::FormatName { found: self.name.clone() });
        }
        if !READABLE_VERSIONS.contains(&self.version) {
            return Err(E::UnsupportedVersion { found: self.version, readable: READABLE_VERSIONS.to_vec() });
        }
        Ok(())
    }
}

impl Default for FormatTag {
    fn default() -> Self {
        Self { name: FORMAT_NAME.to_owned(), version: FORMAT_VERSION }
    }
}

/// Where the core was produced. Replay checks `sm` and `driver_version` against the device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Context {
    /// Compute capability as major*10 + minor (90 for sm_90).
    pub sm: u32,
    pub device_name: String,
    /// As `cuDriverGetVersion` reports it (13000 for CUDA 13.0).
    pub driver_version: u32,
    pub tp_rank: u32,
    pub tp_world_size: u32,
    pub producer: Producer,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Producer {
    pub name: String,
    pub version: String,
    pub commit: String,
}

/// The fixed-address arena: one contiguous virtual range, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Arena {
    /// Virtual address of the arena's first byte.
    pub base: u64,
    pub size: u64,
    /// Largest shard; a multiple of `granularity`.
    pub shard_cap: u64,
    /// The driver's allocation granularity (`cuMemGetAllocationGranularity`).
    pub granularity: u64,
}

/// One contiguous piece of the arena: one reservation, one allocation, one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Shard {
    pub index: u32,
    /// Offset from `arena.base`.
    pub offset: u64,
    pub size: u64,
    /// Path relative to the core directory.
    pub file: String,
    /// (v1, v2) SHA-256 of the whole file, lowercase hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// (v3) A digest of each fixed-size chunk of the file, so chunks are verified apart,
    /// in parallel, on the bytes that are uploaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Chunks>,
}

/// (v3) The XXH3-128 of each `bytes`-long chunk of a shard file, in file order; the last
/// chunk may be shorter, and an empty file has none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Chunks {
    pub bytes: u64,
    #[serde(rename = "xxh3-128")]
    pub xxh3_128: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Buffer {
    pub name: String,
    /// Offset from `arena.base`.
    pub offset: u64,
    pub size: u64,
    pub role: BufferRole,
    /// (v2) Whether the shards hold this buffer's bytes; v1 stores everything.
    #[serde(default, skip_serializing_if = "BufferContents::is_stored")]
    pub contents: BufferContents,
}

/// The buffer of `sorted` (ordered by offset, not overlapping) that holds arena offset
/// `offset`, found by binary search.
pub fn buffer_at<B: std::borrow::Borrow<Buffer>>(sorted: &[B], offset: u64) -> Option<&Buffer> {
    let after = sorted.partition_point(|b| b.borrow().offset <= offset);
    let b = sorted.get(after.checked_sub(1)?)?.borrow();
    (offset - b.offset < b.size).then_some(b)
}

/// What a buffer holds when the core is loaded (v2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferContents {
    /// Its bytes are in the shard files.
    #[default]
    Stored,
    /// All zero: not in the shard files; replay zeroes it.
    Zero,
    /// Nothing anyone may read before writing (scratch, a KV cache): not in the shard
    /// files; replay leaves it poisoned.
    Undefined,
}

impl BufferContents {
    pub fn is_stored(&self) -> bool {
        *self == BufferContents::Stored
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferRole {
    Input,
    Output,
    Weight,
    Scratch,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Module {
    pub id: String,
    pub kind: ModuleKind,
    pub file: String,
    pub sha256: String,
    pub functions: Vec<Function>,
    /// (v3) Where the image came from, when a recorder saw it loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

/// (v3) The shared object that had the driver load a module, as the recorder saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Provenance {
    /// Its file name, `libcublasLt.so.13` and the like.
    pub library: String,
    /// Its version, where the file name or its installed package says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The image was compiled in the exporting process (NVRTC, Triton), not shipped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub runtime_compiled: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModuleKind {
    Ptx,
    Cubin,
}

/// A kernel and its parameter layout, as `cuFuncGetParamInfo` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Function {
    pub name: String,
    pub params: Vec<ParamSlot>,
    /// (v2) What replay sets with `cuFuncSetAttribute` before it builds any node.
    #[serde(default, skip_serializing_if = "FunctionAttributes::is_unset")]
    pub attributes: FunctionAttributes,
}

/// Function attributes a launch depends on, as the driver reported them at export (v2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FunctionAttributes {
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`: needed above 48 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_dynamic_shared_size_bytes: Option<u32>,
    /// `CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`: a percentage, or -1 for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_shared_memory_carveout: Option<i32>,
    /// `CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH`, `_HEIGHT`, `_DEPTH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_cluster_dim: Option<[u32; 3]>,
    /// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_portable_cluster_size_allowed: Option<bool>,
    /// `CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_scheduling_policy: Option<ClusterScheduling>,
}

impl FunctionAttributes {
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterScheduling {
    Default,
    Spread,
    LoadBalancing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemSyncDomain {
    Default,
    Remote,
}

impl Function {
    /// Bytes a kernel node's parameter blob must hold: the end of the last slot.
    pub fn param_bytes(&self) -> u64 {
        self.params.iter().map(|p| p.offset.saturating_add(p.size)).max().unwrap_or(0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ParamSlot {
    pub offset: u64,
    pub size: u64,
}

/// One captured graph: its nodes, edges and instantiation flags.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Template {
    pub name: String,
    pub flags: RecordedFlags,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    /// Node ids in the order capture created them.
    pub capture_order: Vec<String>,
}

/// Exactly one of the two fields is set: flags come from exactly one source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RecordedFlags {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explicit: Option<u64>,
    /// Flags read back from a live executable that was instantiated with the same value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_executable: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Node {
    pub id: String,
    pub op: NodeOp,
}

/// Read by hand (`fast_parse.rs`): `kind` first is read without buffering the object.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum NodeOp {
    Kernel(KernelNode),
    Memset(MemsetNode),
    Memcpy(MemcpyNode),
    Empty,
    EventRecord { event: String },
    EventWait { event: String },
}

impl NodeOp {
    pub fn kind(&self) -> &'static str {
        match self {
            NodeOp::Kernel(_) => "kernel",
            NodeOp::Memset(_) => "memset",
            NodeOp::Memcpy(_) => "memcpy",
            NodeOp::Empty => "empty",
            NodeOp::EventRecord { .. } => "event-record",
            NodeOp::EventWait { .. } => "event-wait",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct KernelNode {
    pub module: String,
    pub function: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: u32,
    /// Parameter bytes laid out per the function's recorded slots, lowercase hex.
    #[serde(with = "lower_hex")]
    pub params: Vec<u8>,
    /// Which parameters hold device pointers.
    #[serde(default)]
    pub pointers: Vec<PointerParam>,
    /// (v2) Launch attributes of the captured node, restored on the rebuilt one.
    #[serde(default, skip_serializing_if = "LaunchAttributes::is_unset")]
    pub launch: LaunchAttributes,
}

/// A kernel node's launch attributes (`cuGraphKernelNodeGetAttribute`), each recorded
/// only where it differs from the driver's default (v2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct LaunchAttributes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_dim: Option<[u32; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_scheduling_policy: Option<ClusterScheduling>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooperative: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_sync_domain: Option<MemSyncDomain>,
}

impl LaunchAttributes {
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PointerParam {
    /// Index into the function's `params`.
    pub param: u32,
    /// (v2) Byte offset of the address inside the parameter (a struct, a tensor map).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub at: u64,
    /// The pointer targets memory outside the arena. Refused: replay maps only the arena.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct BufferRef {
    pub buffer: String,
    #[serde(default)]
    pub offset: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct MemsetNode {
    pub dst: BufferRef,
    pub value: u32,
    /// 1, 2 or 4.
    pub element_size: u32,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct MemcpyNode {
    pub src: BufferRef,
    pub dst: BufferRef,
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Edge {
    pub from: String,
    pub to: String,
    /// (v2) What the dependency waits for; v1 edges are all `full`.
    #[serde(default, skip_serializing_if = "EdgeKind::is_full")]
    pub kind: EdgeKind,
}

/// The type and port of a dependency (`CUgraphEdgeData`), v2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeKind {
    /// The whole upstream node completes first.
    #[default]
    Full,
    /// Programmatic dependent launch: the downstream kernel may start once every block
    /// of the upstream kernel has triggered (or exited).
    Programmatic,
    /// The downstream kernel may start once the upstream kernel has started.
    LaunchOrder,
}

impl EdgeKind {
    pub fn is_full(&self) -> bool {
        *self == EdgeKind::Full
    }
}

/// What replaying one template must produce.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Expectation {
    pub template: String,
    pub outputs: Vec<OutputDigest>,
    /// Name of a CPU reference the harness knows, when one exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Largest allowed absolute difference from the CPU reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
    /// (v3) How long the template's launches took in the producing process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<Speed>,
}

/// Launches of one template timed by CUDA events around the launch alone, each from the
/// loaded state, after a warm-up: what a restored template is held to (v3).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Speed {
    pub launches: u32,
    pub median_us: f64,
    /// The 90th percentile less the 10th: how much the launches' times spread.
    pub spread_us: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct OutputDigest {
    pub buffer: String,
    /// The digest of the output after the original run's first launch.
    pub sha256: String,
    /// (v3) How the output varied over the original run's launches, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variation: Option<Variation>,
    /// (v3) What the output's elements are, where the exporter knows: a judge counts a
    /// float output whose elements are all NaN or infinite, or all alike, as not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<crate::spread::Element>,
}

/// An output that launches of the original run, each from the same state, did not give
/// bit for bit alike (a kernel that is not reproducible), and how far apart they were.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Variation {
    pub element: crate::spread::Element,
    /// Launches the original run compared.
    pub launches: u32,
    /// Every other digest those launches gave.
    pub sha256s: Vec<String>,
    /// The widest spread of any launch from the first, in absolute value and ULP (the
    /// ULP distance describes; it is no tolerance).
    pub max_abs: f64,
    pub max_ulp: u64,
    /// Of the output's elements, the largest fraction one launch changed.
    pub differing_fraction: f64,
    /// `|x − first| ≤ atol + rtol·|first|` held every element of every launch: the
    /// envelope, fitted to the launches, that a judge widens by its margin. Both or
    /// neither; a core written before them is judged with `atol = max-abs`, `rtol = 0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atol: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    /// The varying output whose spread (envelope and fraction) this one takes: its own
    /// launches gave one digest, but its template runs a kernel found to vary in that
    /// output's template, so it may vary too. `sha256s` is then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_of: Option<OutputRef>,
    /// The first launch's bytes (their digest is the output's `sha256`), which a replayed
    /// output no launch gave is held to within the tolerance.
    pub file: String,
    /// Nodes found to give different results from the same inputs, in capture order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Each other digest's launch, in the order of `sha256s`: how far it lay from the first
    /// as a whole. Empty in a core written before distances, and where the spread is
    /// another output's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distances: Vec<crate::spread::Distance>,
    /// Where the output holds logits (rows over a vocabulary, as the exporter was told),
    /// each row's argmax over the launches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<crate::spread::Tokens>,
}

impl Variation {
    /// The envelope a judge widens by its margin: the recorded one, or for a core written
    /// before envelopes, the largest absolute difference alone.
    pub fn envelope(&self) -> crate::spread::Envelope {
        crate::spread::Envelope { atol: self.atol.unwrap_or(self.max_abs), rtol: self.rtol.unwrap_or(0.0) }
    }

    /// What a judge with `margin` lets an output no launch gave be.
    pub fn allowance(&self, margin: f64) -> crate::spread::Allowance {
        crate::spread::Allowance::widened(self.envelope(), self.differing_fraction, margin)
    }

    /// What a replay's distances from the first launch may reach (`None` where none are
    /// recorded).
    pub fn bounds(&self) -> Option<crate::spread::Bounds> {
        crate::spread::Bounds::of(&self.distances)
    }
}

/// One output of one template.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct OutputRef {
    pub template: String,
    pub buffer: String,
}

/// A map whose every key is given once: a key twice is refused, as a struct's field twice
/// is, where a plain map would keep the last.
mod unique_keys {
    use std::{collections::BTreeMap, fmt, marker::PhantomData};

    use serde::{
        de::{Error, MapAccess, Visitor},
        Deserialize, Deserializer,
    };

    pub fn deserialize<'de, D: Deserializer<'de>, V: Deserialize<'de>>(d: D) -> Result<BTreeMap<String, V>, D::Error> {
        d.deserialize_map(Unique(PhantomData))
    }

    struct Unique<V>(PhantomData<V>);

    impl<'de, V: Deserialize<'de>> Visitor<'de> for Unique<V> {
        type Value = BTreeMap<String, V>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of names, each once")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut found = BTreeMap::new();
            while let Some((key, value)) = map.next_entry::<String, V>()? {
                if found.contains_key(&key) {
                    return Err(A::Error::custom(format_args!("duplicate key `{key}`")));
                }
                found.insert(key, value);
            }
            Ok(found)
        }
    }
}

/// Bytes as lowercase hex, the one spelling the format writes; uppercase is refused, so a
/// core has one text for one content.
mod lower_hex {
    use std::fmt;

    use serde::{
        de::{Error, Visitor},
        Deserializer, Serializer,
    };

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(bytes))
    }

    /// Decoded from the text the parser hands over, not from a copy of it, into a buffer
    /// of its final size, with SIMD (`faster_hex`): parameter bytes are most of a large
    /// manifest's text. A text it refuses is decoded again by `hex` for the error, which
    /// names the character and its place.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_str(LowerHex)
    }

    struct LowerHex;

    impl Visitor<'_> for LowerHex {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("parameter bytes in lowercase hexadecimal")
        }

        fn visit_str<E: Error>(self, text: &str) -> Result<Vec<u8>, E> {
            // A fold, not `any`: without the early exit the scan is vectorised.
            if text.bytes().fold(false, |upper, b| upper | b.is_ascii_uppercase()) {
                return Err(E::custom("parameter bytes must be lowercase hexadecimal"));
            }
            let mut bytes = vec![0; text.len() / 2];
            match faster_hex::hex_decode(text.as_bytes(), &mut bytes) {
                Ok(()) => Ok(bytes),
                Err(refused) => Err(match hex::decode_to_slice(text, &mut bytes) {
                    Err(named) => E::custom(named),
                    Ok(()) => E::custom(refused),
                }),
            }
        }
    }
}
