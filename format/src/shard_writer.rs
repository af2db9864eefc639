//! Shard files written at the storage's speed: the calling thread fills staging slots
//! (the exporter copies the arena from the device into page-locked ones; only that thread
//! may touch the device), and writer threads digest each slot's v3 chunks and write it at
//! its place in its file, then lend the slot back. Filling one slot overlaps digesting
//! and writing the others, and the chunks of one file are digested on as many threads as
//! write them: a v3 chunk's digest depends on its bytes alone.

use std::{
    fs,
    os::unix::fs::FileExt,
    panic::AssertUnwindSafe,
    path::PathBuf,
    sync::{mpsc, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use crate::{digest::chunk_digest, errors::CoreError, Chunks};
use serde::Serialize;

/// One shard file to write: where, and how many bytes.
pub struct ShardFile {
    pub path: PathBuf,
    pub len: u64,
}

/// Seconds each stage was busy, summed over its threads, and the wall time: where a
/// snapshot's time went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct WriteStages {
    pub fill_s: f64,
    pub digest_s: f64,
    pub write_s: f64,
    pub wall_s: f64,
    pub writers: usize,
}

/// How the files are cut and staged: `chunk` bytes per digest, each slot a multiple of it.
pub struct Staging<'s> {
    pub chunk: u64,
    pub slots: Vec<&'s mut [u8]>,
    pub writers: usize,
}

struct Job<'s> {
    file: usize,
    at: u64,
    len: usize,
    slot: &'s mut [u8],
}

/// What the writer threads share: the files, the chunk digests by file, the first error,
/// and their busy time.
struct Shared<'f> {
    files: Vec<(fs::File, &'f ShardFile)>,
    chunk: u64,
    digests: Mutex<Vec<Vec<Option<String>>>>,
    failure: Mutex<Option<CoreError>>,
    busy: Mutex<(Duration, Duration)>,
}

/// Writes every file of `files`, each slot-sized piece first given to `fill(file, at,
/// slot)` on the calling thread; returns each file's chunk digests and where the time
/// went. The first error, of `fill` or of a write, stops the work and is returned.
pub fn write_shards<E: From<CoreError>>(
    files: &[ShardFile],
    staging: Staging<'_>,
    mut fill: impl FnMut(usize, u64, &mut [u8]) -> Result<(), E>,
    mut advance: impl FnMut(u64),
) -> Result<(Vec<Chunks>, WriteStages), E> {
    let started = Instant::now();
    let Staging { chunk, slots, writers } = staging;
    let slot_len = slots.iter().map(|s| s.len() as u64).min().unwrap_or(0);
    assert!(chunk > 0 && slot_len >= chunk && slot_len % chunk == 0, "slots hold whole chunks");
    let shared = Shared::create(files, chunk)?;
    let (free_tx, free_rx) = mpsc::channel();
    slots.into_iter().for_each(|slot| free_tx.send(slot).expect("the receiver is alive"));
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let job_rx = Mutex::new(job_rx);
    let writers = writers.max(1);
    let fill_time = std::thread::scope(|s| {
        for _ in 0..writers {
            let free_tx = free_tx.clone();
            let (shared, job_rx) = (&shared, &job_rx);
            s.spawn(move || shared.write_jobs(job_rx, &free_tx));
        }
        drop(free_tx);
        // `job_tx` is dropped when `feed` returns, so the writers end once its jobs are done.
        feed(files, slot_len, &shared, (free_rx, job_tx), &mut fill, &mut advance)
    });
    let fill_time = fill_time?;
    let (digests, (digest_time, write_time)) = shared.finish()?;
    let stages = WriteStages {
        fill_s: fill_time.as_secs_f64(),
        digest_s: digest_time.as_secs_f64(),
        write_s: write_time.as_secs_f64(),
        wall_s: started.elapsed().as_secs_f64(),
        writers,
    };
    Ok((digests.into_iter().map(|xxh3_128| Chunks { bytes: chunk, xxh3_128 }).collect(), stages))
}

