//! Native replay of a validated core: check the context, map the arena at its exact
//! addresses, upload the shards, load modules and check every function's parameter
//! layout, rebuild the templates, instantiate them with the recorded flags (or take
//! executables handed over live), launch, and digest the outputs. Each stage is timed.

use std::{collections::HashMap, fs, time::Instant};

use crate::{
    contract::ReplayPlan,
    cuda::{ArenaMapping, Context, Function, GraphExec, Module, NodeId, RetainedGraph, Stream},
    errors::ReplayError,
    format::{hash_hex, Core, Manifest, NodeOp, Template},
    validate::recorded_flags,
};

/// Seconds per stage, in the order they ran.
pub type StageTimes = Vec<(&'static str, f64)>;

/// One output buffer after one launch of its template.
#[derive(Clone, Debug)]
pub struct OutputCheck {
    pub template: String,
    pub buffer: String,
    pub expected_sha256: String,
    pub actual_sha256: String,
    pub bytes: Vec<u8>,
}

impl OutputCheck {
    pub fn matches(&self) -> bool {
        self.expected_sha256 == self.actual_sha256
    }
}

#[derive(Debug)]
pub struct ReplayReport {
    pub stages: StageTimes,
    pub outputs: Vec<OutputCheck>,
    /// The shards as read for upload: `(offset in the arena, bytes)`, in order.
    initial: Vec<(u64, Vec<u8>)>,
}

impl ReplayReport {
    /// `len` bytes of the arena's initial contents at `offset`, as the shards held them.
    pub fn initial_bytes(&self, offset: u64, len: u64) -> Vec<u8> {
        let end = offset + len;
        let mut out = Vec::with_capacity(len as usize);
        for (start, bytes) in &self.initial {
            let stop = start + bytes.len() as u64;
            if *start < end && offset < stop {
                out.extend_from_slice(&bytes[(offset.max(*start) - start) as usize..(end.min(stop) - start) as usize]);
            }
        }
        out
    }
}

/// How replay gets its executables.
pub enum Executables {
    /// Rebuild every template and instantiate it with the recorded flags.
    Rebuild,
    /// Direct handover: live executables from the exporter, one per template, already
    /// instantiated; the arena is already mapped in this process.
    Handed(Vec<GraphExec>),
}

/// A mapped arena with the shard bytes that restore it.
pub struct Arena {
    _mapping: Option<ArenaMapping>,
    initial: Vec<(u64, Vec<u8>)>,
}

pub fn replay(core: &Core, ctx: &Context, executables: Executables) -> Result<ReplayReport, ReplayError> {
    let m = core.manifest();
    let mut stages = StageTimes::new();
    let mut timed = |name, started: Instant| stages.push((name, started.elapsed().as_secs_f64()));
    check_context(m, ctx)?;
    let handed = matches!(executables, Executables::Handed(_));
    let started = Instant::now();
    let mapping = if handed { None } else { Some(map_arena(m, ctx)?) };
    timed("reserve-and-map", started);
    let started = Instant::now();
    let mut arena = Arena { _mapping: mapping, initial: read_shards(core)? };
    restore(ctx, &arena)?;
    timed("upload", started);
    let plan = match executables {
        Executables::Handed(execs) => plan(m, execs)?,
        Executables::Rebuild => {
            let started = Instant::now();
            let functions = load_modules(core, ctx)?;
            timed("module-load", started);
            let started = Instant::now();
            let templates =
                m.templates.iter().map(|t| rebuild(ctx, m, t, &functions)).collect::<Result<Vec<_>, _>>()?;
            timed("rebuild", started);
            let started = Instant::now();
            let execs =
                m.templates.iter().zip(&templates).map(|(t, g)| instantiate(t, g)).collect::<Result<Vec<_>, _>>()?;
            timed("instantiate", started);
            plan(m, execs)?
        }
    };
    let stream = ctx.stream()?;
    let (outputs, first_launch) = launch_all(ctx, m, &arena, &plan, &stream)?;
    stages.push(("first-launch", first_launch));
    let base = m.arena.base;
    let initial =
        std::mem::take(&mut arena.initial).into_iter().map(|(address, bytes)| (address - base, bytes)).collect();
    Ok(ReplayReport { stages, outputs, initial })
}

fn check_context(m: &Manifest, ctx: &Context) -> Result<(), ReplayError> {
    if m.context.sm != ctx.info().sm {
        let (core, device) = (format!("sm_{}", m.context.sm), ctx.info().arch());
        return Err(ReplayError::ContextMismatch { what: "SM", core, device });
    }
    let driver = crate::cuda::driver_version()?;
    if driver < m.context.driver_version {
        let (core, device) = (m.context.driver_version.to_string(), driver.to_string());
        return Err(ReplayError::ContextMismatch { what: "driver version", core, device });
    }
    Ok(())
}

fn map_arena(m: &Manifest, ctx: &Context) -> Result<ArenaMapping, ReplayError> {
    let shards: Vec<(u64, u64)> = m.shards.iter().map(|s| (m.arena.base + s.offset, s.size)).collect();
    Ok(ArenaMapping::map(ctx, &shards)?)
}

/// Reads every shard file, checking its hash again (the file may have changed since the
/// core was opened).
fn read_shards(core: &Core) -> Result<Vec<(u64, Vec<u8>)>, ReplayError> {
    let m = core.manifest();
    m.shards
        .iter()
        .map(|s| {
            let io = |source| ReplayError::Shard { index: s.index, file: s.file.clone(), source };
            let bytes = fs::read(core.path_of(&s.file)).map_err(io)?;
            let changed = || std::io::Error::other("changed since the core was validated");
            if bytes.len() as u64 != s.size || hash_hex(&bytes[..]).map_err(io)? != s.sha256 {
                return Err(io(changed()));
            }
            Ok((m.arena.base + s.offset, bytes))
        })
        .collect()
}

/// Writes the shards' bytes back into the arena.
fn restore(ctx: &Context, arena: &Arena) -> Result<(), ReplayError> {
    for (address, bytes) in &arena.initial {
        // SAFETY: each range is a shard of a validated core, mapped by `map_arena` or, for
        // handed executables, by the exporter in this process.
        unsafe { ctx.write(*address, bytes) }?;
    }
    Ok(())
}

/// Loads every module and checks each recorded layout against the driver's.
fn load_modules(core: &Core, ctx: &Context) -> Result<HashMap<(String, String), Function>, ReplayError> {
    let mut functions = HashMap::new();
    for module in &core.manifest().modules {
        let image = fs::read(core.path_of(&module.file))
            .map_err(|e| crate::errors::CudaError::Unsupported(format!("read module `{}`: {e}", module.id)))?;
        let loaded = Module::load(ctx, &image)?;
        for f in &module.functions {
            let function = loaded.function(&f.name)?;
            if function.layout() != f.params.as_slice() {
                let pairs = |slots: &[crate::format::ParamSlot]| slots.iter().map(|s| (s.offset, s.size)).collect();
                return Err(ReplayError::LayoutMismatch {
                    module: module.id.clone(),
                    function: f.name.clone(),
                    recorded: pairs(&f.params),
                    driver: pairs(function.layout()),
                });
            }
            functions.insert((module.id.clone(), f.name.clone()), function);
        }
    }
    Ok(functions)
}

/// Rebuilds one template node by node in a topological order of its edges.
fn rebuild(
    ctx: &Context,
    m: &Manifest,
    t: &Template,
    functions: &HashMap<(String, String), Function>,
) -> Result<RetainedGraph, ReplayError> {
    let mut graph = RetainedGraph::empty(ctx)?;
    let mut added: HashMap<&str, NodeId> = HashMap::new();
    for node in topological(t) {
        let deps: Vec<NodeId> = t.edges.iter().filter(|e| e.to == node.id).map(|e| added[e.from.as_str()]).collect();
        let address = |r: &crate::format::BufferRef| {
            let b = m.buffers.iter().find(|b| b.name == r.buffer).expect("validated buffer reference");
            m.arena.base + b.offset + r.offset
        };
        let id = match &node.op {
            NodeOp::Kernel(k) => {
                let f = &functions[&(k.module.clone(), k.function.clone())];
                graph.add_kernel(f, k.grid, k.block, k.shared_mem_bytes, &k.params, &deps)?
            }
            // SAFETY: validation put both ranges inside buffers of the mapped arena.
            NodeOp::Memset(s) => unsafe { graph.add_memset(address(&s.dst), s.value, s.element_size, s.count, &deps)? },
            NodeOp::Memcpy(c) => unsafe { graph.add_memcpy(address(&c.dst), address(&c.src), c.bytes, &deps)? },
            NodeOp::Empty => graph.add_empty(&deps)?,
            other => {
                return Err(ReplayError::UnsupportedNode {
                    template: t.name.clone(),
                    node: node.id.clone(),
                    kind: other.kind(),
                })
            }
        };
        added.insert(&node.id, id);
    }
    Ok(graph)
}

/// Nodes in an order where every edge points forward; validation guarantees a DAG.
fn topological(t: &Template) -> Vec<&crate::format::Node> {
    let index: HashMap<&str, usize> = t.nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();
    let mut in_degree = vec![0usize; t.nodes.len()];
    for e in &t.edges {
        in_degree[index[e.to.as_str()]] += 1;
    }
    let mut ready: Vec<usize> = (0..t.nodes.len()).rev().filter(|&i| in_degree[i] == 0).collect();
    let mut order = Vec::with_capacity(t.nodes.len());
    while let Some(i) = ready.pop() {
        order.push(&t.nodes[i]);
        for e in t.edges.iter().filter(|e| e.from == t.nodes[i].id) {
            let to = index[e.to.as_str()];
            in_degree[to] -= 1;
            if in_degree[to] == 0 {
                ready.push(to);
            }
        }
    }
    order
}

fn instantiate(t: &Template, graph: &RetainedGraph) -> Result<GraphExec, ReplayError> {
    let flags = recorded_flags(&t.flags).expect("validated flags");
    Ok(graph.instantiate(flags.bits())?.named(&t.name))
}

fn plan(m: &Manifest, execs: Vec<GraphExec>) -> Result<ReplayPlan<GraphExec>, ReplayError> {
    let recorded: Vec<(&str, u64)> = m
        .templates
        .iter()
        .map(|t| (t.name.as_str(), recorded_flags(&t.flags).expect("validated flags").bits()))
        .collect();
    Ok(ReplayPlan::new(&recorded, execs)?)
}

/// Launches each template once from the core's initial arena state and digests its
/// outputs; returns them with the first launch's time in seconds (CUDA events).
fn launch_all(
    ctx: &Context,
    m: &Manifest,
    arena: &Arena,
    plan: &ReplayPlan<GraphExec>,
    stream: &Stream,
) -> Result<(Vec<OutputCheck>, f64), ReplayError> {
    let (start, end) = (ctx.event()?, ctx.event()?);
    let mut first_launch = None;
    let mut outputs = Vec::new();
    for (template, exec) in m.templates.iter().zip(plan.executables()) {
        restore(ctx, arena)?;
        stream.record(&start)?;
        exec.launch(stream)?;
        stream.record(&end)?;
        stream.synchronize()?;
        first_launch.get_or_insert(start.elapsed_ms(&end)? as f64 / 1e3);
        for e in m.expectations.iter().filter(|e| e.template == template.name) {
            for o in &e.outputs {
                let b = m.buffers.iter().find(|b| b.name == o.buffer).expect("validated expectation");
                // SAFETY: a buffer of the validated, mapped arena.
                let bytes = unsafe { ctx.read(m.arena.base + b.offset, b.size) }?;
                let actual_sha256 = hash_hex(&bytes[..]).expect("hashing memory cannot fail");
                outputs.push(OutputCheck {
                    template: template.name.clone(),
                    buffer: o.buffer.clone(),
                    expected_sha256: o.sha256.clone(),
                    actual_sha256,
                    bytes,
                });
            }
        }
    }
    Ok((outputs, first_launch.unwrap_or(0.0)))
}
