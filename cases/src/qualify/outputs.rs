//! What a restored core's outputs are judged by: each template's first launch against the
//! original run (`outputs`), every launch against the first (`determinism`), a launch under
//! a second poison against the first (`poison-independence`), and the checker's own
//! self-test (`checker-rejects-wrong-outputs`), each output held to [`Agreements`]' rule.
//! The orchestration (`judge.rs`) calls each once and records its verdict.

use std::collections::HashMap;

use gnomon_core::replay::OutputCheck;
use gnomon_format::spread::{FALSE_FAILURE_RATE, MISS_RATE};

use super::agreement::{checks_nothing, distances_said, Agreement, Agreements, Floor};
use crate::{measured, Metrics, Verdict};

/// What the judge knows of a template from the manifest.
pub(super) struct TemplateFacts<'a> {
    pub(super) name: &'a str,
    /// The reason the core gives for leaving it unchecked.
    pub(super) unchecked: Option<&'a str>,
    /// How many outputs the core expects of it.
    pub(super) expected: usize,
}

/// Each template's facts, as the manifest states them.
pub(super) fn template_facts<'a>(m: &'a gnomon_format::Manifest) -> Vec<TemplateFacts<'a>> {
    let unchecked: HashMap<&str, &str> = m.unchecked.iter().map(|u| (u.template.as_str(), u.reason.as_str())).collect();
    let expected = m.expectations_by_template();
    let facts = |name: &'a str| TemplateFacts {
        name,
        unchecked: unchecked.get(name).copied(),
        expected: expected.get(name).map_or(0, |e| e.outputs.len()),
    };
    m.templates.iter().map(|t| facts(&t.name)).collect()
}

/// The CPU reference a core names, as the outputs case holds a template to it: `within`
/// gives the largest scaled difference of its outputs (failing beyond the tolerance),
/// `differences` says in words where an output whose digest differs departs from it.
pub(super) struct Reference<'a> {
    pub(super) within: &'a dyn Fn(&str) -> Result<f32, Verdict>,
    pub(super) differences: &'a dyn Fn(&OutputCheck) -> Option<String>,
}

/// What a completed restore launched: every launch's outputs, and one more launch of each
/// template after the undefined buffers were poisoned with another pattern.
pub(super) struct Launched<'a> {
    pub(super) outputs: &'a [OutputCheck],
    pub(super) repoisoned: &'a [OutputCheck],
    pub(super) launches: u32,
}

/// What outputs a case compared agreed by other than equal bits, for its metrics and the
/// sentence a passed case carries.
#[derive(Default)]
pub(super) struct Agreed {
    /// The case's own metrics.
    pub(super) metrics: Metrics,
    pub(super) recorded: usize,
    pub(super) tolerated: Vec<String>,
    /// The largest share of its allowance any element of a tolerated output used.
    pub(super) worst_share: f64,
    /// The largest distance of a tolerated output, whole or in a block, in units of the
    /// mean its recorded launches lay from the first.
    pub(super) distance_in_means: f64,
    /// The detection floors of the varying outputs the case holds.
    pub(super) floors: Vec<Floor>,
}

impl Agreed {
    pub(super) fn add(&mut self, o: &OutputCheck, agreement: Agreement) {
        match agreement {
            Agreement::Bitwise => {}
            Agreement::Recorded => self.recorded += 1,
            Agreement::Tolerated { fit, allowance, bounds } => {
                self.worst_share = self.worst_share.max(fit.worst_share);
                let distances = match bounds {
                    Some(b) => {
                        let rms = b.rms.in_means(fit.distance.rms).unwrap_or(0.0);
                        let block = b.block_rms.in_means(fit.distance.block_rms).unwrap_or(0.0);
                        self.distance_in_means = self.distance_in_means.max(rms).max(block);
                        format!("; {}", distances_said(&fit, &b))
                    }
                    None => {
                        "; judged by its envelope alone: the core records no distances (written before them)".into()
                    }
                };
                self.tolerated.push(format!(
                    "`{}` `{}` launch {}: {} of {} elements differ ({:.4} of {:.4} allowed), the farthest using \
                     {:.3} of |x − first| ≤ {:e} + {:e}·|first| (largest absolute difference {:e}){distances}",
                    o.template,
                    o.buffer,
                    o.launch,
                    fit.differing,
                    fit.elements,
                    fit.differing as f64 / fit.elements.max(1) as f64,
                    allowance.fraction,
                    fit.worst_share,
                    allowance.envelope.atol,
                    allowance.envelope.rtol,
                    fit.max_abs
                ));
            }
        }
    }