/// The calling thread's part: fills a free slot with each piece of each file in turn and
/// hands it to the writers; stops at the first error of its own or of a writer. Returns
/// the time spent filling.
fn feed<'s, E>(
    files: &[ShardFile],
    slot_len: u64,
    shared: &Shared,
    (free, jobs): (mpsc::Receiver<&'s mut [u8]>, mpsc::Sender<Job<'s>>),
    fill: &mut impl FnMut(usize, u64, &mut [u8]) -> Result<(), E>,
    advance: &mut impl FnMut(u64),
) -> Result<Duration, E> {
    let mut filling = Duration::ZERO;
    for (index, file) in files.iter().enumerate() {
        for at in (0..file.len).step_by(slot_len as usize) {
            if shared.failed() {
                return Ok(filling);
            }
            let len = slot_len.min(file.len - at) as usize;
            let slot = free.recv().expect("writers lend back every slot until they end");
            let started = Instant::now();
            fill(index, at, &mut slot[..len])?;
            filling += started.elapsed();
            jobs.send(Job { file: index, at, len, slot }).expect("writers run until the jobs end");
            advance(len as u64);
        }
    }
    Ok(filling)
}

impl<'f> Shared<'f> {
    fn create(files: &'f [ShardFile], chunk: u64) -> Result<Self, CoreError> {
        let mut open = Vec::with_capacity(files.len());
        let mut digests = Vec::with_capacity(files.len());
        for f in files {
            let write_err = |source| CoreError::Write { path: f.path.clone(), source };
            if let Some(parent) = f.path.parent() {
                fs::create_dir_all(parent).map_err(write_err)?;
            }
            let file = fs::File::create(&f.path).map_err(write_err)?;
            file.set_len(f.len).map_err(write_err)?;
            open.push((file, f));
            digests.push(vec![None; f.len.div_ceil(chunk) as usize]);
        }
        Ok(Self {
            files: open,
            chunk,
            digests: Mutex::new(digests),
            failure: Mutex::new(None),
            busy: Mutex::new(Default::default()),
        })
    }

    fn failed(&self) -> bool {
        lock(&self.failure).is_some()
    }

    /// A writer thread: takes jobs until there are none, and lends every slot back, also
    /// after a job failed or panicked (the feeder waits for slots: none may be lost).
    fn write_jobs<'s>(&self, jobs: &Mutex<mpsc::Receiver<Job<'s>>>, free: &mpsc::Sender<&'s mut [u8]>) {
        loop {
            let Ok(job) = lock(jobs).recv() else { return };
            if !self.failed() {
                let written = std::panic::catch_unwind(AssertUnwindSafe(|| self.write(&job)));
                let failure = match written {
                    Ok(result) => result.err(),
                    Err(_) => Some(self.failed_at(job.file, "a writer thread panicked")),
                };
                if let Some(e) = failure {
                    lock(&self.failure).get_or_insert(e);
                }
            }
            // The feeder may have stopped; a slot nobody waits for is simply dropped.
            let _ = free.send(job.slot);
        }
    }

    fn failed_at(&self, file: usize, what: &str) -> CoreError {
        CoreError::Write { path: self.files[file].1.path.clone(), source: std::io::Error::other(what.to_owned()) }
    }

    fn write(&self, job: &Job) -> Result<(), CoreError> {
        let bytes = &job.slot[..job.len];
        let (file, shard) = &self.files[job.file];
        let digesting = Instant::now();
        let digests: Vec<String> = bytes.chunks(self.chunk as usize).map(chunk_digest).collect();
        let digested = digesting.elapsed();
        let writing = Instant::now();
        file.write_all_at(bytes, job.at).map_err(|source| CoreError::Write { path: shard.path.clone(), source })?;
        let written = writing.elapsed();
        let first = (job.at / self.chunk) as usize;
        let mut all = lock(&self.digests);
        let places = all[job.file].get_mut(first..first + digests.len());
        let places = places.ok_or_else(|| self.failed_at(job.file, "a slot beyond the file's chunks"))?;
        places.iter_mut().zip(digests).for_each(|(place, d)| *place = Some(d));
        let mut busy = lock(&self.busy);
        (busy.0, busy.1) = (busy.0 + digested, busy.1 + written);
        Ok(())
    }

    /// The digests of every chunk, or the first error.
    #[allow(clippy::type_complexity)]
    fn finish(self) -> Result<(Vec<Vec<String>>, (Duration, Duration)), CoreError> {
        if let Some(e) = lock(&self.failure).take() {
            return Err(e);
        }
        let mut all = Vec::with_capacity(self.files.len());
        for (file, digests) in std::mem::take(&mut *lock(&self.digests)).into_iter().enumerate() {
            let digests = digests.into_iter().collect::<Option<Vec<_>>>();
            all.push(digests.ok_or_else(|| self.failed_at(file, "a chunk was never written"))?);
        }
        Ok((all, *lock(&self.busy)))
    }
}

/// The value behind a mutex whether or not a writer panicked holding it: a panic is
/// caught and reported as the writer's failure, so what it guards stays usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
