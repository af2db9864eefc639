//! Where the rank processes of a rank set meet to share memory. Each rank offers file
//! descriptors (its arena's physical allocations, as the driver exports them) with a note
//! saying what they hold to the peers that map them, and takes those of the peers it
//! maps, over Unix sockets in a directory the ranks share: `rank-R.sock`, served by rank
//! R. A barrier is a meeting where nothing is offered. Everything happens within one time
//! limit, and a rank that never came is named: no rank waits for another forever.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{ErrorKind, IoSlice, IoSliceMut, Read, Write},
    mem::MaybeUninit,
    os::{
        fd::{BorrowedFd, OwnedFd},
        unix::net::{UnixListener, UnixStream},
    },
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags,
};

use self::RendezvousError as E;

/// The most descriptors one message carries (the kernel's `SCM_MAX_FD`).
pub const MAX_FDS: usize = 253;
/// The longest note an offer carries.
pub const MAX_NOTE: usize = 64 << 10;
/// A message's header: the sender's rank, its descriptors, its note's bytes.
const HEADER: usize = 12;
/// How often a rank looks again for a peer's socket or a peer's call.
const POLL: Duration = Duration::from_millis(5);

/// One rank's part in a meeting: who it is, where the ranks meet, and until when.
pub struct Meeting<'d> {
    pub dir: &'d Path,
    pub rank: u32,
    pub limit: Duration,
}

/// What a rank offers: descriptors, and a note saying what they hold.
#[derive(Clone, Copy, Default)]
pub struct Offer<'o> {
    pub fds: &'o [BorrowedFd<'o>],
    pub note: &'o [u8],
}

/// What a rank took from a peer: its descriptors in the order offered, and its note.
#[derive(Debug)]
pub struct Taken {
    pub fds: Vec<OwnedFd>,
    pub note: Vec<u8>,
}

impl Meeting<'_> {
    /// Offers `offer` to each rank of `serve` (each asks once) and takes the offer of each
    /// rank of `take`, by peer.
    pub fn exchange(
        &self,
        offer: Offer<'_>,
        serve: &BTreeSet<u32>,
        take: &BTreeSet<u32>,
    ) -> Result<BTreeMap<u32, Taken>, E> {
        if offer.fds.len() > MAX_FDS {
            return Err(E::TooMany { count: offer.fds.len() });
        }
        if offer.note.len() > MAX_NOTE {
            return Err(E::NoteTooLong { bytes: offer.note.len() });
        }
        let deadline = Instant::now() + self.limit;
        let own = self.socket(self.rank);
        // A socket left by an earlier meeting that died would refuse the bind.
        let _ = std::fs::remove_file(&own);
        let listener = UnixListener::bind(&own).map_err(io(format!("listen on {}", own.display())))?;
        let outcome = thread::scope(|scope| {
            let server = scope.spawn(|| self.serve(&listener, offer, serve, deadline));
            let taken: Result<BTreeMap<_, _>, E> =
                take.iter().map(|&peer| Ok((peer, self.take(peer, deadline)?))).collect();
            let served =
                server.join().unwrap_or_else(|_| Err(E::Protocol { peer: self.rank, what: "serving panicked".into() }));
            // A peer that never came also never asked: its absence is the error told.
            let taken = taken?;
            served.map(|()| taken)
        });
        let _ = std::fs::remove_file(&own);
        outcome
    }

    /// Waits until every rank of `others` came to the meeting called `step`: after it, each
    /// has done what it did before. Each step meets in a directory of its own, so a rank
    /// still serving one step is never asked for the next.
    pub fn barrier(&self, step: &str, others: &BTreeSet<u32>) -> Result<(), E> {
        let dir = self.dir.join(step);
        std::fs::create_dir_all(&dir).map_err(io(format!("make {}", dir.display())))?;
        let meeting = Meeting { dir: &dir, ..*self };
        meeting.exchange(Offer::default(), others, others).map(drop)
    }

    fn socket(&self, rank: u32) -> PathBuf {
        self.dir.join(format!("rank-{rank}.sock"))
    }

    /// Accepts each rank of `serve` once and sends it `offer`.
    fn serve(
        &self,
        listener: &UnixListener,
        offer: Offer<'_>,
        serve: &BTreeSet<u32>,
        deadline: Instant,
    ) -> Result<(), E> {
        listener.set_nonblocking(true).map_err(io("poll the listener".into()))?;
        let mut waiting = serve.clone();
        while let Some(&first) = waiting.first() {
            let mut stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(E::PeerNeverAsked {
                            peer: first,
                            rank: self.rank,
                            waited_s: self.limit.as_secs_f64(),
                        });
                    }
                    thread::sleep(POLL);
                    continue;
                }
                Err(e) => return Err(io("accept a peer".into())(e)),
            };
            stream.set_nonblocking(false).map_err(io("serve a peer".into()))?;
            stream.set_read_timeout(Some(remaining(deadline))).map_err(io("serve a peer".into()))?;
            let mut asker = [0u8; 4];
            stream.read_exact(&mut asker).map_err(io("read which rank asks".into()))?;
            let asker = u32::from_le_bytes(asker);
            if !waiting.remove(&asker) {
                return Err(E::Protocol {
                    peer: asker,
                    what: format!("asked for rank {}'s memory, which it does not map or took already", self.rank),
                });
            }
            send(&stream, self.rank, offer)?;
        }
        Ok(())
    }

    /// Connects to `peer` (retrying until its socket opens or the deadline), says who asks,
    /// and receives what it offers.
    fn take(&self, peer: u32, deadline: Instant) -> Result<Taken, E> {
        let socket = self.socket(peer);
        let mut stream = loop {
            match UnixStream::connect(&socket) {
                Ok(stream) => break stream,
                Err(_) if Instant::now() < deadline => thread::sleep(POLL),
                Err(_) => return Err(E::PeerAbsent { peer, socket, waited_s: self.limit.as_secs_f64() }),
            }
        };
        stream.set_read_timeout(Some(remaining(deadline))).map_err(io(format!("ask rank {peer}")))?;
        stream.write_all(&self.rank.to_le_bytes()).map_err(io(format!("ask rank {peer}")))?;
        receive(&stream, peer)
    }
}

