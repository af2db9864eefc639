//! Where the rank processes of a rank set meet to share memory. Each rank offers file
//! descriptors (its arena's physical allocations, as the driver exports them) to the
//! peers that map them, and takes those of the peers it maps, over Unix sockets in a
//! directory the ranks share: `rank-R.sock`, served by rank R. Everything happens within
//! one time limit, and a rank that never came is named: no rank waits for another forever.

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

use rustix::{
    io::Errno,
    net::{
        recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
        SendAncillaryMessage, SendFlags,
    },
};

use crate::errors::RendezvousError as E;

/// The most descriptors one message carries (the kernel's `SCM_MAX_FD`).
pub const MAX_FDS: usize = 253;
/// How often a rank looks again for a peer's socket or a peer's call.
const POLL: Duration = Duration::from_millis(5);

/// One rank's part in a meeting: who it is, where the ranks meet, and until when.
pub struct Meeting<'d> {
    pub dir: &'d Path,
    pub rank: u32,
    pub limit: Duration,
}

impl Meeting<'_> {
    /// Offers `offered` to each rank of `serve` (each asks once) and takes the descriptors
    /// of each rank of `take`, by peer, in the order the peer offered them.
    pub fn exchange(
        &self,
        offered: &[BorrowedFd<'_>],
        serve: &BTreeSet<u32>,
        take: &BTreeSet<u32>,
    ) -> Result<BTreeMap<u32, Vec<OwnedFd>>, E> {
        if offered.len() > MAX_FDS {
            return Err(E::TooMany { count: offered.len() });
        }
        let deadline = Instant::now() + self.limit;
        let own = self.socket(self.rank);
        // A socket left by an earlier meeting that died would refuse the bind.
        let _ = std::fs::remove_file(&own);
        let listener = UnixListener::bind(&own).map_err(io(format!("listen on {}", own.display())))?;
        let outcome = thread::scope(|scope| {
            let server = scope.spawn(|| self.serve(&listener, offered, serve, deadline));
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

    fn socket(&self, rank: u32) -> PathBuf {
        self.dir.join(format!("rank-{rank}.sock"))
    }

    /// Accepts each rank of `serve` once and sends it `offered`.
    fn serve(
        &self,
        listener: &UnixListener,
        offered: &[BorrowedFd<'_>],
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
            send(&stream, self.rank, offered)?;
        }
        Ok(())
    }

    /// Connects to `peer` (retrying until its socket opens or the deadline), says who asks,
    /// and receives what it offers.
    fn take(&self, peer: u32, deadline: Instant) -> Result<Vec<OwnedFd>, E> {
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

/// One message: this rank and the count, with the descriptors attached.
fn send(stream: &UnixStream, rank: u32, offered: &[BorrowedFd<'_>]) -> Result<(), E> {
    let header = [rank.to_le_bytes(), (offered.len() as u32).to_le_bytes()].concat();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(offered.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !offered.is_empty() && !control.push(SendAncillaryMessage::ScmRights(offered)) {
        return Err(E::TooMany { count: offered.len() });
    }
    sendmsg(stream, &[IoSlice::new(&header)], &mut control, SendFlags::empty())
        .map_err(|e| io("send the descriptors".into())(e.into()))?;
    Ok(())
}

/// The message [`send`] sent, checked: from `peer`, with as many descriptors as it says.
fn receive(stream: &UnixStream, peer: u32) -> Result<Vec<OwnedFd>, E> {
    let mut header = [0u8; 8];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let message = recvmsg(stream, &mut [IoSliceMut::new(&mut header)], &mut control, RecvFlags::CMSG_CLOEXEC)
        .map_err(|e| match e {
            Errno::AGAIN => E::Protocol { peer, what: "accepted the call and sent nothing in time".into() },
            e => io(format!("receive rank {peer}'s descriptors"))(e.into()),
        })?;
    let fds: Vec<OwnedFd> = control
        .drain()
        .flat_map(|cmsg| match cmsg {
            RecvAncillaryMessage::ScmRights(fds) => fds.collect(),
            _ => Vec::new(),
        })
        .collect();
    let bytes = message.bytes;
    let field = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    if bytes != header.len() || field(0) != peer || field(4) as usize != fds.len() {
        return Err(E::Protocol {
            peer,
            what: format!(
                "answered as rank {} with {} of {} descriptors ({bytes} header bytes)",
                field(0),
                fds.len(),
                field(4)
            ),
        });
    }
    Ok(fds)
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
                        let offered: Vec<BorrowedFd> = files.iter().map(|f| f.as_fd()).collect();
                        let peer = set(&[1 - rank]);
                        Meeting { dir, rank, limit: LIMIT }.exchange(&offered, &peer, &peer)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
        });
        for (rank, mut by_peer) in taken.into_iter().enumerate() {
            let peer = 1 - rank as u32;
            let texts: Vec<String> = by_peer.remove(&peer).unwrap().into_iter().map(read).collect();
            assert_eq!(texts, (0..3).map(|i| format!("rank {peer} allocation {i}")).collect::<Vec<_>>());
        }
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "the sockets are removed");
    }

    #[test]
    fn a_peer_that_never_comes_is_named_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let meeting = Meeting { dir: dir.path(), rank: 0, limit: Duration::from_millis(200) };
        let started = Instant::now();
        let Err(e) = meeting.exchange(&[], &set(&[]), &set(&[1])) else { panic!("rank 1 never came") };
        assert!(started.elapsed() < Duration::from_secs(2));
        let text = e.to_string().replace(&dir.path().display().to_string(), "DIR");
        insta::assert_snapshot!(text, @"rank 1 did not open DIR/rank-1.sock within 0.2 s: it never started, or failed before it could share its memory");
    }

    #[test]
    fn a_peer_absent_both_ways_is_told_as_absent() {
        let dir = tempfile::tempdir().unwrap();
        let meeting = Meeting { dir: dir.path(), rank: 0, limit: Duration::from_millis(100) };
        let e = meeting.exchange(&[], &set(&[1]), &set(&[1])).unwrap_err();
        assert!(matches!(e, E::PeerAbsent { peer: 1, .. }), "{e}");
    }

    #[test]
    fn a_peer_that_never_asks_is_named_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let meeting = Meeting { dir: dir.path(), rank: 0, limit: Duration::from_millis(200) };
        let f = allocation(dir.path(), "rank 0");
        let Err(e) = meeting.exchange(&[f.as_fd()], &set(&[1]), &set(&[])) else { panic!("rank 1 never asked") };
        insta::assert_snapshot!(e.to_string(), @"rank 1 maps rank 0's memory but did not ask for it within 0.2 s");
    }

    #[test]
    fn a_rank_that_asks_without_mapping_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let e = thread::scope(|scope| {
            let server =
                scope.spawn(|| Meeting { dir: dir.path(), rank: 0, limit: LIMIT }.exchange(&[], &set(&[1]), &set(&[])));
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
                send(&stream, 3, &[]).unwrap();
            });
            Meeting { dir: dir.path(), rank: 0, limit: LIMIT }.take(1, Instant::now() + LIMIT).unwrap_err()
        });
        insta::assert_snapshot!(e.to_string(), @"rank 1: answered as rank 3 with 0 of 0 descriptors (8 header bytes)");
    }

    #[test]
    fn as_many_descriptors_as_a_message_carries_arrive() {
        let dir = tempfile::tempdir().unwrap();
        let f = allocation(dir.path(), "shard");
        let offered = vec![f.as_fd(); MAX_FDS];
        let taken = thread::scope(|scope| {
            let server = scope
                .spawn(|| Meeting { dir: dir.path(), rank: 0, limit: LIMIT }.exchange(&offered, &set(&[1]), &set(&[])));
            let taken = Meeting { dir: dir.path(), rank: 1, limit: LIMIT }.exchange(&[], &set(&[]), &set(&[0]));
            server.join().unwrap().unwrap();
            taken.unwrap()
        });
        assert_eq!(taken[&0].len(), MAX_FDS);
        assert_eq!(read(taken[&0].last().unwrap().try_clone().unwrap()), "shard");
    }

    #[test]
    fn more_descriptors_than_a_message_carries_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = allocation(dir.path(), "x");
        let offered = vec![f.as_fd(); MAX_FDS + 1];
        let meeting = Meeting { dir: dir.path(), rank: 0, limit: LIMIT };
        assert!(matches!(meeting.exchange(&offered, &set(&[1]), &set(&[])), Err(E::TooMany { count: 254 })));
    }
}
