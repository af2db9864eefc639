//! How far launches of one output lie from its first launch, in the data's own units: what
//! an exporter records of an output that varies from launch to launch, and the envelope
//! a judge holds a replayed output to. An element agrees with the first launch's when
//! `|x − first| ≤ atol + rtol·|first|` ([`Envelope`]), as `torch.testing.assert_close`
//! reads it; `atol` and `rtol` are fitted to what the launches showed. Distances in ULP
//! are kept only as a description: across zero, neighbouring values of opposite sign lie
//! billions of ULP apart, and a bfloat16 allowance of thousands of ULP covers every value.
//! Non-float elements compare bitwise. Beside the envelope, each launch's [`Distance`] from
//! the first (an RMS over the output and over its noisiest block) is recorded, and a judge
//! holds a replay's distance to the [`Bound`] those distances give.

mod bound;
mod defect;
mod distance;
mod tokens;

use serde::{Deserialize, Serialize};

pub use bound::{Bound, FALSE_FAILURE_RATE, MISS_RATE};
pub use defect::past_limit;
pub use distance::{Distance, BLOCK_BYTES};
use distance::{PartSquares, Squares};
pub use tokens::{near_tie, Tokens};

/// An output's element type, as far as a tolerance cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Element {
    Float64,
    Float32,
    Float16,
    Bfloat16,
    /// Integers, booleans, anything else: equal bits or not, never a tolerance.
    Bytes,
}

impl Element {
    pub fn size(self) -> usize {
        match self {
            Element::Float64 => 8,
            Element::Float32 => 4,
            Element::Float16 | Element::Bfloat16 => 2,
            Element::Bytes => 1,
        }
    }

    pub fn is_float(self) -> bool {
        self != Element::Bytes
    }

    /// Half the distance from 1 to the next value of the type: the relative size of one
    /// rounding, the first rung of the relative tolerances an envelope is fitted from.
    fn unit_roundoff(self) -> f64 {
        match self {
            Element::Float64 => f64::EPSILON / 2.0,
            Element::Float32 => f32::EPSILON as f64 / 2.0,
            Element::Float16 => 2f64.powi(-11),
            Element::Bfloat16 => 2f64.powi(-8),
            Element::Bytes => 0.0,
        }
    }

    /// The element type of a PyTorch dtype's name (`torch.bfloat16`, `bfloat16`); any
    /// non-float dtype compares bitwise.
    pub fn of_dtype(name: &str) -> Self {
        match name.trim_start_matches("torch.") {
            "float64" | "double" => Element::Float64,
            "float32" | "float" => Element::Float32,
            "float16" | "half" => Element::Float16,
            "bfloat16" => Element::Bfloat16,
            _ => Element::Bytes,
        }
    }

    /// Whether `bytes` say nothing a comparison could check: a float output whose every
    /// element is NaN or infinite, or of two or more elements all alike (what a port that
    /// reads memory it never writes, or computes nothing, leaves). `None` for bytes.
    pub fn blank(self, bytes: &[u8]) -> Option<Blank> {
        let size = self.size();
        if !self.is_float() || bytes.is_empty() || bytes.len() % size != 0 {
            return None;
        }
        let mut elements = bytes.chunks_exact(size);
        if elements.clone().all(|e| !self.value(bits_of(e)).is_finite()) {
            return Some(Blank::NonFinite);
        }
        let first = elements.next()?;
        (bytes.len() > size && elements.all(|e| e == first)).then(|| Blank::Alike(self.value(bits_of(first))))
    }

    /// The element at `i` of `bytes` (little-endian): its value, and its bits mapped onto
    /// a line where neighbouring floats are neighbouring integers (so a ULP distance is a
    /// difference), or `None` for a NaN.
    fn at(self, bytes: &[u8], i: usize) -> (f64, Option<i64>) {
        let size = self.size();
        let bits = bits_of(&bytes[i * size..(i + 1) * size]);
        let value = self.value(bits);
        let sign = 1u64 << (size * 8 - 1);
        let ordered = if bits & sign == 0 { bits as i64 } else { -((bits & !sign) as i64) };
        (value, (!value.is_nan()).then_some(ordered))
    }

