//! What the export does on the host with each output of each launch it compares (issue
//! 45): a 64 MiB bf16 output (a large batch's cache) taken as a first launch, then a launch
//! that differs in one element widening its spread. The first is what every output costs;
//! the second only an output that varies. `cargo bench -p gnomon-format --bench spread`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gnomon_format::spread::{Element, Spread};

const BYTES: usize = 64 << 20;

fn spread(c: &mut Criterion) {
    let first: Vec<u8> = (0..BYTES).map(|i| (i as u32).wrapping_mul(2_654_435_761) as u8 & 0x3f).collect();
    let mut other = first.clone();
    other[BYTES / 2] ^= 1;
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
    group.finish();
}

criterion_group!(benches, spread);
criterion_main!(benches);
