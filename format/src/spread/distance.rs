//! How far a launch lies from the first as a whole: the root mean square of `x − first`
//! over every element of the output, and over the 4 KiB block where it is largest. An
//! elementwise envelope is set by the single widest element of the widest launch, so a
//! defect that moves every element a little, or one block by a lot, hides under the tail
//! of the noise; a mean of squares measures both against what nondeterminism did on
//! average, over the whole output and in its noisiest block.

use serde::{Deserialize, Serialize};

/// The bytes of a block a distance is also measured over (a whole number of every
/// element's size, and a divisor of the parts outputs are compared in).
pub const BLOCK_BYTES: usize = 4096;

/// How far one launch of an output lay from the first launch, in the data's own units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Distance {
    /// √(mean of (x − first)²) over every element (equal elements add 0).
    pub rms: f64,
    /// The same over the 4 KiB block where it is largest (the output's last block may be
    /// shorter and is averaged over its own elements).
    pub block_rms: f64,
}

/// Squared differences of one part of an output, added element by element in increasing
/// order: their sum, and the largest mean of a block. A part starts on a block boundary.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Squares {
    sum: f64,
    /// The largest mean square of a block finished so far.
    block_max: f64,
    /// The block being summed, and its sum so far.
    block: usize,
    block_sum: f64,
    per_block: usize,
    /// Elements in the part: the last block's may be fewer than `per_block`.
    elements: usize,
}

impl Squares {
    /// Squares of a part of `elements` elements of `size` bytes.
    pub(super) fn of_part(size: usize, elements: usize) -> Self {
        Self { per_block: BLOCK_BYTES / size, elements, ..Self::default() }
    }

    /// Adds the squared difference of element `at` of the part (elements come in
    /// increasing order; those not added differ by 0).
    pub(super) fn add(&mut self, at: usize, difference: f64) {
        let block = at / self.per_block;
        if block != self.block {
            self.close_block();
            self.block = block;
        }
        let square = difference * difference;
        self.sum += square;
        self.block_sum += square;
    }

    fn close_block(&mut self) {
        let start = self.block * self.per_block;
        let len = self.per_block.min(self.elements.saturating_sub(start)).max(1);
        self.block_max = self.block_max.max(self.block_sum / len as f64);
        self.block_sum = 0.0;
    }

    /// The part's sum of squares and its largest block mean square.
    pub(super) fn finish(mut self) -> PartSquares {
        self.close_block();
        PartSquares { sum: self.sum, block_max: self.block_max }
    }
}

/// What [`Squares`] found in one part; parts of one output add up with [`Self::and`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct PartSquares {
    sum: f64,
    block_max: f64,
}

impl PartSquares {
    /// Two parts together, the earlier first (sums are added in part order, so the
    /// result does not depend on the host's cores).
    pub(super) fn and(self, later: Self) -> Self {
        Self { sum: self.sum + later.sum, block_max: self.block_max.max(later.block_max) }
    }

    /// The distance over an output of `elements` elements.
    pub(super) fn distance(self, elements: u64) -> Distance {
        let rms = if elements == 0 { 0.0 } else { (self.sum / elements as f64).sqrt() };
        Distance { rms, block_rms: self.block_max.sqrt() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distance(size: usize, elements: usize, differences: &[(usize, f64)]) -> Distance {
        let mut s = Squares::of_part(size, elements);
        differences.iter().for_each(|&(at, d)| s.add(at, d));
        s.finish().distance(elements as u64)
    }

    /// One element off by 2 among 1024 float32 (one block): the whole output's RMS is
    /// 2/32, the block's the same; spread over two blocks the noisiest block says more.
    #[test]
    fn a_distance_is_the_rms_over_the_output_and_over_its_noisiest_block() {
        assert_eq!(distance(4, 1024, &[(5, 2.0)]), Distance { rms: 2.0 / 32.0, block_rms: 2.0 / 32.0 });
        let two_blocks = distance(4, 2048, &[(1030, 2.0), (1031, -2.0)]);
        assert_eq!(two_blocks.rms, (8.0f64 / 2048.0).sqrt());
        assert_eq!(two_blocks.block_rms, (8.0f64 / 1024.0).sqrt());
        assert_eq!(distance(2, 2048, &[]), Distance::default(), "nothing differs");
    }

    /// The last block of an output can be short: its mean is over its own elements, so a
    /// defect there is not diluted by elements that do not exist.
    #[test]
    fn a_short_last_block_is_averaged_over_its_own_elements() {
        let d = distance(2, 2048 + 4, &[(2049, 1.0), (2050, 1.0)]);
        assert_eq!(d.block_rms, (2.0f64 / 4.0).sqrt());
        assert_eq!(d.rms, (2.0f64 / 2052.0).sqrt());
    }

    /// Parts add their sums and keep the larger block: what one pass over the whole
    /// output would find.
    #[test]
    fn parts_add_up_as_one_pass() {
        let whole = distance(4, 4096, &[(3, 1.0), (2000, 3.0), (3000, 0.5)]);
        let mut first = Squares::of_part(4, 2048);
        first.add(3, 1.0);
        first.add(2000, 3.0);
        let mut second = Squares::of_part(4, 2048);
        second.add(3000 - 2048, 0.5);
        assert_eq!(first.finish().and(second.finish()).distance(4096), whole);
    }
}