    /// The value of an element's little-endian bits.
    fn value(self, bits: u64) -> f64 {
        match self {
            Element::Float64 => f64::from_bits(bits),
            Element::Float32 => f32::from_bits(bits as u32) as f64,
            Element::Float16 => half::f16::from_bits(bits as u16).to_f64(),
            Element::Bfloat16 => half::bf16::from_bits(bits as u16).to_f64(),
            Element::Bytes => bits as f64,
        }
    }

    /// The mean magnitude of the finite elements of `bytes` (0 for `Bytes`, or for none),
    /// summed part by part on the host's cores.
    fn mean_magnitude(self, bytes: &[u8]) -> f64 {
        if !self.is_float() {
            return 0.0;
        }
        let magnitudes = |i| {
            let finite =
                part(bytes, i).chunks_exact(self.size()).map(|e| self.value(bits_of(e))).filter(|v| v.is_finite());
            finite.fold((0.0, 0u64), |(sum, count), v| (sum + v.abs(), count + 1))
        };
        let parts = crate::on_cores::map(parts_of(bytes), magnitudes);
        let (sum, count) = parts.into_iter().fold((0.0, 0), |(s, c), (ps, pc)| (s + ps, c + pc));
        if count == 0 {
            0.0
        } else {
            sum / count as f64
        }
    }

    /// The pairs of elements of `a` and `b` whose bits differ: each side's value and
    /// ordered bits, decoded once.
    fn differing<'b>(self, a: &'b [u8], b: &'b [u8]) -> impl Iterator<Item = Pair> + 'b {
        let size = self.size();
        a.chunks_exact(size)
            .zip(b.chunks_exact(size))
            .enumerate()
            .filter(|(_, (x, y))| x != y)
            .map(move |(i, _)| Pair { at: i, first: self.at(a, i), other: self.at(b, i) })
    }
}

/// What makes an output's bytes say nothing ([`Element::blank`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Blank {
    /// Every element NaN or infinite.
    NonFinite,
    /// Every element this one value.
    Alike(f64),
}

/// Bytes of an output one thread takes at a time: fixed, so what is summed from the parts
/// does not depend on the host's cores; a multiple of [`BLOCK_BYTES`].
const PART_BYTES: usize = 4 << 20;

fn parts_of(bytes: &[u8]) -> usize {
    bytes.len().div_ceil(PART_BYTES)
}

/// Part `i` of `bytes`, as [`parts_of`] counts them.
fn part(bytes: &[u8], i: usize) -> &[u8] {
    &bytes[i * PART_BYTES..((i + 1) * PART_BYTES).min(bytes.len())]
}

/// One element's little-endian bits (a slice of 1, 2, 4 or 8 bytes; any other length is 0).
fn bits_of(element: &[u8]) -> u64 {
    match *element {
        [a] => a.into(),
        [a, b] => u16::from_le_bytes([a, b]).into(),
        [a, b, c, d] => u32::from_le_bytes([a, b, c, d]).into(),
        [a, b, c, d, e, f, g, h] => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        _ => 0,
    }
}

/// One element on both sides: its index, each side's value, and ordered bits (`None` for
/// a NaN).
struct Pair {
    at: usize,
    first: (f64, Option<i64>),
    other: (f64, Option<i64>),
}

/// Relative tolerances an envelope is fitted from: 0, then the element's unit roundoff
/// times 1, 2, 4, … 2²³. Fitting from a ladder, not from the data's every ratio, costs a
/// fixed number of operations per element and gives at most twice the best `rtol`.
const RUNGS: usize = 25;

fn rung(element: Element, j: usize) -> f64 {
    match j {
        0 => 0.0,
        j => element.unit_roundoff() * 2f64.powi(j as i32 - 1),
    }
}

/// `|x − first| ≤ atol + rtol·|first|` for every element: what one launch may be from the
/// first, in the data's own units.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Envelope {
    pub atol: f64,
    pub rtol: f64,
}

