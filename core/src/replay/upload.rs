//! Streaming restore of the arena: shard file → hash → page-locked staging → async copy.
//!
//! Reader threads (they hold no CUDA types) each take the next piece a digest covers (a
//! v3 chunk, so one big shard is read by every reader at once, or a whole v1/v2 file),
//! read its bytes once into staging slots lent to them, and hash exactly the bytes they
//! hand back. A copying thread of its own enqueues each slot's copy, records the slot's
//! event, and lends the slot again only once that copy has completed; meanwhile the
//! calling thread is free for other work (replay builds its templates there). Host
//! memory is the staging pool, whatever the arena's size. A piece whose bytes do not hash to the manifest's digest
//! fails the restore before anything is launched, so a file changed after validation is
//! caught without being read twice.

use std::{
    collections::VecDeque,
    ops::Range,
    os::unix::fs::FileExt,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc, Mutex,
    },
    time::Instant,
};

use gnomon_format::{
    digest::{pieces, Piece, PieceHasher},
    validate::Core,
};

use crate::{
    cuda::{Context, Event, LentStream, PinnedHost, Stream},
    errors::ReplayError,
};

/// The staging pipeline's shape: `slots` × `slot_bytes` of page-locked memory, `readers`
/// threads.
#[derive(Clone, Copy, Debug)]
pub struct Staging {
    pub slot_bytes: usize,
    pub slots: usize,
    pub readers: usize,
}

impl Default for Staging {
    /// A reader per core, at most 16, and two 1 MiB slots per reader (a v3 chunk spans
    /// eight): at most 32 MiB of host memory. Page-locking costs time in proportion (on
    /// the H200 runner 0.005-0.008 s for 32 MiB on huge pages, `docs/driver-facts.md`),
    /// and a copy of 1 MiB already runs at the bus's speed.
    fn default() -> Self {
        let readers = std::thread::available_parallelism().map_or(4, |n| n.get()).min(16);
        Self { slot_bytes: 1 << 20, slots: 2 * readers, readers }
    }
}

/// What the upload moved and how long it took.
#[derive(Clone, Copy, Debug, Default)]
pub struct Uploaded {
    pub bytes: u64,
    pub seconds: f64,
    /// Of `seconds`, page-locking the staging pool before the first read.
    pub pinning_s: f64,
}

/// A filled slot on its way to the device, or a reader's word that a shard is done.
enum Message<'a> {
    Chunk { slot: &'a mut [u8], len: usize, dst: u64 },
    Done(Result<(), ReplayError>),
}

/// Uploads every shard of `core` into the mapped arena.
pub fn shards(core: &Core, ctx: &Context, staging: Staging) -> Result<Uploaded, ReplayError> {
    Upload::prepare(core, ctx, staging)?.run(&ctx.stream()?)
}

/// An upload whose page-locked staging and events exist, ready to stream. Apart from
/// [`Upload::run`] because pinning host memory waits for the device to be idle: a test
/// that makes the copies lag the readers fills the stream after this and before `run`.
pub struct Upload<'c> {
    core: &'c Core,
    staging: Staging,
    pool: PinnedHost,
    events: Vec<Event>,
    started: Instant,
    pinning_s: f64,
}

impl<'c> Upload<'c> {
    pub fn prepare(core: &'c Core, ctx: &Context, staging: Staging) -> Result<Self, ReplayError> {
        let started = Instant::now();
        // No more page-locked memory than the arena needs: pinning costs time too.
        let m = core.manifest();
        let chunks: u64 = m.shards.iter().map(|s| m.stored_len(s).div_ceil(staging.slot_bytes as u64)).sum();
        let staging = Staging { slots: staging.slots.min(chunks.max(1) as usize), ..staging };
        let pool = PinnedHost::new(ctx, staging.slot_bytes * staging.slots)?;
        let events = (0..staging.slots).map(|_| ctx.event()).collect::<Result<Vec<Event>, _>>()?;
        let pinning_s = started.elapsed().as_secs_f64();
        Ok(Self { core, staging, pool, events, started, pinning_s })
    }

    /// Streams every shard, its copies enqueued on `stream` behind whatever it holds.
    pub fn run(self, stream: &Stream) -> Result<Uploaded, ReplayError> {
        self.run_alongside(stream, || ()).0
    }

