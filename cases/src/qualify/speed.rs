//! `template=T/speed`: a restored template replays as fast as the original did. The
//! exporter timed the template's launches in the capturing process; the restore times the
//! rebuilt one the same way (`gnomon_core::replay::time_launches`). Slower beyond the
//! noise fails: a restore that loses a launch attribute or an edge's port data can still
//! give every output bit for bit.

use gnomon_format::Speed;

use crate::{measured, Metrics, Verdict};

/// How much slower than the original's median a restored median may be before the
/// noise allowance, as a fraction: what repeated qualifications of unchanged cores did not
/// reach (`docs/testing.md`, "The speed rule").
pub const MARGIN: f64 = 0.05;
/// The least noise allowed: two CUDA events bracket a launch, each read to about 0.5 µs
/// (the driver API's documentation of `cuEventElapsedTime`). Graphs of a few µs moved by
/// up to 0.7 µs between qualifications of one core on the H200, where 5 % is 0.3 µs.
pub const RESOLUTION_US: f64 = 1.0;
/// Standard errors of the difference of the two medians the noise allowance spans: one
/// side of a normal model exceeds it with probability Φ(−5) ≈ 2.9e-7.
const Z: f64 = 5.0;

/// The standard error of a median of `s.launches` times: 1.2533 σ/√n for normal times,
/// σ read from the 10th–90th percentile spread (2 × 1.2816 σ).
fn median_error(s: &Speed) -> f64 {
    1.2533 * (s.spread_us / 2.5631) / f64::from(s.launches.max(1)).sqrt()
}

/// The noise a restored median may add to the original's (with the margin): `Z` standard
/// errors of the two medians' difference, at least the events' resolution. The spreads
/// themselves were the allowance before; with both sides timed alike that let a 10 %
/// slowdown of a 45 µs template pass (`baselines/h100-sm90-580.159.04-verdicts/`).
fn noise_us(recorded: &Speed, restored: &Speed) -> f64 {
    (Z * median_error(recorded).hypot(median_error(restored))).max(RESOLUTION_US)
}

/// The verdict on one template: `recorded` is the exporter's speed, `restored` the
/// restore's (timed only where one was recorded).
pub fn judged(template: &str, recorded: Option<&Speed>, restored: Option<&Speed>) -> Result<Metrics, Verdict> {
    let Some(recorded) = recorded else {
        return Err(Verdict::Skipped(format!(
            "the core records no speed for template `{template}`: its exporter did not time its launches"
        )));
    };
    let Some(restored) = restored else {
        return Err(Verdict::Skipped(format!(
            "template `{template}` was not timed: a rank that reaches into its peers' memory launches with \
             them, one launch at a time, not back to back as its exporter timed it"
        )));
    };
    let noise = noise_us(recorded, restored);
    let allowed = recorded.median_us * (1.0 + MARGIN) + noise;
    let metrics = Metrics::from([
        measured("speed-recorded-median-us", recorded.median_us, "us"),
        measured("speed-restored-median-us", restored.median_us, "us"),
        measured("speed-allowed-us", allowed, "us"),
        measured("speed-ratio", restored.median_us / recorded.median_us, "1"),
    ]);
    match restored.median_us <= allowed {
        true => Ok(metrics),
        false => Err(Verdict::Failed(format!(
            "the restored template replays in {:.1} us (median of {} launches), slower than the original's \
             {:.1} us (median of {}) by more than {:.0} % and the noise ({noise:.1} us: {Z} standard errors of \
             the medians' difference, at least the events' resolution): at most {allowed:.1} us",
            restored.median_us,
            restored.launches,
            recorded.median_us,
            recorded.launches,
            MARGIN * 100.0,
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn speed(median_us: f64, spread_us: f64) -> Speed {
        Speed { launches: 20, median_us, spread_us }
    }

    /// 100 µs spread over 2 µs (20 launches), restored spread over 1 µs: the medians'
    /// standard errors 0.219 and 0.109 µs, 5 of their difference's 1.22 µs.
    #[test]
    fn slower_beyond_the_margin_and_the_noise_fails_and_says_by_how_much() {
        let original = speed(100.0, 2.0);
        assert!(judged("b1", Some(&original), Some(&speed(106.0, 1.0))).is_ok(), "within 5 % + 1.22 us");
        let faster = judged("b1", Some(&original), Some(&speed(90.0, 1.0))).expect("faster passes");
        assert_eq!(faster.get("speed-ratio").map(|m| m.value), Some(0.9));
        let allowed = faster.get("speed-allowed-us").map(|m| m.value).unwrap();
        assert!((allowed - 106.2224).abs() < 1e-3, "{allowed}");
        let Err(Verdict::Failed(why)) = judged("b1", Some(&original), Some(&speed(106.5, 1.0))) else {
            panic!("106.5 us is beyond 100 × 1.05 + 1.22");
        };
        insta::assert_snapshot!(why, @"the restored template replays in 106.5 us (median of 20 launches), slower than the original's 100.0 us (median of 20) by more than 5 % and the noise (1.2 us: 5 standard errors of the medians' difference, at least the events' resolution): at most 106.2 us");
        // A noisy restore widens the allowance by its own spread: 5 × √(0.219² + 0.547²).
        assert!(judged("b1", Some(&original), Some(&speed(107.5, 5.0))).is_ok());
    }

    /// The split-K port's `b16` on the H100 (`baselines/h100-sm90-580.159.04-verdicts/`):
    /// recorded 45.5 µs, spread 1.8 µs. Timed alike, restores gave 43.4–45.1 µs; the old
    /// restore, which put back every writable buffer, 56.2 µs; a planted 10 % slowdown
    /// is 50.05 µs, which the spread-wide allowance (50.5 µs) let pass.
    #[test]
    fn a_ten_percent_slowdown_of_a_small_template_is_caught() {
        let recorded = speed(45.5, 1.8);
        for restored in [43.4, 45.1] {
            assert!(judged("b16", Some(&recorded), Some(&speed(restored, 1.8))).is_ok(), "{restored}");
        }
        for slower in [50.05, 56.2] {
            assert!(judged("b16", Some(&recorded), Some(&speed(slower, 1.8))).is_err(), "{slower}");
        }
    }

    #[test]
    fn a_graph_of_a_few_microseconds_is_allowed_the_events_resolution_but_not_a_lost_overlap() {
        // Figures of the H200 baseline: `priorities` (5.5 us recorded, 6.1 us restored) and
        // `programmatic-launch` restored without its programmatic edge (14.9 us, 25.6 us).
        assert!(judged("steps", Some(&speed(5.5, 0.2)), Some(&speed(6.1, 0.2))).is_ok());
        assert!(judged("steps", Some(&speed(5.5, 0.2)), Some(&speed(7.0, 0.2))).is_err());
        assert!(judged("produce-consume", Some(&speed(14.9, 0.6)), Some(&speed(25.6, 0.9))).is_err());
    }

    #[test]
    fn a_core_without_a_recorded_speed_skips_the_case() {
        let skipped = judged("b1", None, None);
        assert!(matches!(skipped, Err(Verdict::Skipped(why)) if why.contains("records no speed for template `b1`")));
        let untimed = judged("b1", Some(&speed(5.0, 0.1)), None);
        assert!(matches!(untimed, Err(Verdict::Skipped(why)) if why.contains("`b1` was not timed")));
    }
}