/// How one output held against an envelope.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Fit {
    pub elements: u64,
    /// Elements whose bits differ from the first launch's.
    pub differing: u64,
    /// Elements past the envelope, a NaN on one side only, or differing non-floats.
    pub outside: u64,
    /// The largest share of its allowance any differing element used (above 1: outside).
    pub worst_share: f64,
    pub max_abs: f64,
    /// How far the output lies from the first launch as a whole (finite elements only).
    pub distance: Distance,
}

/// What one part of an output showed against an envelope.
#[derive(Clone, Copy, Default)]
struct PartFit {
    fit: Fit,
    squares: PartSquares,
}

impl PartFit {
    /// Two parts of one output together, the earlier first.
    fn and(self, later: Self) -> Self {
        let (a, b) = (self.fit, later.fit);
        let fit = Fit {
            differing: a.differing + b.differing,
            outside: a.outside + b.outside,
            worst_share: a.worst_share.max(b.worst_share),
            max_abs: a.max_abs.max(b.max_abs),
            ..a
        };
        Self { fit, squares: self.squares.and(later.squares) }
    }
}

impl Envelope {
    /// `got` against `first`, element by element. Lengths that differ, or that are not a
    /// whole number of elements, are all outside.
    pub fn holds(&self, element: Element, first: &[u8], got: &[u8]) -> Fit {
        let size = element.size();
        let elements = (first.len() / size) as u64;
        if first.len() != got.len() || first.len() % size != 0 {
            return Fit {
                elements,
                differing: elements,
                outside: elements.max(1),
                worst_share: f64::INFINITY,
                ..Fit::default()
            };
        }
        let held = |i| self.holds_part(element, part(first, i), part(got, i));
        let parts = crate::on_cores::map(parts_of(first), held);
        let PartFit { fit, squares } = parts.into_iter().reduce(PartFit::and).unwrap_or_default();
        Fit { elements, distance: squares.distance(elements), ..fit }
    }

    /// [`Self::holds`] over one part of an output, its element count left 0.
    fn holds_part(&self, element: Element, first: &[u8], got: &[u8]) -> PartFit {
        let mut fit = Fit::default();
        let mut squares = Squares::of_part(element.size(), first.len() / element.size());
        for pair in element.differing(first, got) {
            let (f, x) = (pair.first.0, pair.other.0);
            fit.differing += 1;
            if !element.is_float() {
                fit.outside += 1;
                continue;
            }
            let share = match (f.is_nan(), x.is_nan()) {
                (true, true) => continue,
                (false, false) if f.is_finite() && x.is_finite() => {
                    let d = (x - f).abs();
                    fit.max_abs = fit.max_abs.max(d);
                    squares.add(pair.at, d);
                    if d == 0.0 {
                        continue;
                    }
                    d / (self.atol + self.rtol * f.abs())
                }
                _ => f64::INFINITY,
            };
            fit.worst_share = fit.worst_share.max(share);
            fit.outside += u64::from(share > 1.0);
        }
        PartFit { fit, squares: squares.finish() }
    }

    /// The envelope widened by `margin`.
    pub fn times(self, margin: f64) -> Self {
        Self { atol: self.atol * margin, rtol: self.rtol * margin }
    }
}

/// The margin a judge widens a recorded spread by unless told otherwise.
pub const DEFAULT_MARGIN: f64 = 4.0;

/// What a judge lets an output that no launch gave be: within an envelope, with at most a
/// fraction of its elements differing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Allowance {
    pub envelope: Envelope,
    pub fraction: f64,
}

impl Allowance {
    /// A recorded envelope and differing fraction, each widened by `margin` (a fraction
    /// never past 1).
    pub fn widened(envelope: Envelope, differing_fraction: f64, margin: f64) -> Self {
        Self { envelope: envelope.times(margin), fraction: (differing_fraction * margin).min(1.0) }
    }

    /// How `got` holds against `first`, and whether it is allowed.
    pub fn judge(&self, element: Element, first: &[u8], got: &[u8]) -> (Fit, bool) {
        let fit = self.envelope.holds(element, first, got);
        let allowed = fit.outside == 0 && fit.differing as f64 <= self.fraction * fit.elements as f64;
        (fit, allowed)
    }
}

/// What a replay's [`Distance`] from the first launch may reach: each statistic's bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub rms: Bound,
    pub block_rms: Bound,
}