    /// How the case's outputs agreed, counted.
    pub(super) fn metrics(&self) -> Metrics {
        Metrics::from([
            measured("outputs-as-a-recorded-variant", self.recorded as f64, "1"),
            measured("outputs-within-tolerance", self.tolerated.len() as f64, "1"),
            measured("tolerance-used", self.worst_share, "1"),
            measured("distance-in-recorded-means", self.distance_in_means, "1"),
        ])
    }

    /// Why a case passed that compared outputs not bit for bit, if it did.
    pub(super) fn sentence(&self) -> Option<String> {
        let recorded = match self.recorded {
            0 => None,
            n => Some(format!("{n} outputs gave a digest the original run's launches also gave")),
        };
        let tolerated = match self.tolerated.len() {
            0 => None,
            n => Some(format!(
                "{n} outputs varying in the original run were judged within the tolerance its launches \
                 recorded: {}",
                self.tolerated.join("; ")
            )),
        };
        let said: Vec<String> = recorded.into_iter().chain(tolerated).collect();
        let floors = match self.floors.len() {
            0 => String::new(),
            _ => format!("; {}", floors_said(&self.floors)),
        };
        match said.is_empty() {
            true => (!floors.is_empty()).then(|| format!("passed, every output bitwise{floors}")),
            false => Some(format!("passed, not all bitwise: {}{floors}", said.join("; "))),
        }
    }
}

/// Varying outputs' detection floors, in the order given, as a clause.
pub(super) fn floors_said(floors: &[Floor]) -> String {
    let each: Vec<String> = floors.iter().map(Floor::said).collect();
    format!(
        "the detection floor of each varying output, the smallest effect caught with a miss rate of {MISS_RATE} \
         (a false-failure rate of {FALSE_FAILURE_RATE:.1e} each): {}",
        each.join("; ")
    )
}

/// A template's first-launch outputs: every expected one present, agreeing with the
/// original run, then against the CPU reference the core names. An unchecked template is
/// skipped with the core's reason.
pub(super) fn outputs_of(
    t: &TemplateFacts,
    outputs: &[OutputCheck],
    agreements: &Agreements,
    reference: &Reference,
) -> Result<Agreed, Verdict> {
    if let Some(reason) = t.unchecked {
        return Err(Verdict::Skipped(format!("the core declares it unchecked: {reason}")));
    }
    // Validation refuses such a core too; the judge does not rely on it, since a pass
    // here with nothing compared would be a pass of nothing.
    if t.expected == 0 {
        return Err(Verdict::Failed(format!(
            "template `{}` is checked but the core expects no output of it: nothing would be compared",
            t.name
        )));
    }
    let given = outputs.iter().filter(|o| o.template == t.name && o.launch == 0).count();
    if given != t.expected {
        return Err(Verdict::Failed(format!(
            "template `{}` gave {given} of its {} expected outputs",
            t.name, t.expected
        )));
    }
    // Every output that differs is named, not only the first: which of them differ
    // together says where to look.
    let mut agreed = Agreed::default();
    let mut differing = Vec::new();
    for o in outputs.iter().filter(|o| o.template == t.name && o.launch == 0) {
        match agreements.agrees(o, &o.expected_sha256).map(|a| (a, checks_nothing(o))) {
            Ok((_, Some(nothing))) => differing.push(nothing),
            Ok((agreement, None)) => agreed.add(o, agreement),
            Err(why) => differing.push(match (reference.differences)(o) {
                Some(differences) => format!("{why} ({differences})"),
                None => why,
            }),
        }
    }
    if !differing.is_empty() {
        return Err(Verdict::Failed(differing.join("; ")));
    }
    let worst = (reference.within)(t.name)?;
    agreed.floors = agreements.floors().into_iter().filter(|f| f.template == t.name).collect();
    agreed.metrics = Metrics::from([
        measured("outputs-compared", t.expected as f64, "1"),
        measured("reference-max-scaled-diff", worst as f64, "1"),
    ]);
    Ok(agreed)
}