    /// As [`Upload::run`], while `alongside` runs on this thread: the copies are issued
    /// by a thread of their own, so work here does not keep the readers' slots waiting.
    /// The upload's seconds end with its last copy, whenever `alongside` ends.
    pub fn run_alongside<T>(
        self,
        stream: &Stream,
        alongside: impl FnOnce() -> T,
    ) -> (Result<Uploaded, ReplayError>, T) {
        let Self { core, staging, mut pool, events, started, pinning_s } = self;
        let m = core.manifest();
        let pieces = pieces(m);
        let layouts: Vec<Vec<Range<u64>>> = m.shards.iter().map(|s| m.stored_ranges(s)).collect();
        let (free_tx, free_rx) = mpsc::channel::<&mut [u8]>();
        pool.as_mut_slice().chunks_mut(staging.slot_bytes).for_each(|slot| free_tx.send(slot).expect("receiver alive"));
        let free_rx = Mutex::new(free_rx);
        let (next, cancelled) = (AtomicUsize::new(0), AtomicBool::new(false));
        let lent = stream.lend(&events);
        let (copied, value) = std::thread::scope(|scope| {
            let (tx, rx) = mpsc::channel::<Message>();
            for _ in 0..staging.readers.clamp(1, pieces.len().max(1)) {
                let (tx, free_rx, next, cancelled) = (tx.clone(), &free_rx, &next, &cancelled);
                let (pieces, layouts) = (&pieces, &layouts);
                scope.spawn(move || {
                    while !cancelled.load(Ordering::SeqCst) {
                        let Some(piece) = pieces.get(next.fetch_add(1, Ordering::SeqCst)) else { break };
                        let reader =
                            Reader { core, layout: &layouts[piece.shard.index as usize], free: free_rx, tx: &tx };
                        if tx.send(Message::Done(reader.read(piece, cancelled))).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            let (lent, cancelled) = (&lent, &cancelled);
            let copying = scope.spawn(move || {
                let failure = match lent.make_current() {
                    Ok(()) => Copies { lent, in_flight: VecDeque::new(), issued: 0 }.pump(&rx, &free_tx, cancelled),
                    Err(e) => {
                        cancelled.store(true, Ordering::SeqCst);
                        Some(e.into())
                    }
                };
                (failure, started.elapsed().as_secs_f64())
            });
            let value = alongside();
            (copying.join().expect("the copying thread does not panic"), value)
        });
        let (failure, seconds) = copied;
        let bytes = m.shards.iter().map(|s| m.stored_len(s)).sum();
        (failure.map_or(Ok(Uploaded { bytes, seconds, pinning_s }), Err), value)
    }
}

/// Copies in flight, oldest first, each with the event recorded after it.
struct Copies<'s, 'p> {
    lent: &'s LentStream<'s>,
    in_flight: VecDeque<(&'p mut [u8], usize)>,
    issued: usize,
}

impl<'p> Copies<'_, 'p> {
    /// Copies what the readers hand over until they are all done, doing [`Copies::idle`]'s
    /// work whenever nothing new has come. After a failure, slots go straight back and the
    /// readers are told to stop. Returns the first failure.
    fn pump(
        &mut self,
        rx: &mpsc::Receiver<Message<'p>>,
        free: &mpsc::Sender<&'p mut [u8]>,
        cancelled: &AtomicBool,
    ) -> Option<ReplayError> {
        let mut failure = None;
        loop {
            let message = match rx.try_recv() {
                Ok(m) => m,
                Err(mpsc::TryRecvError::Empty) => match self.idle(free) {
                    Ok(true) => continue,
                    Ok(false) => match rx.recv() {
                        Ok(m) => m,
                        Err(_) => break,
                    },
                    Err(e) => {
                        failure = failure.or(Some(e));
                        continue;
                    }
                },
                Err(mpsc::TryRecvError::Disconnected) => break,
            };
            match message {
                Message::Chunk { slot, len, dst } if failure.is_none() => {
                    if let Err(e) = self.issue(slot, len, dst) {
                        cancelled.store(true, Ordering::SeqCst);
                        failure = Some(e);
                    }
                }
                Message::Chunk { slot, .. } => free.send(slot).expect("the pool outlives the readers"),
                Message::Done(Err(e)) => {
                    cancelled.store(true, Ordering::SeqCst);
                    failure = failure.or(Some(e));
                }
                Message::Done(Ok(())) => {}
            }
        }
        while !self.in_flight.is_empty() {
            if let Err(e) = self.retire_oldest(free) {
                failure = failure.or(Some(e));
            }
        }
        failure
    }

    /// What this thread does while no slot waits to be copied: retire the copies already
    /// completed, lending their slots again, or else wait for the oldest copy. False when
    /// neither had anything to do.
    fn idle(&mut self, free: &mpsc::Sender<&'p mut [u8]>) -> Result<bool, ReplayError> {
        if self.retire_completed(free)? > 0 {
            return Ok(true);
        }
        if self.in_flight.is_empty() {
            return Ok(false);
        }
        self.retire_oldest(free).map(|_| true)
    }

    fn issue(&mut self, slot: &'p mut [u8], len: usize, dst: u64) -> Result<(), ReplayError> {
        let event = self.issued % self.lent.events();
        // SAFETY: `dst..dst + len` lies in a shard of the validated core's arena, mapped by
        // the caller; the slot is page-locked and is not lent again until the event
        // recorded next has completed (`retire_oldest`).
        unsafe { self.lent.upload_async(dst, &slot[..len]) }?;
        self.lent.record(event)?;
        self.in_flight.push_back((slot, event));
        self.issued += 1;
        Ok(())
    }

    /// Retires the oldest copies while they have completed, without waiting.
    fn retire_completed(&mut self, free: &mpsc::Sender<&'p mut [u8]>) -> Result<usize, ReplayError> {
        let mut retired = 0;
        while let Some(&(_, event)) = self.in_flight.front() {
            if !self.lent.completed(event)? {
                break;
            }
            let (slot, _) = self.in_flight.pop_front().expect("a copy in flight");
            let _ = free.send(slot);
            retired += 1;
        }
        Ok(retired)
    }

    fn retire_oldest(&mut self, free: &mpsc::Sender<&'p mut [u8]>) -> Result<(), ReplayError> {
        let (slot, event) = self.in_flight.pop_front().expect("a copy in flight");
        let synced = self.lent.synchronize(event);
        let _ = free.send(slot);
        Ok(synced?)
    }
}

/// Bytes a reader reads before it hashes them: few enough to be hashed from the core's
/// own cache, so the hash does not read the slot from memory a second time.
const CACHED_BLOCK: usize = 1 << 20;

/// What a reader thread needs to read a piece: the core, the stored ranges of the
/// piece's shard, the slots lent to readers, and the way to the copying thread.
struct Reader<'r, 'p> {
    core: &'r Core,
    layout: &'r [Range<u64>],
    free: &'r Mutex<mpsc::Receiver<&'p mut [u8]>>,
    tx: &'r mpsc::Sender<Message<'p>>,
}

impl<'p> Reader<'_, 'p> {
    /// Reads one piece (a v1/v2 file, or a v3 chunk) into lent slots, each sent to its
    /// arena address, hashing exactly the bytes sent; checks the file's length and the
    /// piece's digest.
    fn read(&self, piece: &Piece, cancelled: &AtomicBool) -> Result<(), ReplayError> {
        let shard = piece.shard;
        let io = |source| ReplayError::Shard { index: shard.index, file: shard.file.clone(), source };
        let changed = |what: String| io(std::io::Error::other(format!("changed since the core was validated: {what}")));
        let file = self
            .core
            .open_file(&shard.file, &format!("shard {}", shard.index))
            .map_err(|e| io(std::io::Error::other(e)))?;
        // The layout is the shard's stored ranges: their sum is its file's length.
        let stored: u64 = self.layout.iter().map(|r| r.end - r.start).sum();
        let len = file.metadata().map_err(io)?.len();
        if len != stored {
            return Err(changed(format!("it is {len} bytes long, the manifest stores {stored}")));
        }
        let mut hasher = PieceHasher::of(piece);
        // The file holds the shard's stored ranges one after another; each goes to its place.
        let mut file_at = 0;
        for range in self.layout {
            let span = file_at.max(piece.bytes.start)..(file_at + range.end - range.start).min(piece.bytes.end);
            let mut done = span.start;
            while done < span.end {
                if cancelled.load(Ordering::SeqCst) {
                    return Ok(());
                }
                let Ok(slot) = self.free.lock().unwrap_or_else(|e| e.into_inner()).recv() else { return Ok(()) };
                let len = (span.end - done).min(slot.len() as u64) as usize;
                for (at, block) in (0..).step_by(CACHED_BLOCK).zip(slot[..len].chunks_mut(CACHED_BLOCK)) {
                    file.read_exact_at(block, done + at).map_err(|e| changed(format!("it ended early ({e})")))?;
                    hasher.update(block);
                }
                let dst = self.core.manifest().arena.base + range.start + (done - file_at);
                done += len as u64;
                if self.tx.send(Message::Chunk { slot, len, dst }).is_err() {
                    return Ok(());
                }
            }
            file_at += range.end - range.start;
        }
        let (kind, digest) = (hasher.name(), hasher.finish());
        if digest != piece.expected {
            let what = piece.name();
            return Err(changed(format!("{what} has {kind} {digest}, the manifest says {}", piece.expected)));
        }
        Ok(())
    }
}

/// Writes the stored bytes of the arena `range` (offsets from the base) back from the
/// shard files: what a weight held when the core was loaded.
pub(super) fn reload(core: &Core, ctx: &Context, range: Range<u64>) -> Result<(), ReplayError> {
    let m = core.manifest();
    for shard in m.shards.iter().filter(|s| s.offset < range.end && range.start < s.offset + s.size) {
        let io = |source| ReplayError::Shard { index: shard.index, file: shard.file.clone(), source };
        let file = core.open_file(&shard.file, "shard").map_err(|e| io(std::io::Error::other(e)))?;
        let mut file_at = 0;
        for stored in m.stored_ranges(shard) {
            let part = stored.start.max(range.start)..stored.end.min(range.end);
            if part.start < part.end {
                let mut bytes = vec![0u8; (part.end - part.start) as usize];
                file.read_exact_at(&mut bytes, file_at + part.start - stored.start).map_err(io)?;
                // SAFETY: `part` lies in a shard of the validated core's arena, mapped by the caller.
                unsafe { ctx.write(m.arena.base + part.start, &bytes) }?;
            }
            file_at += stored.end - stored.start;
        }
    }
    Ok(())
}