impl Bounds {
    /// The bounds of recorded `distances`, or `None` for none.
    pub fn of(distances: &[Distance]) -> Option<Self> {
        let each = |f: fn(&Distance) -> f64| Bound::of(&distances.iter().map(f).collect::<Vec<_>>());
        Some(Self { rms: each(|d| d.rms)?, block_rms: each(|d| d.block_rms)? })
    }

    /// The statistic of `d` past its limit, if one is: its name, value and bound.
    pub fn exceeded(&self, d: Distance) -> Option<(&'static str, f64, Bound)> {
        [("RMS distance", d.rms, self.rms), ("RMS distance in one 4 KiB block", d.block_rms, self.block_rms)]
            .into_iter()
            .find(|(_, value, bound)| !bound.holds(*value))
    }
}

/// How launches of one output differed from its first launch, gathered launch by launch.
#[derive(Clone, Debug, PartialEq)]
pub struct Spread {
    element: Element,
    pub elements: u64,
    /// The most elements one launch changed.
    pub differing: u64,
    /// Largest absolute difference of two numbers (0 for `Bytes`).
    pub max_abs: f64,
    /// Largest distance in ULP of the element type (0 for `Bytes`): a description only.
    pub max_ulp: u64,
    /// Elements where one side is NaN or infinite and the other not, or `Bytes` that
    /// differ: no tolerance covers them.
    pub incomparable: u64,
    /// The mean magnitude of the first launch's finite elements: what an envelope's `rtol`
    /// is weighed by; read from the first launch when another first differs from it.
    mean_magnitude: Option<f64>,
    /// For each rung's `rtol`, the smallest `atol` that covered every element seen.
    atol_at: [f64; RUNGS],
    /// Each launch's distance from the first, in the order they were added.
    pub distances: Vec<Distance>,
}

/// What one launch showed against the first, over a part of an output or all of it.
#[derive(Clone, Copy, Default)]
struct Widening {
    differing: u64,
    incomparable: u64,
    max_abs: f64,
    max_ulp: u64,
    atol_at: [f64; RUNGS],
    squares: PartSquares,
}

impl Widening {
    fn of(element: Element, first: &[u8], other: &[u8]) -> Self {
        let mut w = Self::default();
        let mut squares = Squares::of_part(element.size(), first.len() / element.size());
        let rungs: [f64; RUNGS] = std::array::from_fn(|j| rung(element, j));
        for Pair { at, first: (f, of), other: (x, ox) } in element.differing(first, other) {
            w.differing += 1;
            match (element.is_float() && f.is_finite() && x.is_finite(), of, ox) {
                (true, Some(of), Some(ox)) => {
                    let (d, a) = ((x - f).abs(), f.abs());
                    squares.add(at, d);
                    w.max_abs = w.max_abs.max(d);
                    w.max_ulp = w.max_ulp.max(of.abs_diff(ox));
                    for (atol, r) in w.atol_at.iter_mut().zip(rungs) {
                        *atol = atol.max(d - r * a);
                    }
                }
                // Two NaNs of different payload are both NaN.
                _ if element.is_float() && f.is_nan() && x.is_nan() => {}
                _ => w.incomparable += 1,
            }
        }
        Self { squares: squares.finish(), ..w }
    }

    /// Two parts of one launch together, the earlier first.
    fn and(self, later: Self) -> Self {
        Self {
            differing: self.differing + later.differing,
            incomparable: self.incomparable + later.incomparable,
            max_abs: self.max_abs.max(later.max_abs),
            max_ulp: self.max_ulp.max(later.max_ulp),
            atol_at: std::array::from_fn(|j| self.atol_at[j].max(later.atol_at[j])),
            squares: self.squares.and(later.squares),
        }
    }
}

impl Spread {
    /// A spread of launches of `first` that have not differed yet. Nothing of `first` is
    /// read until one does: most outputs never vary, and reading gigabytes of a cache
    /// for nothing cost an export minutes.
    pub fn of_first(element: Element, first: &[u8]) -> Self {
        Self {
            element,
            elements: (first.len() / element.size()) as u64,
            differing: 0,
            max_abs: 0.0,
            max_ulp: 0,
            incomparable: 0,
            mean_magnitude: None,
            atol_at: [0.0; RUNGS],
            distances: Vec::new(),
        }
    }

