//! Calibrated defects: a first launch with some of its elements moved just far enough that
//! a distance passes a given limit, what a judge's self-test feeds it to show that a
//! defect at its stated floor is refused. Moves are rounded to the element type, so the
//! distance is measured on the bytes made, not assumed from the amount asked.

use std::ops::Range;

use super::{Distance, Element, Envelope};

/// How much a move grows when its rounded bytes did not yet pass the limit, and at most
/// how many times (1.25²⁰⁰ ≈ 4·10¹⁹).
const GROWTH: f64 = 1.25;
const GROWTHS: u32 = 200;

impl Element {
    /// `bytes` with each finite element in `elements` moved by `by`, up and down in turn,
    /// rounded to the type; other elements are left as they are.
    pub fn moved(self, bytes: &[u8], by: f64, elements: Range<usize>) -> Vec<u8> {
        let size = self.size();
        let mut out = bytes.to_vec();
        for (n, i) in elements.enumerate().take_while(|&(_, i)| (i + 1) * size <= bytes.len()) {
            let (value, _) = self.at(bytes, i);
            if !self.is_float() || !value.is_finite() {
                continue;
            }
            let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
            self.put(value + sign * by, &mut out[i * size..(i + 1) * size]);
        }
        out
    }

    /// Writes `value`, rounded to the type, as little-endian bits (floats only).
    fn put(self, value: f64, into: &mut [u8]) {
        match self {
            Element::Float64 => into.copy_from_slice(&value.to_le_bytes()),
            Element::Float32 => into.copy_from_slice(&(value as f32).to_le_bytes()),
            Element::Float16 => into.copy_from_slice(&half::f16::from_f64(value).to_le_bytes()),
            Element::Bfloat16 => into.copy_from_slice(&half::bf16::from_f64(value).to_le_bytes()),
            Element::Bytes => {}
        }
    }
}

/// `first` with the finite elements of `elements` moved until `statistic` of its distance
/// from `first` passes `limit`: from 1.05 × the limit (or, for a limit of 0, one rounding
/// of the largest element moved), growing by a quarter each time rounding kept it under,
/// so the defect lands within a quarter of the first move that passes. `None` where no
/// move gets there (no finite element to move).
pub fn past_limit(
    element: Element,
    first: &[u8],
    elements: Range<usize>,
    limit: f64,
    statistic: fn(&Distance) -> f64,
) -> Option<(Vec<u8>, Distance)> {
    let size = element.size();
    let largest = elements
        .clone()
        .take_while(|&i| (i + 1) * size <= first.len())
        .map(|i| element.at(first, i).0.abs())
        .filter(|v| element.is_float() && v.is_finite())
        .reduce(f64::max)?;
    let mut by = (1.05 * limit).max(largest * element.unit_roundoff()).max(f64::MIN_POSITIVE);
    for _ in 0..GROWTHS {
        let moved = element.moved(first, by, elements.clone());
        let distance = Envelope::default().holds(element, first, &moved).distance;
        if statistic(&distance) > limit {
            return Some((moved, distance));
        }
        by *= GROWTH;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16s(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect()
    }

    /// Every element moved: the whole output's distance passes the limit, measured on the
    /// rounded bytes; NaN and infinities stay as they were.
    #[test]
    fn a_move_over_every_element_passes_the_whole_outputs_limit() {
        let mut values: Vec<f32> = (0..4096).map(|i| (i % 13) as f32 - 6.0).collect();
        (values[7], values[8]) = (f32::NAN, f32::INFINITY);
        let first = bf16s(&values);
        let (moved, d) = past_limit(Element::Bfloat16, &first, 0..4096, 0.02, |d| d.rms).unwrap();
        assert!(d.rms > 0.02 && d.rms < 0.2, "{d:?}");
        assert_eq!(moved[14..18], first[14..18], "NaN and infinity untouched");
        assert_eq!(Envelope::default().holds(Element::Bfloat16, &first, &moved).distance, d);
    }

    /// One block moved: its distance passes the block's limit while the whole output's
    /// stays far below.
    #[test]
    fn a_move_in_one_block_passes_the_blocks_limit_alone() {
        let first: Vec<u8> = (0..8192).flat_map(|i| (i as f32 / 100.0).to_le_bytes()).collect();
        let block = 0..super::super::BLOCK_BYTES / 4;
        let (_, d) = past_limit(Element::Float32, &first, block, 0.5, |d| d.block_rms).unwrap();
        assert!(d.block_rms > 0.5 && d.rms < d.block_rms / 2.0, "{d:?}");
    }

    fn f32s(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// Each finite element of the range moves by the amount, up then down in turn (its
    /// place in the range decides, skipped elements counted); NaN, elements past the
    /// output's end and bytes stay.
    #[test]
    fn a_move_goes_up_and_down_in_turn_over_the_range_alone() {
        let first = f32s(&[1.0, 2.0, 3.0, f32::NAN, 5.0]);
        assert_eq!(Element::Float32.moved(&first, 0.5, 0..5), f32s(&[1.5, 1.5, 3.5, f32::NAN, 5.5]));
        assert_eq!(Element::Float32.moved(&first, 0.5, 1..3), f32s(&[1.0, 2.5, 2.5, f32::NAN, 5.0]));
        assert_eq!(Element::Float32.moved(&first, 0.5, 3..10), f32s(&[1.0, 2.0, 3.0, f32::NAN, 4.5]));
        assert_eq!(Element::Bytes.moved(&[1, 2, 3], 1.0, 0..3), [1, 2, 3]);
    }

    /// Where rounding keeps the first move (1 + 2⁻⁸ is 1 in bfloat16), the move grows by a
    /// quarter at a time until one lands: the defect is the smallest the type can make,
    /// not one far past the limit; a range past the output's end is cut at its end.
    #[test]
    fn a_move_that_rounds_away_grows_by_a_quarter_until_it_lands() {
        let one = bf16s(&[1.0]);
        let (moved, d) = past_limit(Element::Bfloat16, &one, 0..100, 0.0, |d| d.rms).unwrap();
        assert_eq!(moved, bf16s(&[1.0078125]), "the next bfloat16 after 1");
        assert_eq!(d.rms, 0.0078125);
        let (_, d) = past_limit(Element::Float32, &f32s(&[1.0; 8]), 0..8, 0.01, |d| d.rms).unwrap();
        assert!(d.rms > 0.01 && d.rms < 0.0106, "1.05 × the limit, where nothing rounds away: {d:?}");
    }

    /// A limit of 0 is passed by the smallest move rounding keeps; an output with nothing
    /// finite to move, or of bytes, cannot be moved at all.
    #[test]
    fn a_limit_of_nothing_is_passed_and_nothing_finite_cannot_be_moved() {
        let first = bf16s(&[1.0, 2.0]);
        let (_, d) = past_limit(Element::Bfloat16, &first, 0..2, 0.0, |d| d.rms).unwrap();
        assert!(d.rms > 0.0);
        assert!(past_limit(Element::Bfloat16, &bf16s(&[f32::NAN; 4]), 0..4, 0.1, |d| d.rms).is_none());
        assert!(past_limit(Element::Bytes, &[1, 2, 3], 0..3, 0.0, |d| d.rms).is_none());
    }
}
