//! A template's outputs after one launch, as the judge receives them ([`OutputCheck`]):
//! the first launch's read back and hashed, a later launch's (and the launch under the
//! second poison) compared with the first on the device, by one position-dependent sum per
//! output ([`Checksummer::checksums`]), and read back only where a sum differs. The
//! serving catalogue's qualification spent 39.3 of its 110 s reading several GB of outputs
//! after every one of its launches, most of them only to find the first launch's digest.

use std::{collections::HashMap, sync::Arc};

use gnomon_format::{
    digest::sha256_each,
    spread::{Blank, Element},
    Expectation, Manifest, OutputDigest,
};

use super::{Checksummer, LoadedState, OutputCheck, RangeCheck};
use crate::{
    cuda::{Context, PinnedHost, Stream, HUGE_PAGE},
    errors::ReplayError,
};

/// A template's outputs of at least this many bytes are summed on the device after each
/// launch. Estimated, not measured: a prepared sum costs a zeroing copy, a launch, a wait
/// and a read-back (about 40 µs), what reading 64 KiB at the runners' 14 GB/s pageable rate
/// and hashing it at about 2 GB/s costs; at 256 KiB a read costs ~0.15 ms, and a core of
/// many small templates (the nightly's 64 000) keeps reading as before.
const SUMS_FROM_BYTES: u64 = 256 << 10;

/// A template's first launch, as later launches are compared with it: where its outputs
/// lie in the list they were pushed to, and their device sums (none for small outputs).
pub(super) struct FirstLaunch {
    at: usize,
    sums: Option<Vec<u64>>,
}

/// The first launches of one pass over the templates, by template, with the outputs they
/// index.
#[derive(Default)]
pub(super) struct FirstLaunches {
    by_template: HashMap<String, FirstLaunch>,
}

/// What reading outputs cost: the bytes read back to the host and the bytes found alike
/// the first launch's on the device.
#[derive(Clone, Copy, Debug, Default)]
pub struct OutputTraffic {
    pub read_bytes: u64,
    pub summed_bytes: u64,
}

impl std::ops::AddAssign for OutputTraffic {
    fn add_assign(&mut self, other: Self) {
        self.read_bytes += other.read_bytes;
        self.summed_bytes += other.summed_bytes;
    }
}

/// An output whose elements check nothing (all NaN or infinite, or all one value): its
/// element type, how many elements it has and what they all are. Found where the output
/// is read, since its bytes are kept only where a rule reads them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlankOutput {
    pub element: Element,
    pub elements: usize,
    pub all: Blank,
}

impl BlankOutput {
    /// What `bytes` of output `o` all are, where its element type is known and they check
    /// nothing.
    fn of(o: &OutputDigest, bytes: &[u8]) -> Option<Self> {
        Self::of_elements(o.element.or_else(|| Some(o.variation.as_ref()?.element))?, bytes)
    }

    /// What `bytes` of `element`s all are, where they check nothing.
    pub fn of_elements(element: Element, bytes: &[u8]) -> Option<Self> {
        let all = element.blank(bytes)?;
        Some(Self { element, elements: bytes.len() / element.size(), all })
    }
}

/// Whether a rule reads the bytes of `o`'s `launch`: every launch of a varying output, and
/// the first launch of a template with a CPU reference.
fn kept(e: &Expectation, o: &OutputDigest, launch: u32) -> bool {
    o.variation.is_some() || (launch == 0 && e.reference.is_some())
}

/// Where a reader finds a launch's outputs: the arena on the device ([`OnDevice`]), or in
/// tests a map of bytes.
pub(super) trait OutputSource {
    /// The bytes of the buffers `names` names, together.
    fn bytes_of(&self, names: &[&str]) -> Result<u64, ReplayError>;
    /// Reads back what the buffers `names` names hold now and hands their bytes to `take`,
    /// in order, several at a time (as many as fit the host's staging memory).
    fn read(&mut self, names: &[&str], take: &mut dyn FnMut(&[&[u8]])) -> Result<(), ReplayError>;
    /// One sum per buffer `names` names (`template`'s outputs), the same for the same bytes.
    fn sums(&mut self, template: &str, names: &[&str]) -> Result<Vec<u64>, ReplayError>;
}