/// One message: the header, then the note, the descriptors attached to its first byte.
fn send(mut stream: &UnixStream, rank: u32, offer: Offer<'_>) -> Result<(), E> {
    let counts = [rank, offer.fds.len() as u32, offer.note.len() as u32];
    let header: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(offer.fds.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !offer.fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(offer.fds)) {
        return Err(E::TooMany { count: offer.fds.len() });
    }
    let failed = |e: std::io::Error| io("send the descriptors".into())(e);
    let sent =
        sendmsg(stream, &[IoSlice::new(&header)], &mut control, SendFlags::empty()).map_err(|e| failed(e.into()))?;
    stream.write_all(&header[sent..]).and_then(|()| stream.write_all(offer.note)).map_err(failed)
}

/// The message [`send`] sent, checked: from `peer`, with as many descriptors as it says.
fn receive(mut stream: &UnixStream, peer: u32) -> Result<Taken, E> {
    let mut header = [0u8; HEADER];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let unanswered = || E::Protocol { peer, what: "accepted the call and sent nothing in time".into() };
    let failed = |e: std::io::Error| match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => unanswered(),
        _ => io(format!("receive rank {peer}'s descriptors"))(e),
    };
    let message = recvmsg(stream, &mut [IoSliceMut::new(&mut header)], &mut control, RecvFlags::CMSG_CLOEXEC)
        .map_err(|e| failed(e.into()))?;
    let fds: Vec<OwnedFd> = control
        .drain()
        .flat_map(|cmsg| match cmsg {
            RecvAncillaryMessage::ScmRights(fds) => fds.collect(),
            _ => Vec::new(),
        })
        .collect();
    stream.read_exact(&mut header[message.bytes.min(HEADER)..]).map_err(failed)?;
    let field = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let (from, count, note_len) = (field(0), field(4) as usize, field(8) as usize);
    if from != peer || count != fds.len() || note_len > MAX_NOTE {
        return Err(E::Protocol {
            peer,
            what: format!(
                "answered as rank {from} with {} of {count} descriptors and a note of {note_len} B",
                fds.len()
            ),
        });
    }
    let mut note = vec![0u8; note_len];
    stream.read_exact(&mut note).map_err(failed)?;
    Ok(Taken { fds, note })
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))
}

fn io(what: String) -> impl Fn(std::io::Error) -> E {
    move |source| E::Io { what: what.clone(), source }
}

#[cfg(test)]
mod tests {
    use std::{
        fs::File,
        io::Seek,
        os::{fd::AsFd, unix::fs::FileExt},
    };

    use super::*;

    const LIMIT: Duration = Duration::from_secs(5);

    /// A file holding `text`, standing in for an exported allocation.
    fn allocation(dir: &Path, text: &str) -> File {
        let mut f = tempfile::tempfile_in(dir).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f.rewind().unwrap();
        f
    }

    fn read(fd: OwnedFd) -> String {
        let mut bytes = vec![0u8; 64];
        let n = File::from(fd).read_at(&mut bytes, 0).unwrap();
        String::from_utf8(bytes[..n].to_vec()).unwrap()
    }

    fn set(ranks: &[u32]) -> BTreeSet<u32> {
        ranks.iter().copied().collect()
    }

