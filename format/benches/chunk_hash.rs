//! Which hash verifies shard chunks at the speed they stream (issue 18): SHA-256, BLAKE3
//! and XXH3-128 over 8 MiB chunks, on one thread and on every core at once, as a restore's
//! readers hash. Run on the runner: `cargo bench -p gnomon-format --bench chunk_hash`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sha2::{Digest, Sha256};

const CHUNK: usize = 8 << 20;

type Hasher = fn(&[u8]) -> u64;

fn sha256(bytes: &[u8]) -> u64 {
    Sha256::digest(bytes)[0] as u64
}

fn blake3(bytes: &[u8]) -> u64 {
    blake3::hash(bytes).as_bytes()[0] as u64
}

fn xxh3(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_128(bytes) as u64
}

const HASHERS: [(&str, Hasher); 3] = [("sha256", sha256), ("blake3", blake3), ("xxh3-128", xxh3)];

fn chunk_hashes(c: &mut Criterion) {
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get()).min(16);
    // Two chunks a thread: a restore's readers each hash their own chunks.
    let data: Vec<u8> = (0..CHUNK * 2 * threads).map(|i| (i as u32).wrapping_mul(2_654_435_761) as u8).collect();
    let mut one = c.benchmark_group("chunk-8MiB-one-thread");
    one.throughput(Throughput::Bytes(CHUNK as u64)).sample_size(20);
    for (name, hash) in HASHERS {
        one.bench_function(name, |b| b.iter(|| hash(&data[..CHUNK])));
    }
    one.finish();
    let mut all = c.benchmark_group(format!("chunks-8MiB-{threads}-threads"));
    all.throughput(Throughput::Bytes(data.len() as u64)).sample_size(20);
    for (name, hash) in HASHERS {
        all.bench_function(name, |b| {
            b.iter(|| {
                std::thread::scope(|s| {
                    let handles: Vec<_> = data
                        .chunks(CHUNK * 2)
                        .map(|part| s.spawn(move || part.chunks(CHUNK).map(hash).sum::<u64>()))
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
                })
            })
        });
    }
    all.finish();
}

criterion_group!(benches, chunk_hashes);
criterion_main!(benches);
