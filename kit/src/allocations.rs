//! The arena's bookkeeping: which ranges are allocated, free, or retired. An allocation
//! made or freed while its stream is being captured is *retired* when freed: a graph may
//! read or write it at every launch, so its range is never handed out again. Everything
//! else is reused first-fit, as a plain allocator would. Under PyTorch's caching allocator
//! the allocations are its segments, which `divided` splits into the blocks it hands out.

use std::collections::BTreeMap;

use crate::errors::AllocError;

/// Every allocation starts at a multiple of this, as CUDA's own allocators do (vectorised
/// kernels assume it).
pub const ALIGN: u64 = 512;

/// One allocation: its arena offset, the size asked for, and whether a capture may use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub offset: u64,
    pub size: u64,
    pub captured: bool,
}

/// The arena's bytes by standing (allocations counted by the 512-byte units they take),
/// and how far into it allocations reach now and ever did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Stats {
    pub arena: u64,
    pub live: u64,
    /// Freed, but kept for the graphs that may use them.
    pub retired: u64,
    pub free: u64,
    /// The end of the highest allocation live or retired: what a core of this arena maps.
    pub in_use_end: u64,
    /// The highest end ever reached: the arena this program needs.
    pub peak_end: u64,
}

/// Where an allocation stands now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    Live,
    /// Freed, but a captured graph may use it; never reused.
    Retired,
}

/// A block PyTorch's caching allocator carved out of one of the arena's allocations (its
/// segments), and whether a tensor holds it now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub address: u64,
    pub size: u64,
    pub live: bool,
}

#[derive(Clone, Debug)]
pub struct Allocations {
    base: u64,
    size: u64,
    /// The highest end any allocation reached, as an offset.
    peak_end: u64,
    /// Free ranges by offset, coalesced: offset → length.
    free: BTreeMap<u64, u64>,
    live: BTreeMap<u64, Block>,
    retired: BTreeMap<u64, Block>,
}