/// The outputs in a restored arena, summed by the device, read back through page-locked
/// staging memory.
pub(super) struct OnDevice<'r> {
    arena: &'r LoadedState,
    checksummer: &'r Checksummer,
    stream: &'r Stream,
    /// The sums of the template being read, prepared once for all its launches.
    check: Option<(String, RangeCheck<'r>)>,
    staging: &'r mut OutputStaging,
}

impl<'r> OnDevice<'r> {
    pub(super) fn new(
        arena: &'r LoadedState,
        checksummer: &'r Checksummer,
        stream: &'r Stream,
        staging: &'r mut OutputStaging,
    ) -> Self {
        Self { arena, checksummer, stream, check: None, staging }
    }
}

/// The most page-locked memory outputs are read into; an output larger than this alone is
/// read into a vector of its own.
const STAGING_BYTES: u64 = 1 << 30;

/// Page-locked memory a restore's passes read outputs into, pinned once, at the first read,
/// as large as the most bytes one template's outputs hold (at most [`STAGING_BYTES`]).
/// Read into fresh pageable vectors, the serving catalogue's first launches (23.6 GB) took
/// 13.6 s, 1.7 GB/s, each page faulted in by the copy, where the page-locked floor is
/// 51 GB/s.
pub(super) struct OutputStaging {
    pool: Option<PinnedHost>,
    len: usize,
}

impl OutputStaging {
    /// Staging for the outputs `m`'s expectations name in `arena`.
    pub(super) fn for_outputs(m: &Manifest, arena: &LoadedState) -> Result<Self, ReplayError> {
        let mut most = 0;
        for e in &m.expectations {
            let names: Vec<&str> = e.outputs.iter().map(|o| o.buffer.as_str()).collect();
            most = arena.bytes_of(&names)?.min(STAGING_BYTES).max(most);
        }
        // In whole huge pages, as the pool is mapped and page-locked.
        Ok(Self { pool: None, len: (most as usize).next_multiple_of(HUGE_PAGE) })
    }

    fn pool(&mut self, ctx: &Context) -> Result<&mut [u8], ReplayError> {
        if self.len == 0 {
            return Ok(&mut []);
        }
        if self.pool.is_none() {
            self.pool = Some(PinnedHost::new(ctx, self.len)?);
        }
        Ok(self.pool.as_mut().expect("pinned above").as_mut_slice())
    }
}

impl OutputSource for OnDevice<'_> {
    fn bytes_of(&self, names: &[&str]) -> Result<u64, ReplayError> {
        self.arena.bytes_of(names)
    }

    fn read(&mut self, names: &[&str], take: &mut dyn FnMut(&[&[u8]])) -> Result<(), ReplayError> {
        if names.is_empty() {
            return Ok(());
        }
        let arena = self.arena;
        let sizes = names.iter().map(|n| arena.bytes_of(&[n])).collect::<Result<Vec<_>, _>>()?;
        let staging = self.staging.pool(arena.context())?;
        read_in_runs(names, &sizes, staging, &mut |n, dst| arena.read_into(n, dst), &mut |n| arena.read(n), take)
    }

    fn sums(&mut self, template: &str, names: &[&str]) -> Result<Vec<u64>, ReplayError> {
        if self.check.as_ref().is_none_or(|(t, _)| t != template) {
            self.check = Some((template.to_owned(), self.arena.check_of(names, self.checksummer)?));
        }
        let (_, check) = self.check.as_ref().expect("prepared above");
        check.run(self.stream)
    }
}

/// Reads one template's outputs after its `launch`: the first launch of a pass without an
/// `earlier` one reads and hashes every output (and sums them, where a later launch or pass
/// will be compared with it); any other launch compares sums with the first launch, of this
/// pass (`outputs`, `firsts`) or of the `earlier` pass, and reads only the outputs that
/// differ.
pub(super) struct OutputReader<'p, S> {
    source: S,
    earlier: Option<Pass<'p>>,
    sum_first: bool,
}

