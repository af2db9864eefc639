//! A rank of a rank set whose kernels reach into its peers' arenas (the manifest's
//! `peers`). Its arena is mapped shareable; the ranks meet, each hands every other its
//! shards with a note of where they lie, and each maps its peer ranges at their windows.
//! Launches are collective: every rank resets its writable buffers (the signal flags
//! among them), waits for the others, launches, and waits again once its launch is done,
//! so no rank resets memory a peer's kernel may still read or signal into. Written before
//! a GPU could run it.

use std::{
    cell::Cell,
    collections::{BTreeMap, BTreeSet},
    os::fd::{AsFd, OwnedFd},
    path::PathBuf,
    time::Duration,
};

use gnomon_format::PeerRange;

use crate::{
    cuda::{map_peer, ArenaMapping, Context, MappedShard, PeerPiece, PeerWindow, Stream},
    errors::ReplayError,
    rendezvous::{Meeting, Offer, Taken},
};

/// How long a rank waits for the others at each meeting unless told otherwise: for their
/// restore to reach its mapping, and at each launch. (`gnomon replay --meet-limit`
/// defaults to it too.)
pub const MEETING_LIMIT: Duration = Duration::from_secs(60);

/// Where the ranks of a set meet (a directory they share), and how long each waits there.
#[derive(Clone, Debug)]
pub struct RankLink {
    pub dir: PathBuf,
    pub limit: Duration,
}

/// This rank's place among its peers while it replays, or while the kit captures and
/// launches a port's ranks.
pub struct Ranks {
    link: RankLink,
    rank: u32,
    others: BTreeSet<u32>,
    steps: Cell<u64>,
}

impl Ranks {
    /// Rank `rank` of `world`, meeting the others at `link`.
    pub fn new(rank: u32, world: u32, link: RankLink) -> Self {
        let others = (0..world).filter(|&r| r != rank).collect();
        Self { link, rank, others, steps: Cell::new(0) }
    }

    fn meeting(&self) -> Meeting<'_> {
        Meeting { dir: &self.link.dir, rank: self.rank, limit: self.link.limit }
    }

    /// Waits for every other rank to come this far: the ranks call it equally often.
    pub fn sync(&self) -> Result<(), ReplayError> {
        let step = self.steps.replace(self.steps.get() + 1);
        Ok(self.meeting().barrier(&format!("sync-{step}"), &self.others)?)
    }

    /// Once `stream` is idle, waits for every other rank: around each collective launch,
    /// so no rank resets memory a peer's kernel may still read.
    pub fn sync_after(&self, stream: &Stream) -> Result<(), ReplayError> {
        stream.synchronize()?;
        self.sync()
    }

    /// Hands every other rank the shards of `own` (mapped shareable at `base`) and maps
    /// each of `peers` at its window from what its peer handed over.
    pub fn share_and_map(
        &self,
        peers: &[PeerRange],
        ctx: &Context,
        own: &ArenaMapping,
        base: u64,
    ) -> Result<Vec<PeerWindow>, ReplayError> {
        let (shared, fds) = shares(own, base)?;
        let note = encode(shared.into_iter());
        let borrowed: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
        let share = self.link.dir.join("share");
        std::fs::create_dir_all(&share).map_err(|e| peer_error(self.rank, format!("make {}: {e}", share.display())))?;
        let meeting = Meeting { dir: &share, ..self.meeting() };
        let taken = meeting.exchange(Offer { fds: &borrowed, note: &note }, &self.others, &self.others)?;
        map_ranges(ctx, peers, &taken)
    }
}

/// Maps `range` of a peer whose arena this process mapped too, at `peer_base` (an
/// exporter holding every rank of a set in one context): the window is another mapping of
/// the same memory, as a peer process's would be.
pub fn map_own_range(
    ctx: &Context,
    range: &PeerRange,
    peer: &ArenaMapping,
    peer_base: u64,
) -> Result<PeerWindow, ReplayError> {
    let (shared, fds) = shares(peer, peer_base)?;
    map_range(ctx, 0, range, &shared, &fds)
}