/// Every launch of every checked template gave the outputs its first launch gave, and
/// every launch is there: launches 0..N of each expected output, once each.
pub(super) fn deterministic(
    templates: &[&TemplateFacts],
    launched: &Launched,
    agreements: &Agreements,
) -> Result<Agreed, Verdict> {
    let mut agreed = Agreed::default();
    for t in templates {
        let mine: Vec<&OutputCheck> = launched.outputs.iter().filter(|o| o.template == t.name).collect();
        for first in mine.iter().filter(|o| o.launch == 0) {
            let mut seen: Vec<u32> = Vec::new();
            for o in mine.iter().filter(|o| o.buffer == first.buffer) {
                seen.push(o.launch);
                let agreement = agreements
                    .agrees_with_launch(o, first)
                    .map_err(|why| Verdict::Failed(format!("launch {} against launch 0: {why}", o.launch)))?;
                agreed.add(o, agreement);
            }
            seen.sort_unstable();
            if !seen.iter().copied().eq(0..launched.launches) {
                return Err(Verdict::Failed(format!(
                    "template `{}` output `{}`: launches {seen:?} were compared, not 0..{}",
                    t.name, first.buffer, launched.launches
                )));
            }
        }
    }
    agreed.metrics = Metrics::from([measured("launches-per-template", launched.launches as f64, "1")]);
    Ok(agreed)
}

/// A template that reads memory it never wrote gives other outputs when that memory
/// holds another pattern: after the undefined buffers were poisoned anew, each checked
/// template's outputs must equal its first launch's.
pub(super) fn poison_independent(
    templates: &[&TemplateFacts],
    launched: &Launched,
    agreements: &Agreements,
) -> Result<Agreed, Verdict> {
    let mut agreed = Agreed::default();
    let mut compared = 0;
    let checked = |o: &&OutputCheck| o.launch == 0 && templates.iter().any(|t| t.name == o.template);
    for first in launched.outputs.iter().filter(checked) {
        let again = launched.repoisoned.iter().find(|o| o.template == first.template && o.buffer == first.buffer);
        match again.map(|o| (o, agreements.agrees_with_launch(o, first))) {
            Some((o, Ok(agreement))) => {
                agreed.add(o, agreement);
                compared += 1;
            }
            Some((_, Err(why))) => {
                return Err(Verdict::Failed(format!(
                    "template `{}` output `{}` depends on memory it never wrote: under another poison pattern, \
                     {why}",
                    first.template, first.buffer
                )))
            }
            None => {
                return Err(Verdict::Failed(format!(
                    "template `{}` output `{}` was not launched again under the second poison pattern",
                    first.template, first.buffer
                )))
            }
        }
    }
    agreed.metrics = Metrics::from([measured("outputs-compared", compared as f64, "1")]);
    Ok(agreed)
}

/// The checker of this gnomon must refuse a wrong output of every output of every
/// template: each first-launch output is altered in turn (its digest; a varying output's
/// bytes inverted, and moved just past each limit its recorded distances give) and the
/// rule the outputs cases use must refuse it. Its reason lists the varying outputs'
/// detection floors, least sensitive first.
pub(super) fn checker_rejects_wrong_outputs(
    templates: &[&str],
    outputs: &[OutputCheck],
    agreements: &Agreements,
) -> Result<Metrics, Verdict> {
    let (mut altered, mut defects) = (0, 0);
    for o in outputs.iter().filter(|o| o.launch == 0) {
        for (what, wrong) in agreements.wrongs(o) {
            if agreements.agrees(&wrong, &o.expected_sha256).is_ok() {
                return Err(Verdict::Failed(format!(
                    "the checker accepted a wrong output for template `{}` output `{}`: {what}",
                    o.template, o.buffer
                )));
            }
            defects += 1;
        }
        altered += 1;
    }
    if let Some(t) = templates.iter().find(|t| !outputs.iter().any(|o| o.template == **t)) {
        return Err(Verdict::Failed(format!("template `{t}` produced no output to check")));
    }
    Ok(Metrics::from([
        measured("wrong-digests-refused", altered as f64, "1"),
        measured("wrong-outputs-refused", defects as f64, "1"),
    ]))
}

#[cfg(test)]
mod tests {
    use gnomon_format::spread::{Allowance, Bounds, Distance, Envelope, Fit};

    use super::*;

    fn output(template: &str) -> OutputCheck {
        OutputCheck {
            template: template.into(),
            buffer: "y".into(),
            launch: 0,
            expected_sha256: String::new(),
            actual_sha256: String::new(),
            bytes: Default::default(),
            blank: None,
        }
    }