    #[test]
    fn two_ranks_take_each_others_allocations_in_the_order_offered() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<Vec<File>> = (0..2)
            .map(|r| (0..3).map(|i| allocation(dir.path(), &format!("rank {r} allocation {i}"))).collect())
            .collect();
        let taken: Vec<_> = thread::scope(|scope| {
            let handles: Vec<_> = (0..2u32)
                .map(|rank| {
                    let (dir, files) = (dir.path(), &files[rank as usize]);
                    scope.spawn(move || {
                        let fds: Vec<BorrowedFd> = files.iter().map(|f| f.as_fd()).collect();
                        let note = format!("three from rank {rank}");
                        let peer = set(&[1 - rank]);
                        Meeting { dir, rank, limit: LIMIT }.exchange(
                            Offer { fds: &fds, note: note.as_bytes() },
                            &peer,
                            &peer,
                        )
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
        });
        for (rank, mut by_peer) in taken.into_iter().enumerate() {
            let peer = 1 - rank as u32;
            let taken = by_peer.remove(&peer).unwrap();
            assert_eq!(String::from_utf8(taken.note).unwrap(), format!("three from rank {peer}"));
            let texts: Vec<String> = taken.fds.into_iter().map(read).collect();
            assert_eq!(texts, (0..3).map(|i| format!("rank {peer} allocation {i}")).collect::<Vec<_>>());
        }
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "the sockets are removed");
    }

    #[test]
    fn a_peer_that_never_comes_is_named_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let meeting = Meeting { dir: dir.path(), rank: 0, limit: Duration::from_millis(200) };
        let started = Instant::now();
        let Err(e) = meeting.exchange(Offer::default(), &set(&[]), &set(&[1])) else { panic!("rank 1 never came") };
        assert!(started.elapsed() < Duration::from_secs(2));
        let text = e.to_string().replace(&dir.path().display().to_string(), "DIR");
        insta::assert_snapshot!(text, @"rank 1 did not open DIR/rank-1.sock within 0.2 s: it never started, or failed before it could share its memory");
    }

    #[test]
    fn a_peer_absent_both_ways_is_told_as_absent() {
        let dir = tempfile::tempdir().unwrap();
        let meeting = Meeting { dir: dir.path(), rank: 0, limit: Duration::from_millis(100) };
        let e = meeting.exchange(Offer::default(), &set(&[1]), &set(&[1])).unwrap_err();
        assert!(matches!(e, E::PeerAbsent { peer: 1, .. }), "{e}");
    }

    #[test]
    fn a_peer_that_never_asks_is_named_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let meeting = Meeting { dir: dir.path(), rank: 0, limit: Duration::from_millis(200) };
        let f = allocation(dir.path(), "rank 0");
        let Err(e) = meeting.exchange(Offer { fds: &[f.as_fd()], note: &[] }, &set(&[1]), &set(&[])) else {
            panic!("rank 1 never asked")
        };
        insta::assert_snapshot!(e.to_string(), @"rank 1 maps rank 0's memory but did not ask for it within 0.2 s");
    }

