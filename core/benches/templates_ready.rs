//! How a restore gets its templates ready fastest (issue 18): 8 chains of 1 000
//! empty-kernel nodes built on one thread and instantiated on 1..6 others, each template
//! handed over as soon as it is built or once all are built. The figure is the driver's
//! own cost per node (`driver-floor-us-per-node` measures the choice replay makes). Needs
//! a GPU; without one it says so and measures nothing. On the runner:
//! `cargo bench -p gnomon-core --bench templates_ready` (or the built bench binary with
//! `--bench`).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use gnomon_core::{
    cuda::{Context, Overlap},
    replay::driver_us_per_node,
};

/// Nodes per measurement: `driver_us_per_node` builds 8 × 1 000.
const NODES: f64 = 8_000.0;

fn templates_ready(c: &mut Criterion) {
    let ctx = match Context::new(0) {
        Ok(ctx) => ctx,
        Err(e) => return eprintln!("templates_ready: no GPU, nothing measured ({e})"),
    };
    let mut group = c.benchmark_group("ready-8x1000-empty-nodes");
    group.sample_size(10).warm_up_time(Duration::from_millis(500));
    for (overlap, name) in [(Overlap::WhileBuilding, "while-building"), (Overlap::AfterBuilding, "after-building")] {
        for threads in [1, 2, 3, 4, 6] {
            group.bench_function(format!("{name}/threads={threads}"), |b| {
                b.iter_custom(|iterations| {
                    let per_node = |_| driver_us_per_node(&ctx, (overlap, threads)).expect("the driver builds them");
                    Duration::from_secs_f64((0..iterations).map(per_node).sum::<f64>() * NODES / 1e6)
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, templates_ready);
criterion_main!(benches);