/// A pass over the templates: the outputs it pushed and its first launches among them.
pub(super) type Pass<'p> = (&'p [OutputCheck], &'p FirstLaunches);

impl<'p, S: OutputSource> OutputReader<'p, S> {
    /// A reader of one pass: compared with the `earlier` pass's first launches (the
    /// launches under the second poison with the restore's), or with its own, which are
    /// summed when `sum_first` says a comparison will follow.
    pub(super) fn new(source: S, earlier: Option<Pass<'p>>, sum_first: bool) -> Self {
        Self { source, earlier, sum_first }
    }

    pub(super) fn read(
        &mut self,
        e: &Expectation,
        launch: u32,
        outputs: &mut Vec<OutputCheck>,
        firsts: &mut FirstLaunches,
        traffic: &mut OutputTraffic,
    ) -> Result<(), ReplayError> {
        let names: Vec<&str> = e.outputs.iter().map(|o| o.buffer.as_str()).collect();
        let bytes = self.source.bytes_of(&names)?;
        // A first launch is summed only at this size, so only then can a later one compare.
        let alike = match first_to_compare(e, launch, (outputs, firsts), self.earlier) {
            Some((checks, first_sums)) => {
                alike_first(checks, first_sums, &self.source.sums(&e.template, &names)?, e, launch)
            }
            None => vec![None; e.outputs.len()],
        };
        if launch == 0 && self.earlier.is_none() {
            let sums = if bytes >= SUMS_FROM_BYTES && self.sum_first {
                Some(self.source.sums(&e.template, &names)?)
            } else {
                None
            };
            firsts.by_template.insert(e.template.clone(), FirstLaunch { at: outputs.len(), sums });
        }
        let read_bytes = self.read_unlike(e, launch, alike, outputs)?;
        *traffic += OutputTraffic { read_bytes, summed_bytes: bytes - read_bytes };
        Ok(())
    }

    /// Pushes each output's check: its `alike` one, or, where there is none, one from its
    /// bytes read back and hashed (on the host's cores, a run at a time). Gives the bytes read.
    fn read_unlike(
        &mut self,
        e: &Expectation,
        launch: u32,
        alike: Vec<Option<OutputCheck>>,
        outputs: &mut Vec<OutputCheck>,
    ) -> Result<u64, ReplayError> {
        let unlike: Vec<&OutputDigest> =
            e.outputs.iter().zip(&alike).filter(|(_, a)| a.is_none()).map(|(o, _)| o).collect();
        let names: Vec<&str> = unlike.iter().map(|o| o.buffer.as_str()).collect();
        let (mut read, mut read_bytes) = (Vec::with_capacity(unlike.len()), 0u64);
        self.source.read(&names, &mut |group| {
            let digests = sha256_each(group);
            for (bytes, actual_sha256) in group.iter().zip(digests) {
                let o = unlike[read.len()];
                let check = OutputCheck {
                    template: e.template.clone(),
                    buffer: o.buffer.clone(),
                    launch,
                    expected_sha256: o.sha256.clone(),
                    actual_sha256,
                    blank: if launch == 0 { BlankOutput::of(o, bytes) } else { None },
                    bytes: if kept(e, o, launch) { Arc::new(bytes.to_vec()) } else { Arc::default() },
                };
                read_bytes += bytes.len() as u64;
                read.push(check);
            }
        })?;
        let mut read = read.into_iter();
        for alike in alike {
            outputs.push(alike.or_else(|| read.next()).expect("one read per output not alike"));
        }
        Ok(read_bytes)
    }
}