/// The shards of `mapping` (at `base`) that hold memory, and each as a file descriptor.
fn shares(mapping: &ArenaMapping, base: u64) -> Result<(Vec<Shared>, Vec<OwnedFd>), ReplayError> {
    let backed: Vec<&MappedShard> = mapping.shards().iter().filter(|s| s.backed > 0).collect();
    let fds = backed.iter().map(|s| s.export()).collect::<Result<_, _>>()?;
    Ok((backed.iter().map(|s| Shared { offset: s.address - base, backed: s.backed }).collect(), fds))
}

/// Maps every peer range, at its window, from the shards its peer handed over.
fn map_ranges(
    ctx: &Context,
    ranges: &[PeerRange],
    taken: &BTreeMap<u32, Taken>,
) -> Result<Vec<PeerWindow>, ReplayError> {
    let mut windows = Vec::new();
    for (i, range) in ranges.iter().enumerate() {
        let peer = taken.get(&range.rank).ok_or_else(|| peer_error(range.rank, "handed nothing over".into()))?;
        let shards = decode(&peer.note, peer.fds.len()).map_err(|what| peer_error(range.rank, what))?;
        windows.push(map_range(ctx, i, range, &shards, &peer.fds)?);
    }
    Ok(windows)
}

/// Maps peer range `index` at its window from its peer's `shards`, one descriptor each.
fn map_range(
    ctx: &Context,
    index: usize,
    range: &PeerRange,
    shards: &[Shared],
    fds: &[OwnedFd],
) -> Result<PeerWindow, ReplayError> {
    let pieces = pieces(range, shards).map_err(|what| peer_error(range.rank, format!("peer range {index}: {what}")))?;
    let pieces: Vec<PeerPiece> =
        pieces.iter().map(|p| PeerPiece { fd: fds[p.shard].as_fd(), offset: p.offset, len: p.len }).collect();
    Ok(map_peer(ctx, range.address, &pieces)?)
}

fn peer_error(peer: u32, what: String) -> ReplayError {
    crate::rendezvous::RendezvousError::Protocol { peer, what }.into()
}

/// A shard a rank shares: where it starts in the rank's arena, and the bytes that back it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shared {
    offset: u64,
    backed: u64,
}

/// The note that goes with a rank's shards: each one's offset and backed bytes, as
/// little-endian u64 pairs in the order of the descriptors.
fn encode(shards: impl Iterator<Item = Shared>) -> Vec<u8> {
    shards.flat_map(|s| [s.offset.to_le_bytes(), s.backed.to_le_bytes()]).flatten().collect()
}

/// A peer's note, checked against the descriptors it came with.
fn decode(note: &[u8], fds: usize) -> Result<Vec<Shared>, String> {
    if note.len() != fds * 16 {
        return Err(format!("its note of {} B does not describe its {fds} shards ({} B)", note.len(), fds * 16));
    }
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
    Ok(note.chunks_exact(16).map(|c| Shared { offset: word(&c[..8]), backed: word(&c[8..]) }).collect())
}

/// Part of a window: `len` bytes of shard `shard` from `offset` into it, after the pieces
/// before it.
#[derive(Debug, PartialEq, Eq)]
struct Piece {
    shard: usize,
    offset: u64,
    len: u64,
}

