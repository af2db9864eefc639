//! A template's outputs after one launch, as the judge receives them ([`OutputCheck`]):
//! the first launch's read back and hashed, a later launch's (and the launch under the
//! second poison) compared with the first on the device, by one position-dependent sum per
//! output ([`Checksummer::checksums`]), and read back only where a sum differs. The
//! serving catalogue's qualification spent 39.3 of its 110 s reading several GB of outputs
//! after every one of its launches, most of them only to find the first launch's digest.

use std::collections::HashMap;

use gnomon_format::{digest::sha256_each, Expectation};

use super::{Checksummer, LoadedState, OutputCheck, RangeCheck};
use crate::{cuda::Stream, errors::ReplayError};

/// A template's outputs of at least this many bytes are summed on the device after each
/// launch. Below it, reading and hashing cost about what the sums' launch, wait and two
/// small copies do (tens of µs: 256 KiB read at the runners' 14 GB/s pageable rate and
/// hashed on one core at about 2 GB/s is ~0.15 ms), and a core of many small templates (the
/// nightly's 64 000) would pay the sums for nothing.
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

/// Reads one template's outputs after its `launch`: the first launch of a pass without an
/// `earlier` one reads and hashes every output (and sums them, where a later launch or pass
/// will be compared with it); any other launch compares sums with the first launch, of this
/// pass (`outputs`, `firsts`) or of the `earlier` pass, and reads only the outputs that
/// differ.
pub(super) struct OutputReader<'r> {
    arena: &'r LoadedState,
    checksummer: &'r Checksummer,
    stream: &'r Stream,
    earlier: Option<Pass<'r>>,
    sum_first: bool,
    /// The sums of the template being read, prepared once for all its launches.
    check: Option<(String, RangeCheck<'r>)>,
}

/// A pass over the templates: the outputs it pushed and its first launches among them.
pub(super) type Pass<'p> = (&'p [OutputCheck], &'p FirstLaunches);

impl<'r> OutputReader<'r> {
    /// A reader of one pass: compared with the `earlier` pass's first launches (the
    /// launches under the second poison with the restore's), or with its own, which are
    /// summed when `sum_first` says a comparison will follow.
    pub(super) fn new(
        arena: &'r LoadedState,
        checksummer: &'r Checksummer,
        stream: &'r Stream,
        earlier: Option<Pass<'r>>,
        sum_first: bool,
    ) -> Self {
        Self { arena, checksummer, stream, earlier, sum_first, check: None }
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
        let bytes = self.arena.bytes_of(&names)?;
        let summed = bytes >= SUMS_FROM_BYTES;
        let alike = match first_to_compare(e, launch, (outputs, firsts), self.earlier) {
            Some((checks, first_sums)) if summed => alike_first(checks, first_sums, &self.sums(e, &names)?, e, launch),
            _ => vec![None; e.outputs.len()],
        };
        if launch == 0 && self.earlier.is_none() {
            let sums = if summed && self.sum_first { Some(self.sums(e, &names)?) } else { None };
            firsts.by_template.insert(e.template.clone(), FirstLaunch { at: outputs.len(), sums });
        }
        let read_bytes = self.read_unlike(e, launch, alike, outputs)?;
        *traffic += OutputTraffic { read_bytes, summed_bytes: bytes - read_bytes };
        Ok(())
    }

    /// One sum per output of `e`'s template, on the device.
    fn sums(&mut self, e: &Expectation, names: &[&str]) -> Result<Vec<u64>, ReplayError> {
        if self.check.as_ref().is_none_or(|(template, _)| *template != e.template) {
            self.check = Some((e.template.clone(), self.arena.check_of(names, self.checksummer)?));
        }
        let (_, check) = self.check.as_ref().expect("prepared above");
        check.run(self.stream)
    }

    /// Pushes each output's check: its `alike` one, or, where there is none, one from its
    /// bytes read back and hashed (on the host's cores, all together). Gives the bytes read.
    fn read_unlike(
        &self,
        e: &Expectation,
        launch: u32,
        alike: Vec<Option<OutputCheck>>,
        outputs: &mut Vec<OutputCheck>,
    ) -> Result<u64, ReplayError> {
        let unlike = e.outputs.iter().zip(&alike).filter(|(_, a)| a.is_none());
        let read = unlike.map(|(o, _)| self.arena.read(&o.buffer)).collect::<Result<Vec<_>, _>>()?;
        let read_bytes = read.iter().map(|r| r.len() as u64).sum();
        let digests = sha256_each(&read.iter().map(Vec::as_slice).collect::<Vec<_>>());
        let mut read = read.into_iter().zip(digests);
        for (o, alike) in e.outputs.iter().zip(alike) {
            outputs.push(match alike {
                Some(check) => check,
                None => {
                    let (bytes, actual_sha256) = read.next().expect("one read per output not alike");
                    OutputCheck {
                        template: e.template.clone(),
                        buffer: o.buffer.clone(),
                        launch,
                        expected_sha256: o.sha256.clone(),
                        actual_sha256,
                        bytes: if launch == 0 || o.variation.is_some() { bytes } else { Vec::new() },
                    }
                }
            });
        }
        Ok(read_bytes)
    }
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
/// launch's (the first launch's digest, and its bytes where a read would have kept them:
/// a first launch's, under the second poison, and every launch's of a varying output); `None` where the sums differ and the output must be read. A
/// single changed 32-bit word always changes the sum (each word is mixed with its position
/// by a bijection); several changes escape it only by cancelling modulo 2^64.
fn alike_first(
    first: &[OutputCheck],
    first_sums: &[u64],
    now: &[u64],
    e: &Expectation,
    launch: u32,
) -> Vec<Option<OutputCheck>> {
    let alike = |((f, o), (was, is)): ((&OutputCheck, &gnomon_format::OutputDigest), (&u64, &u64))| {
        (was == is).then(|| OutputCheck {
            template: f.template.clone(),
            buffer: f.buffer.clone(),
            launch,
            expected_sha256: f.expected_sha256.clone(),
            actual_sha256: f.actual_sha256.clone(),
            bytes: if launch == 0 || o.variation.is_some() { f.bytes.clone() } else { Vec::new() },
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
            bytes: vec![i as u8; 8],
        };
        e.outputs.iter().enumerate().map(check).collect()
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
        // The launch under the second poison is a pass's first: it keeps every output's
        // bytes, as a read would have.
        let under_second_poison = alike_first(&first(&e), &[1, 2, 3, 4], &[1, 2, 3, 4], &e, 0);
        assert!(under_second_poison.iter().all(|c| c.as_ref().is_some_and(|c| c.bytes.len() == 8 && c.launch == 0)));
    }
}
