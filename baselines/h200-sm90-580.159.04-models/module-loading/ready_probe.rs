//! Temporary probe: where a restore's per-node time goes.
use std::{path::Path, time::Instant};

use gnomon_format::Core;

use gnomon_core::{cuda::{build_all, build_and_instantiate, Context, GraphSpec, KernelSpec, Module, NodeSpec, Overlap}, replay::{driver_us_per_node, rebuild_only, rebuild_ready, rebuild_templates}};

fn empty_floor(ctx: &Context, templates: usize, nodes: usize, how: (Overlap, usize), instantiate_alone: bool) -> f64 {
    let (module, _) = Module::compile(ctx, "e", "extern \"C\" __global__ void empty() {}").unwrap();
    let empty = module.function("empty").unwrap();
    let kernel = KernelSpec::new(&empty, [1, 1, 1], [1, 1, 1], 0, &[]).unwrap();
    let chain = || GraphSpec {
        nodes: (0..nodes).map(|i| (NodeSpec::Kernel(kernel), i.checked_sub(1).into_iter().collect())).collect(),
        typed_edges: Vec::new(),
    };
    let specs: Vec<GraphSpec> = (0..templates).map(|_| chain()).collect();
    let used = (0..templates).map(|_| vec![empty.clone()]).collect();
    if instantiate_alone {
        let graphs = unsafe { build_all(ctx, &specs, used) }.unwrap();
        let t = Instant::now();
        let execs: Vec<_> = graphs.iter().map(|g| g.instantiate(0).unwrap()).collect();
        let s = t.elapsed().as_secs_f64();
        drop(execs);
        return s / (templates * nodes) as f64 * 1e6;
    }
    let t = Instant::now();
    let ready = unsafe { build_and_instantiate(ctx, &specs, used, &vec![0; templates], how) }.ok().unwrap();
    let s = t.elapsed().as_secs_f64();
    drop(ready);
    s / (templates * nodes) as f64 * 1e6
}

fn main() {
    let dir = std::env::args().nth(1).expect("CORE");
    let ctx = Context::new(0).unwrap();
    let core = Core::open_for_upload(Path::new(&dir)).unwrap();
    let m = core.manifest();
    let nodes: usize = m.templates.iter().map(|t| t.nodes.len()).sum();
    println!("core: {} templates, {nodes} nodes", m.templates.len());
    for i in 0..3 {
        println!("floor before #{i}: {:.2} us/node", driver_us_per_node(&ctx, (Overlap::WhileBuilding, 1)).unwrap());
    }
    let t = Instant::now();
    let rebuilt = rebuild_only(&core, &ctx).unwrap();
    println!("rebuild_only (map, modules, build): {:.3} s, modules {:.3} s", t.elapsed().as_secs_f64(), rebuilt.modules_s);
    let t = Instant::now();
    let graphs = rebuild_templates(&ctx, m, &rebuilt.functions).unwrap();
    let built = t.elapsed().as_secs_f64();
    println!("build only again: {:.3} s = {:.2} us/node", built, built / nodes as f64 * 1e6);
    let t = Instant::now();
    let execs: Vec<_> = graphs.iter().map(|g| g.instantiate(0).unwrap()).collect();
    let inst = t.elapsed().as_secs_f64();
    println!("instantiate alone, one thread, flags 0: {:.3} s = {:.2} us/node", inst, inst / nodes as f64 * 1e6);
    drop(execs);
    let t = Instant::now();
    let execs: Vec<_> = graphs.iter().map(|g| g.instantiate(0).unwrap()).collect();
    let inst = t.elapsed().as_secs_f64();
    println!("instantiate alone again: {:.3} s = {:.2} us/node", inst, inst / nodes as f64 * 1e6);
    let mut per: Vec<f64> = Vec::new();
    drop(execs);
    for g in &graphs {
        let t = Instant::now();
        let e = g.instantiate(0).unwrap();
        per.push(t.elapsed().as_secs_f64() * 1e3);
        std::mem::forget(e);
    }
    println!("per-template instantiate ms (kept alive): first {:?} last {:?}", &per[..4], &per[per.len() - 4..]);
    drop(graphs);
    for how in [
        (Overlap::WhileBuilding, 1),
        (Overlap::WhileBuilding, 1),
        (Overlap::WhileBuilding, 1),
        (Overlap::WhileBuilding, 2),
        (Overlap::WhileBuilding, 3),
        (Overlap::WhileBuilding, 4),
        (Overlap::AfterBuilding, 1),
        (Overlap::AfterBuilding, 4),
    ] {
        let t = Instant::now();
        let r = rebuild_ready(&ctx, m, &rebuilt.functions, how).ok().unwrap();
        let wall = t.elapsed().as_secs_f64();
        println!(
            "ready {how:?}: {:.3} s = {:.2} us/node (built at {:.3}, building {:.3})",
            wall,
            wall / nodes as f64 * 1e6,
            r.built_s,
            r.building_s
        );
    }
    for (templates, n) in [(8, 1000), (64, 1000)] {
        for alone in [false, true] {
            let us = empty_floor(&ctx, templates, n, (Overlap::WhileBuilding, 1), alone);
            println!("empty {templates}x{n} instantiate_alone={alone}: {us:.2} us/node");
        }
    }
    for i in 0..2 {
        println!("floor after #{i}: {:.2} us/node", driver_us_per_node(&ctx, (Overlap::WhileBuilding, 1)).unwrap());
    }
}