impl Allocations {
    pub fn new(base: u64, size: u64) -> Self {
        let free = if size > 0 { BTreeMap::from([(0, size)]) } else { BTreeMap::new() };
        Self { base, size, peak_end: 0, free, live: BTreeMap::new(), retired: BTreeMap::new() }
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The address of `size` new bytes, first fit; `capturing` marks it as a capture's.
    pub fn allocate(&mut self, size: u64, capturing: bool) -> Result<u64, AllocError> {
        let span = span(size).ok_or(AllocError::TooLarge { size })?;
        let Some((&offset, &len)) = self.free.iter().find(|(_, &len)| len >= span) else {
            return Err(AllocError::Exhausted {
                size,
                arena: self.size,
                free: self.free.values().sum(),
                largest: self.free.values().copied().max().unwrap_or(0),
            });
        };
        self.free.remove(&offset);
        if len > span {
            self.free.insert(offset + span, len - span);
        }
        self.live.insert(offset, Block { offset, size, captured: capturing });
        self.peak_end = self.peak_end.max(offset + span);
        Ok(self.base + offset)
    }

    /// Frees the allocation at `address`: retired if a capture may use it, reusable else.
    pub fn free(&mut self, address: u64, capturing: bool) -> Result<(), AllocError> {
        let offset = address.checked_sub(self.base).ok_or(AllocError::NotAllocated { address })?;
        let mut block = self.live.remove(&offset).ok_or(AllocError::NotAllocated { address })?;
        if block.captured || capturing {
            block.captured = true;
            self.retired.insert(offset, block);
            return Ok(());
        }
        self.release(offset, span(block.size).expect("allocated sizes have a span"));
        Ok(())
    }

    /// The allocation, live or retired, that holds `address`.
    pub fn holding(&self, address: u64) -> Option<(Block, Standing)> {
        let offset = address.checked_sub(self.base)?;
        let within = |map: &BTreeMap<u64, Block>| {
            let (_, b) = map.range(..=offset).next_back()?;
            (offset - b.offset < b.size).then_some(*b)
        };
        within(&self.live)
            .map(|b| (b, Standing::Live))
            .or_else(|| within(&self.retired).map(|b| (b, Standing::Retired)))
    }

    /// Every allocation a core must declare, live and retired, by offset.
    pub fn blocks(&self) -> Vec<(Block, Standing)> {
        let live = self.live.values().map(|b| (*b, Standing::Live));
        let retired = self.retired.values().map(|b| (*b, Standing::Retired));
        let mut all: Vec<_> = live.chain(retired).collect();
        all.sort_by_key(|(b, _)| b.offset);
        all
    }

    /// The arena as PyTorch's caching allocator divides it: each allocation some pieces lie
    /// in is replaced by them, live pieces live and free ones retired (a graph captured into
    /// the pool may use them as scratch; their contents are undefined). A piece that is
    /// empty, lies in no allocation, runs past the end of its own, or overlaps another is
    /// refused.
    pub fn divided(&self, pieces: &[Piece]) -> Result<Allocations, AllocError> {
        let mut sorted = pieces.to_vec();
        sorted.sort_by_key(|p| p.address);
        let mut reached = 0;
        let mut blocks = Vec::with_capacity(sorted.len());
        for p in sorted {
            let refused = |why| AllocError::Piece { address: p.address, size: p.size, why };
            let (outer, standing) = self.holding(p.address).ok_or(refused("it lies in no allocation of the arena"))?;
            let offset = p.address - self.base;
            let end = offset.checked_add(p.size).filter(|_| p.size > 0).ok_or(refused("its size is impossible"))?;
            if end > outer.offset + outer.size {
                return Err(refused("it runs past the end of the allocation it starts in"));
            }
            if offset < reached {
                return Err(refused("it overlaps the piece before it"));
            }
            reached = end;
            let standing = if p.live { standing } else { Standing::Retired };
            blocks.push((outer.offset, Block { offset, size: p.size, captured: outer.captured }, standing));
        }
        let mut divided = self.clone();
        for (outer, ..) in &blocks {
            divided.live.remove(outer);
            divided.retired.remove(outer);
        }
        for (_, block, standing) in blocks {
            let held = if standing == Standing::Live { &mut divided.live } else { &mut divided.retired };
            held.insert(block.offset, block);
        }
        Ok(divided)
    }

    /// The allocations with each run of them that one of `ranges` (the bytes of a memset or
    /// a copy, `(address, len)`) spans joined into one, live if any part is: a capture
    /// reuses blocks it freed, so a memset of an early intermediate may span blocks that
    /// later tensors took, and a buffer must hold everything one node touches.
    pub fn joined(&self, ranges: &[(u64, u64)]) -> Allocations {
        let mut joined = self.clone();
        for &(address, len) in ranges {
            let Some(start) = address.checked_sub(self.base) else { continue };
            let end = start.saturating_add(len);
            let live = overlapping(&joined.live, start, end);
            let retired = overlapping(&joined.retired, start, end);
            if live.len() + retired.len() < 2 {
                continue;
            }
            let spanned = || live.iter().chain(&retired);
            let offset = spanned().map(|b| b.offset).min().expect("two blocks or more");
            let reach = spanned().map(|b| b.offset + b.size).max().expect("two blocks or more");
            let captured = spanned().any(|b| b.captured);
            live.iter().for_each(|b| _ = joined.live.remove(&b.offset));
            retired.iter().for_each(|b| _ = joined.retired.remove(&b.offset));
            let held = if live.is_empty() { &mut joined.retired } else { &mut joined.live };
            held.insert(offset, Block { offset, size: reach - offset, captured });
        }
        joined
    }

    /// What the arena holds, in bytes: the kit's side of PyTorch's memory statistics (how
    /// far its segments reach is the arena a core of this process maps).
    pub fn stats(&self) -> Stats {
        let spans = |map: &BTreeMap<u64, Block>| map.values().filter_map(|b| span(b.size)).sum();
        let ends = self.live.values().chain(self.retired.values()).filter_map(|b| Some(b.offset + span(b.size)?));
        Stats {
            arena: self.size,
            live: spans(&self.live),
            retired: spans(&self.retired),
            free: self.free.values().sum(),
            in_use_end: ends.max().unwrap_or(0),
            peak_end: self.peak_end,
        }
    }

    /// Returns `[offset, offset + len)` to the free ranges, joined with its neighbours.
    fn release(&mut self, mut offset: u64, mut len: u64) {
        if let Some((&before, &before_len)) = self.free.range(..offset).next_back() {
            if before + before_len == offset {
                self.free.remove(&before);
                (offset, len) = (before, before_len + len);
            }
        }
        if let Some(after_len) = self.free.remove(&(offset + len)) {
            len += after_len;
        }
        self.free.insert(offset, len);
    }
}

/// The blocks of `map` that overlap `[start, end)`.
fn overlapping(map: &BTreeMap<u64, Block>, start: u64, end: u64) -> Vec<Block> {
    let before = map.range(..start).next_back().map(|(_, b)| *b).filter(|b| b.offset + b.size > start);
    before.into_iter().chain(map.range(start..end).map(|(_, b)| *b)).collect()
}

/// The arena bytes an allocation of `size` takes; a zero-byte allocation takes one unit,
/// so every allocation has an address of its own.
fn span(size: u64) -> Option<u64> {
    size.max(1).checked_next_multiple_of(ALIGN)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x2000_0000_0000;

    #[test]
    fn freed_ranges_are_reused_first_fit_and_coalesced() {
        let mut a = Allocations::new(BASE, 4 * ALIGN);
        let x = a.allocate(ALIGN, false).unwrap();
        let y = a.allocate(1, false).unwrap();
        let z = a.allocate(2 * ALIGN, false).unwrap();
        assert_eq!((x, y, z), (BASE, BASE + ALIGN, BASE + 2 * ALIGN));
        assert!(matches!(a.allocate(1, false), Err(AllocError::Exhausted { free: 0, .. })));
        assert!(a.free.is_empty(), "an exact fit leaves no empty range behind: {:?}", a.free);
        a.free(x, false).unwrap();
        a.free(z, false).unwrap();
        assert_eq!(a.free, BTreeMap::from([(0, ALIGN), (2 * ALIGN, 2 * ALIGN)]), "apart while y holds the middle");
        a.free(y, false).unwrap();
        assert_eq!(a.free, BTreeMap::from([(0, 4 * ALIGN)]), "y joins the ranges before and after it");
        assert_eq!((a.base(), a.size()), (BASE, 4 * ALIGN));
        let stats =
            Stats { arena: 4 * ALIGN, live: 0, retired: 0, free: 4 * ALIGN, in_use_end: 0, peak_end: 4 * ALIGN };
        assert_eq!(a.stats(), stats, "all freed, after reaching the end");
        assert_eq!(a.allocate(4 * ALIGN, false).unwrap(), BASE);
    }

    /// What a capture touched is never handed out again, whether it was allocated during
    /// the capture or freed during it.
    #[test]
    fn what_a_capture_may_use_is_retired_never_reused() {
        let mut a = Allocations::new(BASE, 3 * ALIGN);
        let during = a.allocate(10, true).unwrap();
        let before = a.allocate(10, false).unwrap();
        a.free(during, false).unwrap();
        a.free(before, true).unwrap();
        let next = a.allocate(10, false).unwrap();
        assert_eq!(next, BASE + 2 * ALIGN);
        assert_eq!(a.holding(during + 9).map(|(_, s)| s), Some(Standing::Retired));
        assert_eq!(a.holding(during + 10), None, "past the size asked for");
        let standings: Vec<_> = a.blocks().into_iter().map(|(b, s)| (b.offset, s)).collect();
        assert_eq!(standings, [(0, Standing::Retired), (ALIGN, Standing::Retired), (2 * ALIGN, Standing::Live)]);
        a.free(next, false).unwrap();
        let stats = a.stats();
        assert_eq!((stats.live, stats.retired, stats.free), (0, 2 * ALIGN, ALIGN));
        assert_eq!((stats.in_use_end, stats.peak_end), (2 * ALIGN, 3 * ALIGN), "retired blocks stay in use");
    }

    /// Two segments, as PyTorch's caching allocator asks for them: the first divided into a
    /// live tensor and a free block, the second not described and kept whole.
    #[test]
    fn segments_are_divided_into_the_blocks_pytorch_hands_out() {
        let mut a = Allocations::new(BASE, 4 * ALIGN);
        let segment = a.allocate(2 * ALIGN, true).unwrap();
        let other = a.allocate(ALIGN, false).unwrap();
        let pieces = [
            Piece { address: segment + ALIGN, size: ALIGN, live: false },
            Piece { address: segment, size: ALIGN, live: true },
        ];
        let d = a.divided(&pieces).unwrap();
        let standings: Vec<_> = d.blocks().into_iter().map(|(b, s)| (b.offset, b.size, b.captured, s)).collect();
        assert_eq!(
            standings,
            [
                (0, ALIGN, true, Standing::Live),
                (ALIGN, ALIGN, true, Standing::Retired),
                (2 * ALIGN, ALIGN, false, Standing::Live)
            ]
        );
        let refused = |address, size, live| a.divided(&[Piece { address, size, live }]).unwrap_err().to_string();
        insta::assert_snapshot!(refused(BASE + 3 * ALIGN, 8, true), @"PyTorch's block of 8 bytes at 0x200000000600 cannot be declared: it lies in no allocation of the arena");
        insta::assert_snapshot!(refused(segment + ALIGN, ALIGN + 1, true), @"PyTorch's block of 513 bytes at 0x200000000200 cannot be declared: it runs past the end of the allocation it starts in");
        insta::assert_snapshot!(refused(other, 0, true), @"PyTorch's block of 0 bytes at 0x200000000400 cannot be declared: its size is impossible");
        let overlapping = [
            Piece { address: segment, size: ALIGN + 8, live: true },
            Piece { address: segment + ALIGN, size: 8, live: true },
        ];
        insta::assert_snapshot!(a.divided(&overlapping).unwrap_err().to_string(), @"PyTorch's block of 8 bytes at 0x200000000200 cannot be declared: it overlaps the piece before it");
    }

    /// A memset of a capture's early intermediate that spans the blocks two later tensors
    /// took makes one buffer of them; a range inside one block, or outside the arena,
    /// changes nothing.
    #[test]
    fn blocks_one_node_spans_are_joined() {
        let mut a = Allocations::new(BASE, 8 * ALIGN);
        let w = a.allocate(ALIGN, false).unwrap();
        let x = a.allocate(ALIGN, true).unwrap();
        let y = a.allocate(ALIGN, true).unwrap();
        let z = a.allocate(ALIGN, false).unwrap();
        a.free(x, false).unwrap();
        let ranges = [(x + 8, ALIGN), (z, 8), (0x10, 4), (BASE + 7 * ALIGN, 8)];
        let joined: Vec<_> = a.joined(&ranges).blocks().into_iter().map(|(b, s)| (b.offset, b.size, s)).collect();
        let live = Standing::Live;
        assert_eq!(joined, [(0, ALIGN, live), (x - BASE, 2 * ALIGN, live), (z - BASE, ALIGN, live)]);
        let retired_only = a.joined(&[(x, 8)]).blocks();
        assert_eq!(retired_only[1], (Block { offset: ALIGN, size: ALIGN, captured: true }, Standing::Retired));
        assert_eq!((w, y), (BASE, BASE + 2 * ALIGN));
    }

    #[test]
    fn unknown_addresses_and_impossible_sizes_are_refused() {
        let mut a = Allocations::new(BASE, ALIGN);
        assert!(matches!(a.free(BASE, false), Err(AllocError::NotAllocated { .. })));
        assert!(matches!(a.free(1, false), Err(AllocError::NotAllocated { .. })));
        assert!(matches!(a.allocate(u64::MAX, false), Err(AllocError::TooLarge { .. })));
        let x = a.allocate(0, false).unwrap();
        assert!(matches!(a.free(x + 1, false), Err(AllocError::NotAllocated { .. })), "not the start");
        a.free(x, false).unwrap();
        assert!(matches!(a.free(x, false), Err(AllocError::NotAllocated { .. })), "freed twice");
    }
}
