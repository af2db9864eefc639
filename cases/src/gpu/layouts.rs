//! `gpu/param-layout/`: for kernels with awkward parameter layouts, the parameter bytes
//! read back from a captured node (per the driver's layout) rebuild a launch whose output
//! equals the original's, bit for bit, and the CPU reference.

use gnomon_format::{errors::ParamError, params::ParamBlob};

use gnomon_core::{
    cuda::{Function, RetainedGraph},
    translate::{param_slots, Instantiate},
};
use gnomon_fixtures::{
    kernels::{gemm_shape, KernelSource, GEMM, LAYOUTS},
    reference::{from_bytes, gemm, max_abs_diff, pattern, to_bytes},
};

use super::Gpu;
use crate::{accepted, ensure, Case, Ctx, Verdict};

const CLAIM: &str = "param-layout";

/// One kernel, how to fill its parameters given the output address, its launch shape,
/// what it must produce, and the inputs it reads.
struct LayoutFixture {
    kernels: KernelSource,
    function: &'static str,
    grid: [u32; 3],
    block: [u32; 3],
    params: fn(&[gnomon_format::ParamSlot], &Inputs) -> Result<Vec<u8>, ParamError>,
    expected: fn() -> Vec<f32>,
}

/// Device addresses a fixture's parameters may point at.
struct Inputs {
    out: u64,
    a: u64,
    b: u64,
}

const GEMM_DIM: usize = 48;

fn fixtures() -> Vec<(&'static str, LayoutFixture)> {
    vec![
        (
            "awkward-scalars",
            LayoutFixture {
                kernels: LAYOUTS,
                function: "awkward_scalars",
                grid: [1, 1, 1],
                block: [32, 1, 1],
                params: |l, i| {
                    let blob = ParamBlob::new(l)
                        .set(0, &1.5f32.to_le_bytes())?
                        .ptr(1, i.out)?
                        .set(2, &(-7i32).to_le_bytes())?;
                    Ok(blob.set(3, &2.25f64.to_le_bytes())?.set(4, &[65u8])?.into_bytes())
                },
                expected: || vec![1.5, -7.0, 2.25, 65.0],
            },
        ),
        (
            "aligned16",
            LayoutFixture {
                kernels: LAYOUTS,
                function: "aligned16",
                grid: [1, 1, 1],
                block: [32, 1, 1],
                params: |l, i| {
                    let mut s = to_bytes(&[1.0, 2.0, 3.0, 4.0]);
                    s.extend(5i32.to_le_bytes());
                    s.resize(32, 0);
                    Ok(ParamBlob::new(l).set(0, &[3u8])?.set(1, &s)?.ptr(2, i.out)?.into_bytes())
                },
                expected: || vec![1.0, 2.0, 3.0, 4.0, 8.0],
            },
        ),
        (
            "large-struct",
            LayoutFixture {
                kernels: LAYOUTS,
                function: "large_struct",
                grid: [1, 1, 1],
                block: [128, 1, 1],
                params: |l, i| {
                    let mut big = to_bytes(&(0..100).map(|v| v as f32 * 0.25).collect::<Vec<_>>());
                    big.extend(100i32.to_le_bytes());
                    Ok(ParamBlob::new(l).set(0, &big)?.ptr(1, i.out)?.into_bytes())
                },
                expected: || (0..100).map(|v| v as f32 * 0.5).collect(),
            },
        ),
        (
            "gemm-struct",
            LayoutFixture {
                kernels: GEMM,
                function: "gemm_tiled",
                grid: [(GEMM_DIM as u32).div_ceil(16), (GEMM_DIM as u32).div_ceil(16), 1],
                block: [16, 16, 1],
                params: |l, i| {
                    let d = GEMM_DIM as i32;
                    Ok(ParamBlob::new(l)
                        .set(0, &gemm_shape(d, d, d, 1.0, 0.0))?
                        .ptr(1, i.a)?
                        .ptr(2, i.b)?
                        .ptr(3, i.out)?
                        .into_bytes())
                },
                expected: || {
                    let mut c = vec![0.0; GEMM_DIM * GEMM_DIM];
                    gemm([GEMM_DIM; 3], 1.0, 0.0, &gemm_a(), &gemm_b(), &mut c);
                    c
                },
            },
        ),
    ]
}