    #[test]
    fn a_rank_that_asks_without_mapping_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let e = thread::scope(|scope| {
            let server = scope.spawn(|| {
                Meeting { dir: dir.path(), rank: 0, limit: LIMIT }.exchange(Offer::default(), &set(&[1]), &set(&[]))
            });
            let stranger = Meeting { dir: dir.path(), rank: 2, limit: LIMIT };
            let _ = stranger.take(0, Instant::now() + LIMIT);
            server.join().unwrap().unwrap_err()
        });
        insta::assert_snapshot!(e.to_string(), @"rank 2: asked for rank 0's memory, which it does not map or took already");
    }

    #[test]
    fn an_answer_from_another_rank_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let impostor = UnixListener::bind(dir.path().join("rank-1.sock")).unwrap();
        let e = thread::scope(|scope| {
            scope.spawn(|| {
                let (mut stream, _) = impostor.accept().unwrap();
                stream.read_exact(&mut [0u8; 4]).unwrap();
                send(&stream, 3, Offer::default()).unwrap();
            });
            Meeting { dir: dir.path(), rank: 0, limit: LIMIT }.take(1, Instant::now() + LIMIT).unwrap_err()
        });
        insta::assert_snapshot!(e.to_string(), @"rank 1: answered as rank 3 with 0 of 0 descriptors and a note of 0 B");
    }

    /// Rank 0 asks a stand-in for rank 1 that answers with `answer`, or not at all.
    fn answered(answer: Option<&[u8]>, limit: Duration) -> E {
        let dir = tempfile::tempdir().unwrap();
        let stand_in = UnixListener::bind(dir.path().join("rank-1.sock")).unwrap();
        thread::scope(|scope| {
            scope.spawn(|| {
                let (mut stream, _) = stand_in.accept().unwrap();
                stream.read_exact(&mut [0u8; 4]).unwrap();
                match answer {
                    Some(bytes) => stream.write_all(bytes).unwrap(),
                    None => thread::sleep(limit * 2),
                }
            });
            Meeting { dir: dir.path(), rank: 0, limit }.take(1, Instant::now() + limit).unwrap_err()
        })
    }

    #[test]
    fn a_peer_that_accepts_and_never_answers_or_miscounts_is_refused() {
        let silent = answered(None, Duration::from_millis(200));
        insta::assert_snapshot!(silent, @"rank 1: accepted the call and sent nothing in time");
        // From the right rank, saying 2 descriptors and sending none.
        let header: Vec<u8> = [1u32, 2, 0].iter().flat_map(|c| c.to_le_bytes()).collect();
        let miscounted = answered(Some(&header), LIMIT);
        insta::assert_snapshot!(miscounted, @"rank 1: answered as rank 1 with 0 of 2 descriptors and a note of 0 B");
    }

    #[test]
    fn as_many_descriptors_as_a_message_carries_arrive() {
        let dir = tempfile::tempdir().unwrap();
        let f = allocation(dir.path(), "shard");
        let fds = vec![f.as_fd(); MAX_FDS];
        let note = vec![7u8; MAX_NOTE];
        let offer = Offer { fds: &fds, note: &note };
        let taken = thread::scope(|scope| {
            let server = scope
                .spawn(|| Meeting { dir: dir.path(), rank: 0, limit: LIMIT }.exchange(offer, &set(&[1]), &set(&[])));
            let taken =
                Meeting { dir: dir.path(), rank: 1, limit: LIMIT }.exchange(Offer::default(), &set(&[]), &set(&[0]));
            server.join().unwrap().unwrap();
            taken.unwrap()
        });
        assert_eq!((taken[&0].fds.len(), &taken[&0].note), (MAX_FDS, &note));
        assert_eq!(read(taken[&0].fds.last().unwrap().try_clone().unwrap()), "shard");
    }

    #[test]
    fn more_descriptors_than_a_message_carries_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = allocation(dir.path(), "x");
        let fds = vec![f.as_fd(); MAX_FDS + 1];
        let meeting = Meeting { dir: dir.path(), rank: 0, limit: LIMIT };
        let offer = Offer { fds: &fds, note: &[] };
        assert!(matches!(meeting.exchange(offer, &set(&[1]), &set(&[])), Err(E::TooMany { count: 254 })));
        let offer = Offer { fds: &[], note: &[0; MAX_NOTE + 1] };
        insta::assert_snapshot!(meeting.exchange(offer, &set(&[1]), &set(&[])).unwrap_err(), @"a note of 65537 B, longer than an offer carries (65536 B)");
    }

    #[test]
    fn three_ranks_pass_barriers_in_step_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let passed = std::sync::Mutex::new(Vec::new());
        thread::scope(|scope| {
            for rank in 0..3u32 {
                let (dir, passed) = (dir.path(), &passed);
                scope.spawn(move || {
                    let others = (0..3).filter(|&r| r != rank).collect();
                    let meeting = Meeting { dir, rank, limit: LIMIT };
                    for step in 0..4 {
                        // Rank 2 comes late to every step; nobody passes a step before it.
                        if rank == 2 {
                            thread::sleep(Duration::from_millis(20));
                        }
                        passed.lock().unwrap().push((step, rank));
                        meeting.barrier(&format!("step-{step}"), &others).unwrap();
                    }
                });
            }
        });
        let order = passed.into_inner().unwrap();
        let steps: Vec<u32> = order.iter().map(|&(step, _)| step).collect();
        assert!(steps.is_sorted(), "a rank arrived at a step before every rank had passed the last: {order:?}");
        let alone = Meeting { dir: dir.path(), rank: 0, limit: Duration::from_millis(100) };
        let e = alone.barrier("step-4", &set(&[1])).unwrap_err();
        assert!(matches!(e, E::PeerAbsent { peer: 1, .. }), "{e}");
    }
}

/// Rank processes meeting to share their memory .
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RendezvousError {
    #[error("rank {peer} did not open {} within {waited_s:.1} s: it never started, or failed before it could share its memory", socket.display())]
    PeerAbsent { peer: u32, socket: std::path::PathBuf, waited_s: f64 },
    #[error("rank {peer} maps rank {rank}'s memory but did not ask for it within {waited_s:.1} s")]
    PeerNeverAsked { peer: u32, rank: u32, waited_s: f64 },
    #[error("rank {peer}: {what}")]
    Protocol { peer: u32, what: String },
    #[error("{count} allocations to share, more than one message carries ({max})", max = MAX_FDS)]
    TooMany { count: usize },
    #[error("a note of {bytes} B, longer than an offer carries ({max} B)", max = MAX_NOTE)]
    NoteTooLong { bytes: usize },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}