    /// Widens the spread by a launch that gave `other` where the first gave `first`, and
    /// notes its distance. Lengths that differ are all incomparable and have no distance.
    pub fn add(&mut self, first: &[u8], other: &[u8]) {
        let size = self.element.size();
        if first.len() != other.len() || first.len() % size != 0 {
            self.differing = self.elements;
            self.incomparable = self.incomparable.max(self.elements.max(1));
            return;
        }
        let element = self.element;
        self.mean_magnitude.get_or_insert_with(|| element.mean_magnitude(first));
        let widening = |i| Widening::of(element, part(first, i), part(other, i));
        let parts = crate::on_cores::map(parts_of(first), widening);
        let launch = parts.into_iter().reduce(Widening::and).unwrap_or_default();
        self.max_abs = self.max_abs.max(launch.max_abs);
        self.max_ulp = self.max_ulp.max(launch.max_ulp);
        for (atol, part) in self.atol_at.iter_mut().zip(launch.atol_at) {
            *atol = atol.max(part);
        }
        self.differing = self.differing.max(launch.differing);
        self.incomparable = self.incomparable.max(launch.incomparable);
        // Bytes compare bitwise: a distance of integers would measure nothing (format v3).
        if element.is_float() {
            self.distances.push(launch.squares.distance(self.elements));
        }
    }

    pub fn differing_fraction(&self) -> f64 {
        match self.elements {
            0 => 0.0,
            n => self.differing as f64 / n as f64,
        }
    }