    /// What a case that passed not all bitwise counts and says: outputs of a recorded digest,
    /// outputs within the tolerance with their distances beside the limits, the largest
    /// share and distance used, and the floors of the template's varying outputs.
    #[test]
    fn a_case_passed_not_all_bitwise_counts_and_says_how() {
        let mut agreed = Agreed::default();
        assert_eq!(agreed.sentence(), None, "every output bitwise, no floor: nothing to say");
        agreed.add(&output("a"), Agreement::Bitwise);
        agreed.add(&output("a"), Agreement::Recorded);
        agreed.add(&output("a"), Agreement::Recorded);
        let distance = Distance { rms: 0.02, block_rms: 0.03 };
        let fit = Fit { elements: 8, differing: 2, outside: 0, worst_share: 0.25, max_abs: 0.01, distance };
        let allowance = Allowance { envelope: Envelope { atol: 0.04, rtol: 0.0 }, fraction: 0.5 };
        let bounds = Bounds::of(&[Distance { rms: 0.01, block_rms: 0.02 }; 30]);
        agreed.add(&output("b"), Agreement::Tolerated { fit, allowance, bounds });
        let metrics = agreed.metrics();
        let value = |name: &str| metrics[name].value;
        assert_eq!(value("outputs-as-a-recorded-variant"), 2.0);
        assert_eq!(value("outputs-within-tolerance"), 1.0);
        assert_eq!(value("tolerance-used"), 0.25);
        let distance = value("distance-in-recorded-means");
        assert!((distance - 2.0).abs() < 1e-9, "the whole output's 0.02 against its mean 0.01: {distance}");
        let said = agreed.sentence().unwrap();
        assert!(
            said.starts_with("passed, not all bitwise: 2 outputs gave a digest the original run's launches"),
            "{said}"
        );
        assert!(said.contains("`b` `y` launch 0: 2 of 8 elements differ (0.2500 of 0.5000 allowed)"), "{said}");
        assert!(said.contains("its RMS distance 2.00 (limit 1.50), in its noisiest 4 KiB block 1.50"), "{said}");
        let floor = Floor { template: "b".into(), buffer: "y".into(), rms: Some(1.6), block_rms: None, launches: 30 };
        let floors_only = Agreed { floors: vec![floor], ..Agreed::default() };
        let said = floors_only.sentence().unwrap();
        assert!(said.starts_with("passed, every output bitwise; the detection floor of each varying output"), "{said}");
        assert!(said.contains("`b` `y`: 1.60 × its recorded spread over the output, any change in one 4 KiB block"));
    }

    fn launch(template: &str, launch: u32, digest: &str) -> OutputCheck {
        OutputCheck { launch, expected_sha256: "aa".repeat(32), actual_sha256: digest.repeat(32), ..output(template) }
    }

    const NO_REFERENCE: Reference<'static> = Reference { within: &|_| Ok(0.0), differences: &|_| None };

    /// The outputs case holds the first launch to the original run, and only it: later
    /// launches that differ are determinism's to judge.
    #[test]
    fn only_the_first_launch_is_held_to_the_original() {
        let facts = TemplateFacts { name: "a", unchecked: None, expected: 1 };
        let agreements = Agreements::default();
        let later_differ = [launch("a", 0, "aa"), launch("a", 1, "bb"), launch("a", 2, "bb")];
        assert!(outputs_of(&facts, &later_differ, &agreements, &NO_REFERENCE).is_ok());
        let first_differs = [launch("a", 0, "bb"), launch("a", 1, "aa"), launch("a", 2, "aa")];
        let Err(Verdict::Failed(why)) = outputs_of(&facts, &first_differs, &agreements, &NO_REFERENCE) else {
            panic!("a first launch unlike the original passed")
        };
        assert!(why.starts_with("template `a` output `y` has SHA-256 bbbb"), "{why}");
    }

    /// A first launch the reader found blank fails the outputs case though its digest is
    /// the original's, and though its bytes were not kept (it is judged by digest).
    #[test]
    fn a_first_launch_found_blank_checks_nothing() {
        use gnomon_core::replay::BlankOutput;
        use gnomon_format::spread::{Blank, Element};

        let facts = TemplateFacts { name: "a", unchecked: None, expected: 1 };
        let all = Blank::Alike(0.0);
        let blank = Some(BlankOutput { element: Element::Bfloat16, elements: 4096, all });
        let zeros = [OutputCheck { blank, ..launch("a", 0, "aa") }];
        assert!(zeros[0].bytes.is_empty());
        let Err(Verdict::Failed(why)) = outputs_of(&facts, &zeros, &Agreements::default(), &NO_REFERENCE) else {
            panic!("an output of zeros passed")
        };
        assert!(why.contains("checks nothing: all 4096 of its Bfloat16 elements are 0e0"), "{why}");
    }

