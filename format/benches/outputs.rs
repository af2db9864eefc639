//! What the host does with the outputs of each launch (issue 45). The export: a 64 MiB
//! bf16 output (a large batch's cache) taken as a first launch, then a launch that differs
//! in one element widening its spread, and then one that differs in every fourth element
//! (as an `index_add_` combine's output does, launch after launch); the first is what
//! every output costs, the others only an output that varies; then that launch held to
//! the envelope, as replay judges a varying output. Replay: a template's outputs (64 buffers of 8 MiB, a
//! cache's layers) digested one by one and together on the host's cores.
//! `cargo bench -p gnomon-format --bench outputs`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gnomon_format::{
    digest::sha256_each,
    hash_hex,
    spread::{Element, Spread},
};

const BYTES: usize = 64 << 20;

fn spread(c: &mut Criterion) {
    let first: Vec<u8> = (0..BYTES).map(|i| (i as u32).wrapping_mul(2_654_435_761) as u8 & 0x3f).collect();
    let mut other = first.clone();
    other[BYTES / 2] ^= 1;
    let mut everywhere = first.clone();
    everywhere.iter_mut().step_by(8).for_each(|b| *b ^= 1);
    let mut group = c.benchmark_group("output-64MiB-bf16");
    group.throughput(Throughput::Bytes(BYTES as u64)).sample_size(10);
    group.bench_function("first-launch", |b| b.iter(|| Spread::of_first(Element::Bfloat16, &first)));
    group.bench_function("first-launch-and-one-differing", |b| {
        b.iter(|| {
            let mut s = Spread::of_first(Element::Bfloat16, &first);
            s.add(&first, &other);
            s.envelope()
        })
    });
    let mut widened = Spread::of_first(Element::Bfloat16, &first);
    widened.add(&first, &other);
    group.bench_function("a-launch-differing-in-every-fourth-element", |b| {
        b.iter(|| {
            widened.add(&first, &everywhere);
            widened.envelope()
        })
    });
    // Replay's side: a restored launch of a varying output held to its envelope.
    let envelope = widened.envelope();
    group.bench_function("that-launch-held-to-its-envelope", |b| {
        b.iter(|| envelope.holds(Element::Bfloat16, &first, &everywhere))
    });
    group.finish();
}

fn digests(c: &mut Criterion) {
    let outputs: Vec<Vec<u8>> = (0..64u8).map(|i| vec![i; 8 << 20]).collect();
    let slices: Vec<&[u8]> = outputs.iter().map(Vec::as_slice).collect();
    let mut group = c.benchmark_group("template-outputs-64x8MiB");
    group.throughput(Throughput::Bytes(64 * (8 << 20))).sample_size(10);
    group.bench_function("one-by-one", |b| b.iter(|| slices.iter().map(|s| hash_hex(*s).unwrap()).count()));
    group.bench_function("together", |b| b.iter(|| sha256_each(&slices)));
    group.finish();
}

criterion_group!(benches, spread, digests);
criterion_main!(benches);
