//! The commands a user runs, file to verdict: `gnomon validate CORE` started as a process,
//! on cores written to disk. `fixtures/benches/validate.rs` times the rules alone on a
//! manifest already in memory; the difference is reading, parsing and the account.

use std::{path::Path, process::Command};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use gnomon_fixtures::large::catalogue_core;

/// Runs `gnomon validate` on `core` and insists on its verdict, so a refusal cannot pass
/// for a fast command.
fn validate(core: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_gnomon")).arg("validate").arg(core).output().expect("gnomon runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

fn commands(c: &mut Criterion) {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let mut group = c.benchmark_group("validate-command");
    group.sample_size(10);
    // 64 000 one-node templates each with an expected output, and 100 templates of 1 000
    // nodes: DESIGN.md's targets. The smaller sizes show how the time grows.
    for (templates, nodes) in [(16_000, 1), (32_000, 1), (64_000, 1), (100, 1_000)] {
        let dir = scratch.path().join(format!("{templates}x{nodes}"));
        catalogue_core(templates, nodes).write(&dir).expect("the core is written");
        let id = BenchmarkId::from_parameter(format!("{templates}-templates-of-{nodes}-nodes"));
        group.bench_with_input(id, &dir, |b, dir| b.iter(|| validate(dir)));
    }
    group.finish();
}

criterion_group!(benches, commands);
criterion_main!(benches);