/// How a peer range is mapped from the shards its peer shares: one piece per shard it
/// crosses, in order. Every byte of the range must be backed by one of them, and each
/// shard mapped whole: driver 580 refuses to map part of an allocation
/// (`CUDA_ERROR_NOT_SUPPORTED`).
fn pieces(range: &PeerRange, shards: &[Shared]) -> Result<Vec<Piece>, String> {
    let end = range.offset.checked_add(range.size).ok_or("its end overflows")?;
    let mut at = range.offset;
    let mut pieces = Vec::new();
    while at < end {
        let (shard, s) =
            shards.iter().enumerate().find(|(_, s)| s.offset <= at && at - s.offset < s.backed).ok_or_else(|| {
                format!("offset {at:#x} of rank {}'s arena is backed by no shard it shares", range.rank)
            })?;
        let len = (s.offset + s.backed).min(end) - at;
        if at != s.offset || len != s.backed {
            return Err(format!(
                "it maps {len:#x} bytes from {at:#x} of rank {}'s shard at {:#x} ({:#x} bytes), and a window maps a shard whole",
                range.rank, s.offset, s.backed
            ));
        }
        pieces.push(Piece { shard, offset: 0, len });
        at += len;
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_meets_every_other_in_steps_numbered_alike() {
        let dir = tempfile::tempdir().unwrap();
        let link = RankLink { dir: dir.path().to_owned(), limit: Duration::from_secs(5) };
        std::thread::scope(|scope| {
            for rank in 0..3 {
                let link = link.clone();
                scope.spawn(move || {
                    let ranks = Ranks::new(rank, 3, link);
                    assert_eq!(ranks.others, (0..3).filter(|&r| r != rank).collect());
                    (0..2).for_each(|_| ranks.sync().unwrap());
                });
            }
        });
        let mut steps: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        steps.sort();
        assert_eq!(steps, ["sync-0", "sync-1"]);
    }

    const MIB: u64 = 1 << 20;

    fn range(offset: u64, size: u64) -> PeerRange {
        PeerRange { rank: 1, offset, size, address: 0x7000_0000_0000 }
    }

    #[test]
    fn a_range_across_two_shards_is_mapped_in_two_whole_pieces_in_order() {
        let across = [Shared { offset: 0, backed: 4 * MIB }, Shared { offset: 64 * MIB, backed: 2 * MIB }];
        assert_eq!(pieces(&range(0, 4 * MIB), &across).unwrap(), [Piece { shard: 0, offset: 0, len: 4 * MIB }]);
        let adjacent = [Shared { offset: 0, backed: 4 * MIB }, Shared { offset: 4 * MIB, backed: 4 * MIB }];
        assert_eq!(
            pieces(&range(0, 8 * MIB), &adjacent).unwrap(),
            [Piece { shard: 0, offset: 0, len: 4 * MIB }, Piece { shard: 1, offset: 0, len: 4 * MIB }]
        );
    }

    #[test]
    fn a_range_past_what_the_peer_backs_is_refused_at_its_first_unbacked_byte() {
        let shards = [Shared { offset: 0, backed: 4 * MIB }, Shared { offset: 64 * MIB, backed: 2 * MIB }];
        insta::assert_snapshot!(pieces(&range(0, 6 * MIB), &shards).unwrap_err(), @"offset 0x400000 of rank 1's arena is backed by no shard it shares");
        assert!(pieces(&range(u64::MAX, 2), &shards).is_err());
    }

    #[test]
    fn a_range_over_part_of_a_shard_is_refused_as_the_driver_would() {
        let shards = [Shared { offset: 0, backed: 4 * MIB }, Shared { offset: 4 * MIB, backed: 4 * MIB }];
        insta::assert_snapshot!(pieces(&range(2 * MIB, 2 * MIB), &shards).unwrap_err(), @"it maps 0x200000 bytes from 0x200000 of rank 1's shard at 0x0 (0x400000 bytes), and a window maps a shard whole");
        assert!(pieces(&range(0, 6 * MIB), &shards).is_err(), "the second shard is mapped in part");
    }

    #[test]
    fn a_note_round_trips_and_one_that_does_not_fit_its_descriptors_is_refused() {
        let shards = [Shared { offset: 0, backed: 4 * MIB }, Shared { offset: 64 * MIB, backed: 2 * MIB }];
        let note = encode(shards.into_iter());
        assert_eq!(decode(&note, 2).unwrap(), shards);
        insta::assert_snapshot!(decode(&note, 3).unwrap_err(), @"its note of 32 B does not describe its 3 shards (48 B)");
    }
}