/// Reads the buffers `names` names (of `sizes` bytes) in runs that fit `staging`, each
/// output copied into it by `copy`, and hands each run to `take`; an output larger than
/// `staging` is read `whole`, alone.
fn read_in_runs(
    names: &[&str],
    sizes: &[u64],
    staging: &mut [u8],
    copy: &mut dyn FnMut(&str, &mut [u8]) -> Result<(), ReplayError>,
    whole: &mut dyn FnMut(&str) -> Result<Vec<u8>, ReplayError>,
    take: &mut dyn FnMut(&[&[u8]]),
) -> Result<(), ReplayError> {
    for run in runs_within(sizes, staging.len() as u64) {
        let (run_names, run_sizes) = (&names[run.clone()], &sizes[run]);
        if run_sizes.iter().sum::<u64>() > staging.len() as u64 {
            take(&[&whole(run_names[0])?]);
            continue;
        }
        let (mut rest, mut slices) = (&mut staging[..], Vec::with_capacity(run_names.len()));
        for (name, &size) in run_names.iter().zip(run_sizes) {
            let (slice, after) = rest.split_at_mut(size as usize);
            copy(name, slice)?;
            slices.push(&*slice);
            rest = after;
        }
        take(&slices);
    }
    Ok(())
}

/// Consecutive runs of `sizes` of at most `most` bytes together; a size above `most` is a
/// run of its own.
fn runs_within(sizes: &[u64], most: u64) -> Vec<std::ops::Range<usize>> {
    let (mut groups, mut start, mut total) = (Vec::new(), 0, 0u64);
    for (i, &size) in sizes.iter().enumerate() {
        if i > start && total.saturating_add(size) > most {
            groups.push(start..i);
            (start, total) = (i, 0);
        }
        total = total.saturating_add(size);
    }
    if start < sizes.len() {
        groups.push(start..sizes.len());
    }
    groups
}

/// The first launch `e`'s template's `launch` is held to, as its checks and device sums:
/// for a later launch, the first of `this` pass; for the first launch of a pass compared
/// with an `earlier` one, that pass's first; none for the first launch of a first pass
/// (it is read), nor where the first launch was not summed.
fn first_to_compare<'p>(
    e: &Expectation,
    launch: u32,
    this: Pass<'p>,
    earlier: Option<Pass<'p>>,
) -> Option<(&'p [OutputCheck], &'p [u64])> {
    let (checks, firsts) = match (launch, earlier) {
        (0, None) => return None,
        (0, Some(earlier)) => earlier,
        _ => this,
    };
    let FirstLaunch { at, sums } = firsts.by_template.get(&e.template)?;
    Some((checks.get(*at..*at + e.outputs.len())?, sums.as_deref()?))
}

