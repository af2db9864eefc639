//! What `docs/format-v3.md` states of a recorded spread, held over random launches: the
//! envelope fitted to launches holds every element of each; the distance recorded for a
//! launch is the one a judge measures of the same bytes; a bound admits every value it was
//! derived from; a calibrated defect passes the limit it was made for.

use gnomon_format::spread::{past_limit, Bound, Element, Envelope, Spread};
use proptest::prelude::*;

/// An output's first launch and a few launches that differ from it in some elements, by
/// amounts from rounding flips to whole units, with an occasional NaN.
fn launches(element: Element) -> impl Strategy<Value = (Vec<u8>, Vec<Vec<u8>>)> {
    let first = prop::collection::vec(-100.0f64..100.0, 1..3000);
    first.prop_flat_map(move |first| {
        let n = first.len();
        let change = (0..n, prop_oneof![4 => -1.0f64..1.0, 1 => -1e-3f64..1e-3, 1 => Just(f64::NAN)]);
        let launch = prop::collection::vec(change, 1..64);
        (Just(first), prop::collection::vec(launch, 1..6)).prop_map(move |(first, launches)| {
            let others = launches
                .into_iter()
                .map(|changes| {
                    let mut x = first.clone();
                    changes.into_iter().for_each(|(at, by)| x[at] += by);
                    encode(element, &x)
                })
                .collect();
            (encode(element, &first), others)
        })
    })
}

fn encode(element: Element, values: &[f64]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| match element {
            Element::Float32 => (v as f32).to_le_bytes().to_vec(),
            Element::Bfloat16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
            Element::Float16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
            _ => v.to_le_bytes().to_vec(),
        })
        .collect()
}

fn element() -> impl Strategy<Value = Element> {
    prop_oneof![Just(Element::Float32), Just(Element::Bfloat16), Just(Element::Float16), Just(Element::Float64)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every element of every launch lies within the envelope fitted to them (NaN against
    /// a number is no element an envelope holds: it is counted apart, as incomparable).
    #[test]
    fn the_fitted_envelope_holds_every_launch_it_was_fitted_to((element, (first, others)) in element().prop_flat_map(|e| (Just(e), launches(e)))) {
        let mut spread = Spread::of_first(element, &first);
        others.iter().for_each(|o| spread.add(&first, o));
        let envelope = spread.envelope();
        for other in &others {
            let fit = envelope.holds(element, &first, other);
            let incomparable = fit.worst_share.is_infinite() as u64;
            prop_assert!(fit.outside <= spread.incomparable.max(incomparable) * fit.elements, "{fit:?} {envelope:?}");
            if spread.incomparable == 0 {
                prop_assert_eq!(fit.outside, 0, "{:?} {:?}", fit, envelope);
            }
        }
    }

    /// The exporter's recorded distance of a launch is the judge's distance of the same
    /// bytes: one implementation, whatever the parts.
    #[test]
    fn a_recorded_distance_is_the_one_the_judge_measures((element, (first, others)) in element().prop_flat_map(|e| (Just(e), launches(e)))) {
        let mut spread = Spread::of_first(element, &first);
        others.iter().for_each(|o| spread.add(&first, o));
        prop_assert_eq!(spread.distances.len(), others.len());
        for (d, other) in spread.distances.iter().zip(&others) {
            prop_assert_eq!(*d, Envelope::default().holds(element, &first, other).distance);
            prop_assert!(d.rms.is_finite() && d.block_rms >= d.rms * (1.0 - 1e-9), "{d:?}");
        }
    }

    /// A bound admits every value it was derived from, and its floor is past its limit.
    #[test]
    fn a_bound_admits_what_it_was_derived_from(values in prop::collection::vec(0.0f64..1e3, 1..70)) {
        let b = Bound::of(&values).unwrap();
        prop_assert!(values.iter().all(|&v| b.holds(v)), "{b:?}");
        if let Some(floor) = b.floor() {
            prop_assert!(floor * b.mean > b.limit, "{b:?}");
        }
    }

    /// A defect made for a limit passes it, over the whole output and in one block.
    #[test]
    fn a_calibrated_defect_passes_its_limit((element, (first, _)) in element().prop_flat_map(|e| (Just(e), launches(e))), limit in 0.0f64..10.0) {
        let n = first.len() / element.size();
        if let Some((_, d)) = past_limit(element, &first, 0..n, limit, |d| d.rms) {
            prop_assert!(d.rms > limit);
        }
        if let Some((_, d)) = past_limit(element, &first, 0..n.min(4096 / element.size()), limit, |d| d.block_rms) {
            prop_assert!(d.block_rms > limit);
        }
    }
}