    /// Poison-independence compares the launch under the second poison with the first
    /// launch, not with later ones.
    #[test]
    fn the_second_poison_is_held_to_the_first_launch() {
        let outputs = [launch("a", 0, "aa"), launch("a", 1, "bb")];
        let repoisoned = [launch("a", 0, "aa")];
        let facts = TemplateFacts { name: "a", unchecked: None, expected: 1 };
        let launched = Launched { outputs: &outputs, repoisoned: &repoisoned, launches: 2 };
        let agreed = poison_independent(&[&facts], &launched, &Agreements::default()).map_err(|_| "failed").unwrap();
        assert_eq!(agreed.metrics["outputs-compared"].value, 1.0);
    }

    /// A core whose float output `b` varied with one recorded distance, and its first
    /// launch's bytes.
    fn varying_with_distances() -> (gnomon_format::Manifest, Vec<u8>) {
        let distances =
            |v: &mut gnomon_format::Variation| v.distances = vec![Distance { rms: 0.004, block_rms: 0.005 }];
        crate::qualify::agreement::tests::manifest(gnomon_format::spread::Element::Float32, distances)
    }

    /// The self-test counts every wrong output it fed: a varying output's inverted bytes and
    /// each calibrated defect, beside the wrong digest of each output.
    #[test]
    fn the_self_test_counts_the_wrong_outputs_it_fed() {
        use crate::qualify::agreement::tests as core;

        let (m, first) = varying_with_distances();
        let agreements = core::agreements(&m, first.clone());
        let varying = core::output("b", first);
        let fed = agreements.wrongs(&varying).len();
        assert!(fed >= 2, "inverted bytes and at least one defect: {fed}");
        let metrics = checker_rejects_wrong_outputs(&["b"], &[varying], &agreements).map_err(|_| "failed").unwrap();
        assert_eq!(metrics["wrong-digests-refused"].value, 1.0);
        assert_eq!(metrics["wrong-outputs-refused"].value, fed as f64);
    }

    /// A template's outputs case states the floors of its own varying outputs, not of
    /// another template's.
    #[test]
    fn a_template_states_only_its_own_floors() {
        use crate::qualify::agreement::tests as core;

        let (m, first) = varying_with_distances();
        let agreements = core::agreements(&m, first.clone());
        let b = core::output("b", first);
        let b = OutputCheck { expected_sha256: b.actual_sha256.clone(), ..b };
        let a = OutputCheck { template: "a".into(), ..b.clone() };
        let floors_of = |t: &str, o: &OutputCheck| {
            let facts = TemplateFacts { name: t, unchecked: None, expected: 1 };
            let agreed = outputs_of(&facts, std::slice::from_ref(o), &agreements, &NO_REFERENCE);
            agreed.map_err(|_| "failed").unwrap().floors.len()
        };
        assert_eq!((floors_of("b", &b), floors_of("a", &a)), (1, 0));
    }

    /// A port that computes something else, alike at every launch, fails the outputs case
    /// and passes determinism: each later launch is measured from this replay's first,
    /// not from the original's.
    #[test]
    fn determinism_measures_launches_from_this_replays_first() {
        use gnomon_format::spread::Element;

        use crate::qualify::agreement::tests as core;

        let (m, first) = core::manifest(Element::Float32, |_| {});
        let agreements = core::agreements(&m, first.clone());
        let elsewhere = core::FIRST.map(|x| x + 1.0);
        let mut nearby = elsewhere;
        nearby[7] += 0.005;
        let launch = |n: u32, v: &[f32]| OutputCheck { launch: n, ..core::output("b", core::floats(v)) };
        let outputs = [launch(0, &elsewhere), launch(1, &nearby)];
        let facts = TemplateFacts { name: "b", unchecked: None, expected: 1 };
        let launched = Launched { outputs: &outputs, repoisoned: &outputs[1..], launches: 2 };
        assert!(deterministic(&[&facts], &launched, &agreements).is_ok());
        assert!(poison_independent(&[&facts], &launched, &agreements).is_ok());
        let original = OutputCheck { expected_sha256: "0".into(), ..outputs[0].clone() };
        let Err(Verdict::Failed(why)) = outputs_of(&facts, &[original], &agreements, &NO_REFERENCE) else {
            panic!("a port that computes something else passed its outputs")
        };
        assert!(why.contains("lie outside"), "{why}");
    }
}