/// For each output of a template's `launch`, its check when its device sum is the first
/// launch's (the first launch's digest and blankness, and its bytes where a read would
/// have kept them, [`kept`]); `None` where the sums differ and the output must be read. A
/// single changed 32-bit word always changes the sum (each word is mixed with its position
/// by a bijection); several changes escape it only by cancelling modulo 2^64.
fn alike_first(
    first: &[OutputCheck],
    first_sums: &[u64],
    now: &[u64],
    e: &Expectation,
    launch: u32,
) -> Vec<Option<OutputCheck>> {
    let alike = |((f, o), (was, is)): ((&OutputCheck, &OutputDigest), (&u64, &u64))| {
        (was == is).then(|| OutputCheck {
            template: f.template.clone(),
            buffer: f.buffer.clone(),
            launch,
            expected_sha256: f.expected_sha256.clone(),
            actual_sha256: f.actual_sha256.clone(),
            bytes: if kept(e, o, launch) { Arc::clone(&f.bytes) } else { Arc::default() },
            blank: if launch == 0 { f.blank } else { None },
        })
    };
    first.iter().zip(&e.outputs).zip(first_sums.iter().zip(now)).map(alike).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gnomon_format::OutputDigest;

    fn expectation(varying: &[bool]) -> Expectation {
        let json = serde_json::json!({
            "template": "t",
            "outputs": varying.iter().enumerate().map(|(i, &v)| {
                let mut o = serde_json::json!({"buffer": format!("b{i}"), "sha256": "e".repeat(64)});
                if v {
                    o["variation"] = serde_json::json!({
                        "element": "float32", "launches": 4, "sha256s": ["f".repeat(64)], "max-abs": 0.5,
                        "max-ulp": 3, "differing-fraction": 0.1, "file": "varying/t",
                    });
                }
                o
            }).collect::<Vec<_>>(),
        });
        serde_json::from_value(json).expect("an expectation")
    }

    fn first(e: &Expectation) -> Vec<OutputCheck> {
        let check = |(i, o): (usize, &OutputDigest)| OutputCheck {
            template: "t".into(),
            buffer: o.buffer.clone(),
            launch: 0,
            expected_sha256: o.sha256.clone(),
            actual_sha256: format!("{i}").repeat(64),
            bytes: vec![i as u8; 8].into(),
            blank: None,
        };
        e.outputs.iter().enumerate().map(check).collect()
    }

    /// Outputs held in memory as a launch left them, summed by a hash of their bytes,
    /// counting the reads.
    #[derive(Default)]
    struct Held {
        buffers: HashMap<String, Vec<u8>>,
        reads: std::cell::Cell<usize>,
    }

    impl OutputSource for &Held {
        fn bytes_of(&self, names: &[&str]) -> Result<u64, ReplayError> {
            Ok(names.iter().map(|n| self.buffers[*n].len() as u64).sum())
        }

        fn read(&mut self, names: &[&str], take: &mut dyn FnMut(&[&[u8]])) -> Result<(), ReplayError> {
            self.reads.set(self.reads.get() + names.len());
            take(&names.iter().map(|n| self.buffers[*n].as_slice()).collect::<Vec<_>>());
            Ok(())
        }

        fn sums(&mut self, _: &str, names: &[&str]) -> Result<Vec<u64>, ReplayError> {
            let sum = |n: &&str| {
                let mut hasher = std::hash::DefaultHasher::new();
                std::hash::Hash::hash(&self.buffers[*n], &mut hasher);
                std::hash::Hasher::finish(&hasher)
            };
            Ok(names.iter().map(sum).collect())
        }
    }

    /// Outputs held in memory, read in runs through `staging` as [`OnDevice`] reads them,
    /// counting each run's outputs.
    struct Staged<'h> {
        held: &'h Held,
        staging: Vec<u8>,
        runs: Vec<usize>,
    }

    impl OutputSource for Staged<'_> {
        fn bytes_of(&self, names: &[&str]) -> Result<u64, ReplayError> {
            self.held.bytes_of(names)
        }

        fn read(&mut self, names: &[&str], take: &mut dyn FnMut(&[&[u8]])) -> Result<(), ReplayError> {
            let (held, runs) = (self.held, &mut self.runs);
            let sizes: Vec<u64> = names.iter().map(|n| held.buffers[*n].len() as u64).collect();
            let mut copy = |name: &str, dst: &mut [u8]| {
                dst.copy_from_slice(&held.buffers[name]);
                Ok(())
            };
            let mut run = |run: &[&[u8]]| {
                runs.push(run.len());
                take(run)
            };
            read_in_runs(
                names,
                &sizes,
                &mut self.staging,
                &mut copy,
                &mut |name| Ok(held.buffers[name].clone()),
                &mut run,
            )
        }

        fn sums(&mut self, template: &str, names: &[&str]) -> Result<Vec<u64>, ReplayError> {
            let mut held = self.held;
            held.sums(template, names)
        }
    }

    #[test]
    fn outputs_read_in_runs_keep_their_order_digests_and_bytes() {
        let e = expectation(&[false, true, false, true]);
        let kib = |n: usize, byte: u8| vec![byte; n << 10];
        let first = vec![kib(96, 1), kib(96, 2), kib(300, 3), kib(64, 4)];
        let mut second = first.clone();
        second[1][7] ^= 1;
        let (mut outputs, mut firsts, mut traffic, mut runs) =
            (Vec::new(), FirstLaunches::default(), OutputTraffic::default(), Vec::new());
        for (launch, contents) in [&first, &second].into_iter().enumerate() {
            let held = Held {
                buffers: e.outputs.iter().map(|o| o.buffer.clone()).zip(contents.iter().cloned()).collect(),
                ..Held::default()
            };
            let staged = Staged { held: &held, staging: vec![0; 192 << 10], runs: Vec::new() };
            let mut reader = OutputReader::new(staged, None, true);
            reader.read(&e, launch as u32, &mut outputs, &mut firsts, &mut traffic).expect("read");
            runs.push(reader.source.runs);
        }
        // Two outputs fill the staging, the third is larger than it and read alone; later,
        // only the output whose sum changed.
        assert_eq!(runs, [vec![2, 1, 1], vec![1]]);
        let digest = |bytes: &[u8]| sha256_each(&[bytes]).remove(0);
        for (check, bytes) in outputs.iter().zip(first.iter().chain(&second)) {
            assert_eq!(check.actual_sha256, digest(bytes), "{} launch {}", check.buffer, check.launch);
            let kept = e.outputs.iter().find(|o| o.buffer == check.buffer).unwrap().variation.is_some();
            assert_eq!(check.bytes.as_slice(), if kept { &bytes[..] } else { &[] }, "{}", check.buffer);
        }
        let order: Vec<_> = outputs.iter().map(|c| (c.buffer.as_str(), c.launch)).collect();
        assert_eq!(order[4..], [("b0", 1), ("b1", 1), ("b2", 1), ("b3", 1)]);
        assert_eq!((traffic.read_bytes, traffic.summed_bytes), ((556 + 96) << 10, 460 << 10));
    }

    /// A pass of `e`'s launches, launch `l` leaving `left[l]` (each output's bytes):
    /// the checks pushed, the first launches, the traffic and the reads of each launch.
    fn pass<'p>(
        e: &Expectation,
        left: &[Vec<Vec<u8>>],
        earlier: Option<Pass<'p>>,
        sum_first: bool,
    ) -> (Vec<OutputCheck>, FirstLaunches, OutputTraffic, Vec<usize>) {
        let (mut outputs, mut firsts, mut traffic, mut reads) =
            (Vec::new(), FirstLaunches::default(), OutputTraffic::default(), Vec::new());
        for (launch, contents) in left.iter().enumerate() {
            let held = Held {
                buffers: e.outputs.iter().map(|o| o.buffer.clone()).zip(contents.iter().cloned()).collect(),
                ..Held::default()
            };
            let mut reader = OutputReader::new(&held, earlier, sum_first);
            reader.read(e, launch as u32, &mut outputs, &mut firsts, &mut traffic).expect("read");
            reads.push(held.reads.get());
        }
        (outputs, firsts, traffic, reads)
    }

    #[test]
    fn outputs_are_staged_in_runs_that_fit_and_a_larger_one_alone() {
        assert_eq!(runs_within(&[4, 4, 4, 1], 8), vec![0..2, 2..4]);
        assert_eq!(runs_within(&[3, 9, 2, 0, 6], 8), vec![0..1, 1..2, 2..5]);
        assert_eq!(runs_within(&[8], 8), vec![0..1]);
        assert_eq!(runs_within(&[4, 4], 8), vec![0..2], "a run may fill the staging exactly");
        assert!(runs_within(&[], 8).is_empty());
    }

    #[test]
    fn only_outputs_whose_sums_differ_from_the_first_launchs_are_read_again() {
        let e = expectation(&[false, false]);
        let (a, b) = (vec![1u8; 256 << 10], vec![2u8; 256 << 10]);
        let mut b_changed = b.clone();
        b_changed[4763] ^= 0x80;
        let left = [vec![a.clone(), b.clone()], vec![a.clone(), b.clone()], vec![a.clone(), b_changed.clone()]];
        let (outputs, _, traffic, reads) = pass(&e, &left, None, true);
        assert_eq!(reads, [2, 0, 1], "the first launch read whole, then only the output that differs");
        // Neither varies nor has a CPU reference: judged by digest, no bytes kept.
        let digest = |bytes: &[u8]| sha256_each(&[bytes]).remove(0);
        let said: Vec<(u32, &str, String, usize)> =
            outputs.iter().map(|o| (o.launch, o.buffer.as_str(), o.actual_sha256.clone(), o.bytes.len())).collect();
        assert_eq!(
            said,
            [
                (0, "b0", digest(&a), 0),
                (0, "b1", digest(&b), 0),
                (1, "b0", digest(&a), 0),
                (1, "b1", digest(&b), 0),
                (2, "b0", digest(&a), 0),
                (2, "b1", digest(&b_changed), 0),
            ]
        );
        let kib = |n: u64| (n * 256) << 10;
        assert_eq!((traffic.read_bytes, traffic.summed_bytes), (kib(3), kib(3)));
    }

    #[test]
    fn small_outputs_and_unsummed_first_launches_are_read_every_launch() {
        let e = expectation(&[false]);
        let small = vec![vec![7u8; (256 << 10) - 1]];
        let (_, _, traffic, reads) = pass(&e, &[small.clone(), small.clone(), small], None, true);
        assert_eq!((reads, traffic.summed_bytes), (vec![1, 1, 1], 0));
        let big = vec![vec![7u8; 256 << 10]];
        let (_, _, _, reads) = pass(&e, &[big.clone(), big], None, false);
        assert_eq!(reads, [1, 1], "a first launch no comparison was announced for is not summed");
    }

    #[test]
    fn the_launch_under_the_second_poison_is_held_to_the_restores_first() {
        let e = expectation(&[true, false]);
        let (a, b) = (vec![1u8; 256 << 10], vec![2u8; 256 << 10]);
        let (first, firsts, _, _) = pass(&e, &[vec![a.clone(), b.clone()]], None, true);
        let poisoned = vec![a.clone(), vec![0xa5; 256 << 10]];
        let (again, again_firsts, _, reads) = pass(&e, &[poisoned], Some((&first, &firsts)), false);
        assert_eq!(reads, [1], "only the output the second poison changed is read");
        assert_eq!((again[0].actual_sha256 == first[0].actual_sha256, again[0].bytes.len()), (true, a.len()));
        // Shared, not copied: a copy of every first launch cost the serving catalogue's
        // qualification 23.6 GB of host memory and most of its 17.5 s poison launch.
        assert!(Arc::ptr_eq(&again[0].bytes, &first[0].bytes), "the first launch's bytes are shared");
        assert_ne!(again[1].actual_sha256, first[1].actual_sha256);
        assert!(again_firsts.by_template.is_empty(), "a second pass records no first launches");
    }

    #[test]
    fn a_later_launch_is_held_to_its_passs_first_and_a_second_pass_to_the_first_passs() {
        let e = expectation(&[false, false]);
        let pass = |digit: &str, sums: Option<Vec<u64>>| {
            let checks: Vec<OutputCheck> =
                first(&e).into_iter().map(|c| OutputCheck { actual_sha256: digit.repeat(64), ..c }).collect();
            let at = FirstLaunch { at: 0, sums };
            (checks, FirstLaunches { by_template: HashMap::from([("t".to_owned(), at)]) })
        };
        let (this, this_firsts) = pass("a", Some(vec![1, 2]));
        let (earlier, earlier_firsts) = pass("b", Some(vec![3, 4]));
        let held = |launch, earlier: Option<Pass>| {
            first_to_compare(&e, launch, (&this, &this_firsts), earlier)
                .map(|(c, s)| (c[0].actual_sha256.clone(), s.to_vec()))
        };
        assert_eq!(held(0, None), None, "the first launch of a first pass is read");
        assert_eq!(held(2, None), Some(("a".repeat(64), vec![1, 2])));
        assert_eq!(held(0, Some((&earlier, &earlier_firsts))), Some(("b".repeat(64), vec![3, 4])));
        assert_eq!(held(1, Some((&earlier, &earlier_firsts))), Some(("a".repeat(64), vec![1, 2])));
        let (small, small_firsts) = pass("c", None);
        let unsummed = first_to_compare(&e, 1, (&small, &small_firsts), None);
        assert!(unsummed.is_none(), "a first launch not summed leaves later ones to be read");
    }

    #[test]
    fn an_output_whose_sum_is_the_first_launchs_is_that_launchs_and_others_are_read() {
        let e = expectation(&[false, false, true, true]);
        let got = alike_first(&first(&e), &[1, 2, 3, 4], &[1, 9, 3, 9], &e, 2);
        let said: Vec<Option<(u32, String, usize)>> = got
            .iter()
            .map(|c| c.as_ref().map(|c| (c.launch, c.actual_sha256[..1].to_owned(), c.bytes.len())))
            .collect();
        // Alike and fixed: the first digest, no bytes (later launches are judged by digest);
        // alike and varying: the first launch's bytes too; a differing sum: read back.
        assert_eq!(said, [Some((2, "0".into(), 0)), None, Some((2, "2".into(), 8)), None]);
        assert!(got.iter().flatten().all(|c| c.expected_sha256 == "e".repeat(64) && c.buffer.starts_with('b')));
        // The launch under the second poison keeps what a read would have: a varying
        // output's bytes, and no others (this template has no CPU reference).
        let under_second_poison = alike_first(&first(&e), &[1, 2, 3, 4], &[1, 2, 3, 4], &e, 0);
        let kept: Vec<usize> = under_second_poison.iter().flatten().map(|c| c.bytes.len()).collect();
        assert_eq!(kept, [0, 0, 8, 8]);
        // Blankness is a first launch's: the launch under the second poison takes it, a
        // later launch does not.
        let blank = Some(BlankOutput { element: Element::Float32, elements: 2, all: Blank::NonFinite });
        let firsts: Vec<OutputCheck> = first(&e).into_iter().map(|c| OutputCheck { blank, ..c }).collect();
        let blanks = |launch| alike_first(&firsts, &[1, 2, 3, 4], &[1, 2, 3, 4], &e, launch)[0].as_ref().unwrap().blank;
        assert_eq!((blanks(0), blanks(2)), (blank, None));
    }

    /// A varying output's later launch that its sum tells apart is read back with its
    /// bytes: its distance from the first launch is judged from them.
    #[test]
    fn a_varying_outputs_later_launch_read_back_keeps_its_bytes() {
        let e = expectation(&[true]);
        let (first, later) = (vec![1u8; 256 << 10], vec![3u8; 256 << 10]);
        let (outputs, ..) = pass(&e, &[vec![first], vec![later.clone()]], None, true);
        assert_eq!((outputs[1].launch, outputs[1].bytes.as_slice()), (1, later.as_slice()));
        assert_eq!(outputs[1].blank, None, "blankness is a first launch's");
    }

    /// A first launch's bytes are kept only where a rule reads them (a varying output's,
    /// a template's with a CPU reference), and whether its elements check nothing is
    /// found as it is read, whichever is kept.
    #[test]
    fn a_first_launch_keeps_its_bytes_where_a_rule_reads_them_and_says_if_it_is_blank() {
        let mut e = expectation(&[false, true]);
        e.outputs[0].element = Some(Element::Float32);
        let zeros = vec![0u8; 64];
        let left = [vec![zeros.clone(), vec![7u8; 64]]];
        let (outputs, ..) = pass(&e, &left, None, false);
        let said: Vec<(usize, Option<BlankOutput>)> = outputs.iter().map(|o| (o.bytes.len(), o.blank)).collect();
        let all_zero = BlankOutput { element: Element::Float32, elements: 16, all: Blank::Alike(0.0) };
        // The varying output's element is its variation's: 7s as float32 are one value too.
        let all_sevens = BlankOutput { all: Blank::Alike(f32::from_le_bytes([7; 4]).into()), ..all_zero };
        assert_eq!(said, [(0, Some(all_zero)), (64, Some(all_sevens))]);
        e.reference = Some("cpu".into());
        let (outputs, ..) = pass(&e, &left, None, false);
        assert_eq!(outputs.iter().map(|o| o.bytes.len()).collect::<Vec<_>>(), [64, 64], "a CPU reference reads both");
        e.outputs[0].element = None;
        let (outputs, ..) = pass(&e, &left, None, false);
        assert_eq!(outputs[0].blank, None, "an output of no declared element is not judged blank");
    }
}
