//! What a distance of a replayed output may reach before the judge calls it a defect,
//! derived from the distances the recorded launches gave, and the smallest defect that is
//! then caught: the false-failure rate, the miss rate and the detection floor stated, as
//! TensorRT-LLM's accuracy tests state theirs.
//!
//! Each of the K launches recorded (one per digest other than the first's) lay a distance
//! `d_k` from the first launch. A replay of the same program is one more draw of that
//! distance from the same first launch, so it is held to
//!
//! ```text
//! limit = max_k d_k × (1 + Z·c),   c = max(sd(d) / mean(d), 0.1, 0.5 / √K)
//! ```
//!
//! `c` is the distances' relative spread, never taken below 0.1 (nor below 0.5/√K: with
//! few launches their spread is itself unknown; one launch that varied says nothing of how
//! far the next may). Under a normal model of the distance, an unchanged port exceeds
//! `mean × (1 + Z·c) ≥ mean + Z·sd` with probability Φ(−Z): Z = 5 gives
//! [`FALSE_FAILURE_RATE`] per output and statistic, and the limit starts from the widest
//! launch, not the mean. A defect adds to the noise in quadrature (the cross term averages
//! out over many elements); its *effect* is the replay's distance in units of the recorded
//! mean, and an effect of at least the floor, `limit / mean + z_β·c`, is caught with
//! probability 1 − β ([`MISS_RATE`]).

/// Standard deviations of the distance between its mean and the limit: one-sided
/// Φ(−5) ≈ 2.9e-7.
const Z: f64 = 5.0;
/// The false-failure rate `Z` implies, per output and statistic, under the normal model.
pub const FALSE_FAILURE_RATE: f64 = 2.9e-7;
/// The miss rate a floor is stated for, and its normal quantile.
pub const MISS_RATE: f64 = 0.2;
const Z_MISS: f64 = 0.8416;
/// The least relative spread the distances are taken to have.
const LEAST_SPREAD: f64 = 0.1;
/// With K launches, their spread is taken to be at least this over √K.
const FEW_LAUNCHES_SPREAD: f64 = 0.5;

/// What one statistic of a varying output may reach, from the values its recorded
/// launches gave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    /// The largest value a replay may give.
    pub limit: f64,
    /// The mean of the recorded values: the unit effects and floors are stated in.
    pub mean: f64,
    /// The relative spread the limit was derived with (`c`).
    pub spread: f64,
    /// How many recorded values it was derived from.
    pub launches: usize,
}

impl Bound {
    /// The bound of recorded `values` (finite, ≥ 0), or `None` for none.
    pub fn of(values: &[f64]) -> Option<Self> {
        let k = values.len();
        if k == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / k as f64;
        let max = values.iter().copied().fold(0.0, f64::max);
        let sd = match k {
            1 => 0.0,
            _ => (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (k - 1) as f64).sqrt(),
        };
        let relative = if mean > 0.0 { sd / mean } else { 0.0 };
        let spread = relative.max(LEAST_SPREAD).max(FEW_LAUNCHES_SPREAD / (k as f64).sqrt());
        Some(Self { limit: max * (1.0 + Z * spread), mean, spread, launches: k })
    }

    /// How the limit was derived, in words (what a refusal says after the figures).
    pub fn derivation(&self) -> String {
        format!(
            "the limit is the widest × (1 + {Z} × their relative spread {:.3}), a false-failure rate of \
             {FALSE_FAILURE_RATE:.1e} under a normal model",
            self.spread
        )
    }

    /// The largest recorded value, whose widening the limit is.
    pub fn widest(&self) -> f64 {
        self.limit / (1.0 + Z * self.spread)
    }

    /// Whether a replay's `value` is within the limit.
    pub fn holds(&self, value: f64) -> bool {
        value <= self.limit
    }

    /// `value` in units of the recorded mean (`None` where every recorded value was 0:
    /// the launches differed in bits, not in value, so any change of value is past it).
    pub fn in_means(&self, value: f64) -> Option<f64> {
        (self.mean > 0.0).then(|| value / self.mean)
    }

    /// The smallest effect, in units of the recorded mean, caught with probability
    /// 1 − [`MISS_RATE`] (`None` where any change of value is caught).
    pub fn floor(&self) -> Option<f64> {
        self.in_means(self.limit).map(|limit| limit + Z_MISS * self.spread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many launches alike: the limit is 1.5 × the widest, the least it can be, and the
    /// floor says how many means a defect's effect must reach.
    #[test]
    fn many_alike_launches_give_the_tightest_limit() {
        let values: Vec<f64> = (0..64).map(|i| 1.0 + 0.001 * (i % 5) as f64).collect();
        let b = Bound::of(&values).unwrap();
        assert_eq!(b.spread, LEAST_SPREAD);
        assert!((b.limit - 1.004 * 1.5).abs() < 1e-12, "{b:?}");
        let floor = b.floor().unwrap();
        assert!((floor - (b.limit / b.mean + Z_MISS * 0.1)).abs() < 1e-12 && floor < 2.0, "{floor}");
        assert!(b.holds(b.limit) && !b.holds(b.limit * (1.0 + 1e-12)));
    }

    /// Few launches widen the limit: one launch that varied allows 3.5 × its distance.
    #[test]
    fn few_launches_widen_the_limit() {
        let one = Bound::of(&[2.0]).unwrap();
        assert_eq!((one.spread, one.limit, one.launches), (0.5, 7.0, 1));
        let four = Bound::of(&[1.0; 4]).unwrap();
        assert_eq!((four.spread, four.limit), (0.25, 2.25));
    }

    /// Distances that spread widely widen the limit by their own spread.
    #[test]
    fn distances_that_spread_widen_the_limit_by_their_spread() {
        let values: Vec<f64> = (0..100).map(|i| if i % 2 == 0 { 1.0 } else { 3.0 }).collect();
        let b = Bound::of(&values).unwrap();
        assert!((b.spread - 0.5025).abs() < 1e-3, "{b:?}");
        assert!((b.limit - 3.0 * (1.0 + 5.0 * b.spread)).abs() < 1e-12);
    }

    /// Launches that differed in bits alone (−0 for 0, another NaN): no value moved, so
    /// any change of value is past the limit, and no floor in units of nothing is stated.
    #[test]
    fn launches_that_moved_no_value_allow_no_change_of_value() {
        let b = Bound::of(&[0.0, 0.0]).unwrap();
        assert_eq!((b.limit, b.floor(), b.in_means(1.0)), (0.0, None, None));
        assert!(b.holds(0.0) && !b.holds(f64::MIN_POSITIVE));
        assert_eq!(Bound::of(&[]), None);
    }
}