fn gemm_a() -> Vec<f32> {
    pattern(GEMM_DIM * GEMM_DIM, 11)
}

fn gemm_b() -> Vec<f32> {
    pattern(GEMM_DIM * GEMM_DIM, 12)
}

pub fn cases() -> Vec<Case> {
    fixtures()
        .into_iter()
        .map(|(slug, fixture)| Case::gpu(&format!("gpu/param-layout/{slug}"), CLAIM, move |ctx| run(&fixture, ctx)))
        .collect()
}

fn run(f: &LayoutFixture, ctx: &mut Ctx) -> Result<(), Verdict> {
    let gpu = Gpu::open()?;
    let module = gpu.module(f.kernels)?;
    let function = gpu.function(&module, f.function)?;
    let expected = (f.expected)();
    let alloc = |bytes: usize| gpu.ctx.alloc(bytes as u64).map_err(|e| Verdict::Blocked(e.to_string()));
    let (out, a, b) = (alloc(expected.len() * 4)?, alloc(GEMM_DIM * GEMM_DIM * 4)?, alloc(GEMM_DIM * GEMM_DIM * 4)?);
    let upload = |buf: &gnomon_core::cuda::DeviceBuffer, v: Vec<f32>| {
        buf.upload(&to_bytes(&v)).map_err(|e| Verdict::Blocked(e.to_string()))
    };
    upload(&a, gemm_a())?;
    upload(&b, gemm_b())?;
    let inputs = Inputs { out: out.ptr(), a: a.ptr(), b: b.ptr() };
    let params = (f.params)(&param_slots(function.layout()), &inputs)
        .map_err(|e| Verdict::Blocked(format!("fixture parameters: {e}")))?;
    ctx.metric("param-count", function.layout().len() as f64, "1");
    ctx.metric("param-bytes", params.len() as f64, "B");

    let original = accepted(gpu.stream.capture(|s| s.launch(&function, f.grid, f.block, 0, &params)), "capture")?;
    let first = launch_and_read(&gpu, &original, &out)?;
    let recorded = recorded_params(&original)?;
    ensure(recorded == params, || "the parameter bytes read back differ from those launched".into())?;

    accepted(out.upload(&vec![0u8; expected.len() * 4]), "clear output")?;
    let rebuilt = rebuild(&gpu, &function, f, &recorded)?;
    let second = launch_and_read(&gpu, &rebuilt, &out)?;
    ensure(first == second, || "the rebuilt launch's output differs from the original's".into())?;
    let diff = max_abs_diff(&from_bytes(&first), &expected).unwrap_or(f32::INFINITY);
    ctx.metric("max-abs-diff-vs-cpu", diff as f64, "1");
    ensure(diff <= 1e-4, || format!("output differs from the CPU reference by up to {diff}"))
}

fn launch_and_read(
    gpu: &Gpu,
    graph: &RetainedGraph,
    out: &gnomon_core::cuda::DeviceBuffer,
) -> Result<Vec<u8>, Verdict> {
    let exec = accepted(graph.instantiate(0), "instantiate")?;
    accepted(exec.launch(&gpu.stream).and_then(|_| gpu.stream.synchronize()), "launch")?;
    accepted(out.download(), "read output")
}

/// The parameter bytes of the template's only kernel node, as recorded from the driver.
fn recorded_params(graph: &RetainedGraph) -> Result<Vec<u8>, Verdict> {
    let nodes = accepted(graph.nodes(), "read back nodes")?;
    match nodes.as_slice() {
        [node] => match &node.kind {
            gnomon_core::cuda::NodeKind::Kernel { params, .. } => Ok(params.clone()),
            other => Err(Verdict::Failed(format!("captured node is {other:?}, not a kernel"))),
        },
        _ => Err(Verdict::Failed(format!("captured {} nodes, expected 1", nodes.len()))),
    }
}

fn rebuild(gpu: &Gpu, function: &Function, f: &LayoutFixture, params: &[u8]) -> Result<RetainedGraph, Verdict> {
    let mut graph = accepted(RetainedGraph::empty(&gpu.ctx), "create graph")?;
    accepted(graph.add_kernel(function, f.grid, f.block, 0, params, &[]), "add kernel node")?;
    Ok(graph)
}
