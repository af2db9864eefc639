//! Work spread over the host's cores: a shard's chunks, a template's outputs, a large
//! output's parts. Results come back in the order of their inputs, so what is combined
//! from them does not depend on how many cores did the work.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f(0)`, `f(1)`, … `f(n - 1)`, on as many threads as there are cores (or items), each
/// thread taking the next item when it is done with one. A panic in `f` is raised here.
pub(crate) fn map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |c| c.get()).min(n);
    if threads <= 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut found: Vec<(usize, T)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return mine;
                        }
                        mine.push((i, f(i)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    found.sort_by_key(|&(i, _)| i);
    found.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_in_the_order_of_their_inputs() {
        assert_eq!(super::map(1000, |i| i * i), (0..1000).map(|i| i * i).collect::<Vec<_>>());
        assert!(super::map(0, |i| i).is_empty());
    }
}
