//! Export: from retained templates (never executables) and a fixed-address arena, write a
//! core. The caller captures; this module snapshots the arena into shards, turns each
//! template's nodes into manifest nodes, and writes modules and the manifest last.

use std::{collections::HashMap, path::Path};

use crate::{
    cuda::{ArenaMapping, Context, NodeKind, RetainedGraph},
    errors::ExportError,
    format::{
        Arena, Buffer, BufferRef, Context as CoreContext, CoreWriter, Edge, Expectation, FormatTag, Function,
        KernelNode, Manifest, MemcpyNode, MemsetNode, Module, ModuleKind, Node, NodeOp, PointerParam, RecordedFlags,
        Shard, Template,
    },
    shards::{plan, ShardCap},
    validate,
};

/// Bytes read back from the device and written per step of a snapshot.
const SNAPSHOT_CHUNK: u64 = 64 << 20;

/// A compiled module the core will carry: its id, PTX text and the functions it exports.
pub struct ModuleImage {
    pub id: String,
    pub ptx: String,
    pub functions: Vec<crate::cuda::Function>,
}

/// Builds a core directory step by step.
pub struct Exporter {
    writer: CoreWriter,
    manifest: Manifest,
    /// Function name → module id.
    function_modules: HashMap<String, String>,
}

impl Exporter {
    pub fn new(
        dir: &Path,
        context: CoreContext,
        arena: Arena,
        buffers: Vec<Buffer>,
        modules: &[ModuleImage],
    ) -> Result<Self, ExportError> {
        let writer = CoreWriter::create(dir)?;
        let mut function_modules = HashMap::new();
        let mut manifest_modules = Vec::new();
        for m in modules {
            let file = format!("modules/{}.ptx", m.id);
            let sha256 = writer.write_file(&file, m.ptx.as_bytes())?;
            let functions =
                m.functions.iter().map(|f| Function { name: f.name().into(), params: f.layout().to_vec() }).collect();
            for f in &m.functions {
                function_modules.insert(f.name().to_owned(), m.id.clone());
            }
            manifest_modules.push(Module { id: m.id.clone(), kind: ModuleKind::Ptx, file, sha256, functions });
        }
        let manifest = Manifest {
            format: FormatTag::default(),
            context,
            arena,
            shards: Vec::new(),
            buffers,
            modules: manifest_modules,
            templates: Vec::new(),
            expectations: Vec::new(),
        };
        Ok(Self { writer, manifest, function_modules })
    }

    /// Writes the arena's current contents as shards under the cap, a chunk at a time, so
    /// host memory stays one chunk whatever the arena; returns the bytes written and the
    /// seconds it took.
    pub fn snapshot(&mut self, ctx: &Context, _mapping: &ArenaMapping) -> Result<(u64, f64), ExportError> {
        let started = std::time::Instant::now();
        let a = self.manifest.arena;
        let cap = ShardCap::new(a.shard_cap, a.granularity).map_err(crate::errors::ValidationError::from)?;
        let spans = plan(a.size, cap).map_err(crate::errors::ValidationError::from)?;
        for span in spans {
            let file = format!("shards/{:04}.bin", span.index);
            let sha256 = self.writer.write_chunks(&file, span.size, SNAPSHOT_CHUNK, |offset, len| {
                // SAFETY: the chunk lies inside the span, inside the arena `_mapping` keeps mapped.
                unsafe { ctx.read(a.base + span.offset + offset, len) }.map_err(ExportError::from)
            })?;
            self.manifest.shards.push(Shard { index: span.index, offset: span.offset, size: span.size, file, sha256 });
        }
        Ok((a.size, started.elapsed().as_secs_f64()))
    }

    /// Records a retained template: its nodes as the driver reports them, edges, and flags.
    pub fn template(&mut self, name: &str, graph: &RetainedGraph, flags: RecordedFlags) -> Result<(), ExportError> {
        let driver_nodes = graph.nodes()?;
        let ids: Vec<String> = (0..driver_nodes.len()).map(|i| format!("n{i}")).collect();
        let nodes = driver_nodes
            .into_iter()
            .map(|n| Ok(Node { id: ids[n.id.0].clone(), op: self.node_op(name, n.kind)? }))
            .collect::<Result<Vec<_>, ExportError>>()?;
        let edges =
            graph.edges()?.into_iter().map(|(f, t)| Edge { from: ids[f.0].clone(), to: ids[t.0].clone() }).collect();
        self.manifest.templates.push(Template { name: name.into(), flags, nodes, edges, capture_order: ids });
        Ok(())
    }

    pub fn expect(&mut self, expectation: Expectation) {
        self.manifest.expectations.push(expectation);
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Validates the manifest, then writes it; a core this exporter cannot validate is
    /// never written.
    pub fn finish(self) -> Result<Manifest, ExportError> {
        validate::manifest(&self.manifest)?;
        self.writer.write_manifest(&self.manifest)?;
        Ok(self.manifest)
    }

    fn node_op(&self, template: &str, kind: NodeKind) -> Result<NodeOp, ExportError> {
        let fail = |what: String| ExportError::Node { template: template.into(), what };
        Ok(match kind {
            NodeKind::Kernel { function, grid, block, shared_mem, params, layout } => {
                let module = self
                    .function_modules
                    .get(&function)
                    .ok_or_else(|| fail(format!("function `{function}` is in no exported module")))?;
                let pointers = self.pointer_params(&layout, &params);
                NodeOp::Kernel(KernelNode {
                    module: module.clone(),
                    function,
                    grid,
                    block,
                    shared_mem_bytes: shared_mem,
                    params,
                    pointers,
                })
            }
            NodeKind::Memset { dst, value, element_size, count } => NodeOp::Memset(MemsetNode {
                dst: self.buffer_ref(dst).ok_or_else(|| fail(format!("memset at 0x{dst:x} outside the arena")))?,
                value,
                element_size,
                count,
            }),
            NodeKind::Memcpy { dst, src, bytes } => {
                let lookup = |a: u64| {
                    self.buffer_ref(a).ok_or_else(|| fail(format!("memcpy touches 0x{a:x}, outside the arena")))
                };
                NodeOp::Memcpy(MemcpyNode { src: lookup(src)?, dst: lookup(dst)?, bytes })
            }
            NodeKind::Empty => NodeOp::Empty,
            NodeKind::Other(kind) => return Err(fail(format!("a {kind} node cannot be exported"))),
        })
    }

    /// Eight-byte parameters whose value lies in a buffer are recorded as pointers. (A
    /// double whose bits fall inside the arena would be a denormal near 1e-310.)
    fn pointer_params(&self, layout: &[crate::format::ParamSlot], params: &[u8]) -> Vec<PointerParam> {
        layout
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.size == 8)
            .filter(|(_, slot)| {
                let raw = &params[slot.offset as usize..slot.offset as usize + 8];
                self.buffer_ref(u64::from_le_bytes(raw.try_into().expect("8 bytes"))).is_some()
            })
            .map(|(i, _)| PointerParam { param: i as u32, external: false })
            .collect()
    }

    fn buffer_ref(&self, address: u64) -> Option<BufferRef> {
        let offset = address.checked_sub(self.manifest.arena.base)?;
        let b = self.manifest.buffers.iter().find(|b| b.offset <= offset && offset < b.offset + b.size)?;
        Some(BufferRef { buffer: b.name.clone(), offset: offset - b.offset })
    }
}