    /// The envelope that held every element seen, tightest on average: of the ladder's
    /// `rtol`s, the one whose `atol + rtol × mean magnitude` is smallest.
    pub fn envelope(&self) -> Envelope {
        (0..RUNGS)
            .map(|j| Envelope { atol: self.atol_at[j], rtol: rung(self.element, j) })
            .min_by(|a, b| {
                let cost = |e: &Envelope| e.atol + e.rtol * self.mean_magnitude.unwrap_or(0.0);
                cost(a).total_cmp(&cost(b))
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16s(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect()
    }

    fn f32s(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn spread(element: Element, first: &[u8], others: &[&[u8]]) -> Spread {
        let mut s = Spread::of_first(element, first);
        others.iter().for_each(|o| s.add(first, o));
        s
    }

    /// A launch of an output larger than a part is compared, and held to an envelope, part
    /// by part on the host's cores: what the parts found adds up as one pass would.
    #[test]
    fn the_parts_of_a_large_output_add_up() {
        let n = 3 * PART_BYTES / 4 - 5; // three parts of f32, the last short
        let first: Vec<f32> = (0..n).map(|i| (i % 97) as f32).collect();
        let mut other = first.clone();
        for (at, by) in [(1, 0.5), (n / 3 + 1, 0.25), (n / 3 + 2, 0.25), (n / 2, 0.125), (n - 1, 2.0)] {
            other[at] += by;
        }
        (other[2], other[n / 3 + 3], other[n - 2]) = (f32::NAN, f32::INFINITY, f32::NAN);
        let s = spread(Element::Float32, &f32s(&first), &[&f32s(&other)]);
        assert_eq!((s.differing, s.incomparable, s.max_abs), (8, 3, 2.0));
        assert_eq!(s.envelope().atol, 2.0, "the widest difference, in the last part, sets the envelope");
        let fit = Envelope { atol: 0.3, rtol: 0.0 }.holds(Element::Float32, &f32s(&first), &f32s(&other));
        let outside = 3 + 2; // the three NaN or infinite, 0.5 and 2.0
        assert_eq!((fit.elements, fit.differing, fit.outside, fit.max_abs), (n as u64, 8, outside, 2.0));
        assert_eq!(fit.worst_share, f64::INFINITY);
    }

    /// The case: a value crossing zero is billions of ULP away in fp32, and a few
    /// hundredths in the data's units; the envelope says the latter.
    #[test]
    fn a_value_crossing_zero_is_near_in_the_datas_units_however_far_in_ulp() {
        let first = f32s(&[1e-9, 2.0, -3.0]);
        let s = spread(Element::Float32, &first, &[&f32s(&[-0.03, 2.0, -3.0])]);
        assert!(s.max_ulp > 1_000_000_000, "{}", s.max_ulp);
        assert!((s.max_abs - 0.03).abs() < 1e-6);
        let e = s.envelope();
        assert!((e.atol - 0.03).abs() < 1e-6 && e.rtol == 0.0, "{e:?}");
        let fit = e.times(4.0).holds(Element::Float32, &first, &f32s(&[0.1, 2.0, -3.0]));
        assert_eq!((fit.differing, fit.outside), (1, 0));
        let fit = e.times(4.0).holds(Element::Float32, &first, &f32s(&[0.2, 2.0, -3.0]));
        assert_eq!(fit.outside, 1, "0.2 is past four times 0.03");
    }

    /// A ULP distance counts the floats between two elements, on either side of zero and
    /// across it, for elements of every width.
    #[test]
    fn ulp_distances_count_the_floats_between_across_zero_and_at_every_width() {
        let ulp = |element, first: &[u8], other: &[u8]| spread(element, first, &[other]).max_ulp;
        let up = |x: f32, n: u32| f32::from_bits(x.to_bits() + n);
        assert_eq!(ulp(Element::Float32, &f32s(&[2.0]), &f32s(&[up(2.0, 3)])), 3);
        assert_eq!(ulp(Element::Float32, &f32s(&[-2.0]), &f32s(&[-up(2.0, 5)])), 5);
        let tiny = f32::from_bits(1);
        assert_eq!(ulp(Element::Float32, &f32s(&[tiny]), &f32s(&[-tiny])), 2, "the smallest floats either side of 0");
        assert_eq!(ulp(Element::Bfloat16, &bf16s(&[-1.0]), &bf16s(&[-1.0078125])), 1);
        let f64s = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let next = f64::from_bits((-1.0f64).to_bits() + 4);
        let s = spread(Element::Float64, &f64s(&[-1.0]), &[&f64s(&[next])]);
        assert_eq!((s.max_ulp, s.max_abs), (4, 4.0 * f64::EPSILON));
    }

    /// In bfloat16, 30 000 ULP cover every value there is; a relative envelope fitted to
    /// one-rounding flips still refuses a value twice as large.
    #[test]
    fn bfloat16_rounding_flips_fit_a_relative_envelope() {
        let first = bf16s(&[1.0, 100.0, -8.0, 0.5]);
        let flipped = bf16s(&[1.0078125, 100.5, -8.0625, 0.5]);
        let s = spread(Element::Bfloat16, &first, &[&flipped]);
        let e = s.envelope();
        assert_eq!(e.atol, 0.0, "{e:?}");
        assert!(e.rtol >= 2f64.powi(-7) && e.rtol <= 2f64.powi(-6), "{e:?}");
        assert_eq!(s.differing_fraction(), 0.75);
        let doubled = bf16s(&[2.0, 100.0, -8.0, 0.5]);
        assert_eq!(e.times(4.0).holds(Element::Bfloat16, &first, &doubled).outside, 1);
        let inverted: Vec<u8> = first.iter().map(|b| !b).collect();
        assert_eq!(e.times(4.0).holds(Element::Bfloat16, &first, &inverted).outside, 4, "every byte inverted");
    }

    /// Large values that moved in proportion and small ones that moved a little in
    /// absolute terms need both terms; the fit takes the pair of least mean allowance.
    #[test]
    fn an_envelope_takes_both_terms_where_the_data_needs_both() {
        let first = f32s(&[1000.0, 0.001, 1.0, 1.0]);
        let other = f32s(&[1000.0 * (1.0 + 2e-5), 0.0011, 1.0, 1.0]);
        let e = spread(Element::Float32, &first, &[&other]).envelope();
        assert!(e.rtol > 0.0 && e.atol > 0.0, "{e:?}");
        assert!(e.atol < 1e-3, "the large value's difference (0.02) is not taken as absolute: {e:?}");
        assert_eq!(e.holds(Element::Float32, &first, &other).outside, 0, "it holds what it was fitted to");
    }

    #[test]
    fn nan_against_a_number_and_differing_bytes_take_no_tolerance() {
        let first = bf16s(&[f32::NAN, 1.0]);
        let s = spread(Element::Bfloat16, &first, &[&bf16s(&[1.0, 1.0])]);
        assert_eq!((s.differing, s.incomparable), (1, 1));
        let wide = Envelope { atol: 1e9, rtol: 1.0 };
        assert_eq!(wide.holds(Element::Bfloat16, &first, &bf16s(&[1.0, 1.0])).outside, 1);
        let other_nan = [0xc1, 0x7f, 0x80, 0x3f];
        assert_eq!(
            wide.holds(Element::Bfloat16, &first, &other_nan),
            Fit { elements: 2, differing: 1, ..Fit::default() }
        );
        let s = spread(Element::Bfloat16, &first, &[&other_nan]);
        assert_eq!((s.differing, s.incomparable), (1, 0), "two NaNs of different payload are both NaN");
        let s = spread(Element::Bytes, &[1, 2, 3], &[&[1, 2, 4]]);
        assert_eq!((s.differing, s.incomparable, s.max_ulp), (1, 1, 0));
        assert_eq!(wide.holds(Element::Bytes, &[1, 2, 3], &[1, 2, 4]).outside, 1);
        let misfit = Fit { elements: 2, differing: 2, outside: 2, worst_share: f64::INFINITY, ..Fit::default() };
        assert_eq!(wide.holds(Element::Float32, &[0; 8], &[0; 4]), misfit, "lengths differ");
        let s = spread(Element::Float32, &[0; 8], &[&[0; 12]]);
        assert_eq!((s.differing, s.incomparable), (2, 2), "lengths differ");
    }

    /// A token output that varied (argmax of near-tied logits) must still write a core
    /// that validates: bytes carry other digests but no distances (found on an H100, where
    /// qwen3_moe's `next-token` varied and every export of it was refused).
    #[test]
    fn differing_bytes_record_no_distance() {
        let s = spread(Element::Bytes, &[1, 2, 3], &[&[1, 2, 4], &[1, 5, 3]]);
        assert_eq!((s.differing, s.distances.len()), (1, 0));
        let s = spread(Element::Float32, &[0; 8], &[&[0, 0, 0, 0, 0, 0, 0x80, 0x3f]]);
        assert_eq!(s.distances.len(), 1, "a float output's launch has its distance");
    }

    /// Where a large value moved a little in absolute terms, the mean magnitude decides:
    /// an rtol that covers it would allow far more over the whole output than the atol.
    #[test]
    fn the_envelope_weighs_rtol_by_the_outputs_mean_magnitude() {
        let first = f32s(&[1000.0, 4000.0, 4000.0, 4000.0]);
        let e = spread(Element::Float32, &first, &[&f32s(&[1000.0625, 4000.0, 4000.0, 4000.0])]).envelope();
        assert_eq!(e, Envelope { atol: 0.0625, rtol: 0.0 });
    }

    /// A judge's allowance: the envelope and the fraction each times the margin, the
    /// fraction never past all; an output passes when no element lies outside and no more
    /// than that fraction of them differ.
    #[test]
    fn an_allowance_widens_both_and_admits_only_what_fits_both() {
        let a = Allowance::widened(Envelope { atol: 0.01, rtol: 0.001 }, 0.25, 2.0);
        assert_eq!(a, Allowance { envelope: Envelope { atol: 0.02, rtol: 0.002 }, fraction: 0.5 });
        assert_eq!(Allowance::widened(Envelope::default(), 0.3, 4.0).fraction, 1.0, "never past all");
        let first = f32s(&[1.0, 2.0, 3.0, 4.0]);
        let (fit, admitted) = a.judge(Element::Float32, &first, &f32s(&[1.01, 2.0, 3.0, 4.0]));
        assert!(admitted && fit.differing == 1 && fit.outside == 0, "{fit:?}");
        assert!(a.judge(Element::Float32, &first, &f32s(&[1.01, 2.01, 3.0, 4.0])).1, "half of them: at the fraction");
        assert!(!a.judge(Element::Float32, &first, &f32s(&[1.01, 2.01, 3.01, 4.0])).1, "more than half");
        assert!(!a.judge(Element::Float32, &first, &f32s(&[1.1, 2.0, 3.0, 4.0])).1, "one element outside");
        assert!(a.judge(Element::Float32, &first, &first).1, "the first launch itself");
    }

    #[test]
    fn infinities_agree_only_with_themselves() {
        let first = f32s(&[f32::INFINITY, 1.0]);
        let wide = Envelope { atol: 1e30, rtol: 1.0 };
        assert_eq!(wide.holds(Element::Float32, &first, &f32s(&[f32::MAX, 1.0])).outside, 1);
        assert_eq!(wide.holds(Element::Float32, &first, &first).differing, 0);
        let s = spread(Element::Float32, &first, &[&f32s(&[f32::MAX, 1.0])]);
        assert_eq!(s.incomparable, 1);
    }

    #[test]
    fn nothing_allowed_refuses_any_difference() {
        let first = f32s(&[0.0, 1.0]);
        let fit = Envelope::default().holds(Element::Float32, &first, &f32s(&[0.0, 1.0000001]));
        assert_eq!((fit.outside, fit.worst_share), (1, f64::INFINITY));
        let same = Envelope::default().holds(Element::Float32, &first, &f32s(&[-0.0, 1.0]));
        assert_eq!((same.differing, same.outside), (1, 0), "-0 equals 0 in value");
    }

    /// The most elements one launch changed, not their sum over launches.
    #[test]
    fn the_differing_fraction_is_the_widest_launchs() {
        let first = f32s(&[1.0, 2.0, 3.0, 4.0]);
        let s = spread(Element::Float32, &first, &[&f32s(&[1.5, 2.0, 3.0, 4.0]), &f32s(&[1.0, 2.5, 3.5, 4.0])]);
        assert_eq!((s.differing, s.differing_fraction()), (2, 0.5));
        assert_eq!(s.envelope().holds(Element::Float32, &first, &f32s(&[1.5, 2.5, 3.5, 4.0])).outside, 0);
    }

    /// NaN everywhere (the poison's 0xff bytes, or computed), infinities mixed in, or one
    /// value repeated: blank; one finite element, or one differing, is not.
    #[test]
    fn outputs_of_nothing_but_nan_or_one_value_are_blank() {
        assert_eq!(Element::Bfloat16.blank(&[0xff; 64]), Some(Blank::NonFinite));
        assert_eq!(Element::Float32.blank(&f32s(&[f32::NAN, f32::INFINITY, -f32::INFINITY])), Some(Blank::NonFinite));
        assert_eq!(Element::Float32.blank(&f32s(&[f32::NAN, 1.0])), None);
        assert_eq!(Element::Bfloat16.blank(&bf16s(&[0.0; 8])), Some(Blank::Alike(0.0)));
        assert_eq!(Element::Bfloat16.blank(&bf16s(&[2.5, 2.5, 2.5, 2.5])), Some(Blank::Alike(2.5)));
        assert_eq!(Element::Bfloat16.blank(&bf16s(&[2.5, 2.5, 2.5, 2.0])), None);
        assert_eq!(Element::Float32.blank(&f32s(&[3.0])), None, "one finite element is a value");
        assert_eq!(Element::Bytes.blank(&[0; 16]), None, "integers alike are a value: token ids can all agree");
        assert_eq!(Element::Float32.blank(&[0; 6]), None, "not a whole number of elements");
    }

    #[test]
    fn dtypes_name_their_elements() {
        let named = [
            ("torch.float64", Element::Float64),
            ("double", Element::Float64),
            ("torch.float32", Element::Float32),
            ("float", Element::Float32),
            ("torch.float16", Element::Float16),
            ("half", Element::Float16),
            ("torch.bfloat16", Element::Bfloat16),
            ("torch.int64", Element::Bytes),
            ("torch.bool", Element::Bytes),
        ];
        for (dtype, element) in named {
            assert_eq!(Element::of_dtype(dtype), element, "{dtype}");
        }
    }
}
