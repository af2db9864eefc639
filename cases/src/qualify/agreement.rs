//! When a replayed output agrees with the original run. A bitwise output agrees when its
//! digest is the one it is compared with. An output the core records as varying (its
//! launches in the capturing process did not give alike) also agrees when its digest is
//! one those launches gave, or, for floating-point elements, when it passes three tests
//! against the original's first launch:
//!
//! - every element within the recorded envelope widened by `margin`, `margin × (atol +
//!   rtol × |first|)` (NaN where the first launch has NaN), and no more than `margin ×`
//!   the recorded fraction of elements differing: a guard against wild elements;
//! - its RMS distance over the whole output, and over its noisiest 4 KiB block, within
//!   the [`Bound`] the recorded launches' own distances give: what measures a defect that
//!   moves every element a little, or one block by a lot, against what nondeterminism did
//!   there (`gnomon_format::spread` derives the limit and states its false-failure rate
//!   and detection floor). A core written before distances is judged by the first test
//!   alone, and its reasons say so.
//!
//! The `outputs`, `determinism` and `poison-independence` cases use this one rule; the
//! checker's self-test feeds it defects at each output's stated floor.

use std::{collections::HashMap, ops::Range, sync::Arc};

use gnomon_format::{
    hash_hex,
    spread::{near_tie, past_limit, Allowance, Blank, Bound, Bounds, Distance, Fit, BLOCK_BYTES, DEFAULT_MARGIN},
    Core, Manifest, Variation,
};

use gnomon_core::replay::{BlankOutput, OutputCheck};

/// How a profile lets varying outputs pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// Times the recorded envelope and differing fraction an output may be from the first
    /// launch; 0 allows only the digests the original run gave.
    pub margin: f64,
    /// Every output bitwise, whatever the core records.
    pub bitwise_only: bool,
}

impl Default for Rule {
    fn default() -> Self {
        Self { margin: DEFAULT_MARGIN, bitwise_only: false }
    }
}

/// How an output agreed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Agreement {
    Bitwise,
    /// A digest the original run's launches gave too.
    Recorded,
    /// Within the widened envelope and the distances' bounds: how it held against each.
    Tolerated {
        fit: Fit,
        allowance: Allowance,
        bounds: Option<Bounds>,
    },
}

/// A varying output as the judge holds it: what the core records, its first launch, and
/// the bounds of its own recorded distances or of the output whose spread it takes.
struct Varying<'m> {
    expected: &'m str,
    variation: &'m Variation,
    first_launch: Vec<u8>,
    bounds: Option<Bounds>,
}

/// How sensitive the judge is to one varying output: the smallest effect caught, in
/// units of the mean distance its recorded launches lay from the first.
#[derive(Clone, Debug, PartialEq)]
pub struct Floor {
    pub template: String,
    pub buffer: String,
    /// Over the whole output and in one 4 KiB block; `None` where any change of value is
    /// caught (the launches differed in bits alone).
    pub rms: Option<f64>,
    pub block_rms: Option<f64>,
    pub launches: usize,
}

impl Floor {
    /// The larger of the two floors (any change caught counts as 0): what orders outputs
    /// from least sensitive.
    pub fn widest(&self) -> f64 {
        self.rms.unwrap_or(0.0).max(self.block_rms.unwrap_or(0.0))
    }

    /// `template` `buffer`: its floors, said in words.
    pub fn said(&self) -> String {
        let said = |f: Option<f64>| f.map_or("any change".to_owned(), |f| format!("{f:.2} ×"));
        format!(
            "`{}` `{}`: {} its recorded spread over the output, {} in one 4 KiB block ({} launches)",
            self.template,
            self.buffer,
            said(self.rms),
            said(self.block_rms),
            self.launches
        )
    }
}

/// The varying outputs of a core, by template and buffer.
#[derive(Default)]
pub struct Agreements<'m> {
    rule: Rule,
    varying: HashMap<(&'m str, &'m str), Varying<'m>>,
}

impl<'m> Agreements<'m> {
    /// Reads each varying output's first launch from the core, checked against its digest
    /// again (the file may have changed since validation).
    pub fn of(core: &'m Core, rule: Rule) -> Result<Self, String> {
        let read = |file: &str, sha256: &str| -> Result<Vec<u8>, String> {
            let mut bytes = Vec::new();
            let opened = core.open_file(file, "a varying output's first launch").map_err(|e| e.to_string())?;
            std::io::Read::read_to_end(&mut { opened }, &mut bytes).map_err(|e| format!("read {file}: {e}"))?;
            match hash_hex(&bytes[..]).expect("hashing memory cannot fail") == sha256 {
                true => Ok(bytes),
                false => Err(format!("{file} changed since the core was validated")),
            }
        };
        Self::from_manifest(core.manifest(), rule, read)
    }

    fn from_manifest(
        m: &'m Manifest,
        rule: Rule,
        read: impl Fn(&str, &str) -> Result<Vec<u8>, String>,
    ) -> Result<Self, String> {
        let variations: HashMap<(&str, &str), &Variation> = m
            .expectations
            .iter()
            .flat_map(|e| e.outputs.iter().map(move |o| ((e.template.as_str(), o.buffer.as_str()), o)))
            .filter_map(|(at, o)| Some((at, o.variation.as_ref()?)))
            .collect();
        let mut varying = HashMap::new();
        for e in &m.expectations {
            for o in &e.outputs {
                let Some(variation) = &o.variation else { continue };
                let first_launch = read(&variation.file, &o.sha256)?;
                let source = variation.spread_of.as_ref().and_then(|s| variations.get(&(&*s.template, &*s.buffer)));
                let bounds = source.copied().unwrap_or(variation).bounds();
                varying.insert(
                    (e.template.as_str(), o.buffer.as_str()),
                    Varying { expected: &o.sha256, variation, first_launch, bounds },
                );
            }
        }
        Ok(Self { rule, varying })
    }

    /// The detection floor of every varying output whose distances are recorded, least
    /// sensitive first.
    pub fn floors(&self) -> Vec<Floor> {
        let mut floors: Vec<Floor> = self
            .varying
            .iter()
            .filter_map(|(&(template, buffer), v)| {
                let b = v.bounds?;
                let (rms, block_rms) = (b.rms.floor(), b.block_rms.floor());
                let (template, buffer) = (template.to_owned(), buffer.to_owned());
                Some(Floor { template, buffer, rms, block_rms, launches: b.rms.launches })
            })
            .collect();
        floors.sort_by(|a, b| {
            b.widest().total_cmp(&a.widest()).then_with(|| (&a.template, &a.buffer).cmp(&(&b.template, &b.buffer)))
        });
        floors
    }

    /// Whether `o` agrees with the output whose digest is `with`, a varying one measured
    /// from the original's first launch (the outputs case).
    pub fn agrees(&self, o: &OutputCheck, with: &str) -> Result<Agreement, String> {
        self.agrees_from(o, with, None)
    }

    /// Whether `o` agrees with a launch of this replay, `first` (determinism, poison): a
    /// varying output measured from `first`'s bytes, as the recorded launches were from
    /// their own first, so a port that computes something else everywhere fails only the
    /// outputs case.
    pub fn agrees_with_launch(&self, o: &OutputCheck, first: &OutputCheck) -> Result<Agreement, String> {
        self.agrees_from(o, &first.actual_sha256, Some(&first.bytes))
    }

    fn agrees_from(&self, o: &OutputCheck, with: &str, from: Option<&[u8]>) -> Result<Agreement, String> {
        if o.actual_sha256 == with {
            return Ok(Agreement::Bitwise);
        }
        let differs =
            || format!("template `{}` output `{}` has SHA-256 {}, not {with}", o.template, o.buffer, o.actual_sha256);
        let v = match self.varying.get(&(o.template.as_str(), o.buffer.as_str())) {
            Some(v) if !self.rule.bitwise_only => v,
            _ => return Err(differs()),
        };
        if o.actual_sha256 == v.expected || v.variation.sha256s.contains(&o.actual_sha256) {
            return Ok(Agreement::Recorded);
        }
        let unrecorded = |why: &str| Err(format!("{}, which no launch of the original gave, and {why}", differs()));
        match (v.variation.element.is_float(), self.rule.margin) {
            (false, _) => {
                return unrecorded("its elements are not floating-point, so only the digests its launches gave pass")
            }
            (true, m) if m <= 0.0 => return unrecorded("the profile allows only the digests its launches gave"),
            _ => {}
        }
        let allowance = v.variation.allowance(self.rule.margin);
        let (fit, admitted) = allowance.judge(v.variation.element, from.unwrap_or(&v.first_launch), &o.bytes);
        let first = if from.is_some() { "this replay's first launch" } else { "the original's first launch" };
        let recorded = format!(
            "recorded over {} launches{}",
            v.variation.launches,
            v.variation.spread_of.as_ref().map_or(String::new(), |s| format!(" of template `{}`", s.template)),
        );
        if !admitted {
            let margin = self.rule.margin;
            let distances = v.bounds.map_or(String::new(), |b| format!("; {}", distances_said(&fit, &b)));
            let past = match fit.outside {
                0 => format!(
                    "{} of its {} elements differ from {first}, more than the {:.4} allowed \
                     ({:.4} {recorded} × margin {margin})",
                    fit.differing, fit.elements, allowance.fraction, v.variation.differing_fraction
                ),
                n => format!(
                    "{n} of its {} elements lie outside |x − first| ≤ {:e} + {:e}·|first| (atol and rtol \
                     {recorded} × margin {margin}), the farthest at {:.3e} of its allowance; largest absolute \
                     difference {:e}",
                    fit.elements, allowance.envelope.atol, allowance.envelope.rtol, fit.worst_share, fit.max_abs
                ),
            };
            return unrecorded(&(past + &distances));
        }
        if let Some((bounds, (what, _, bound))) = v.bounds.and_then(|b| Some((b, b.exceeded(fit.distance)?))) {
            return unrecorded(&format!(
                "its {what} from {first} is past its limit: {} (the distances {recorded}; {})",
                distances_said(&fit, &bounds),
                bound.derivation()
            ));
        }
        // Tokens are judged where the launches' distances say how near a tie is.
        let tokens = v.variation.tokens.as_ref().zip(v.bounds);
        if let Some(why) = tokens.and_then(|(t, b)| t.unchosen(v.variation.element, near_tie(&b), &o.bytes)) {
            return unrecorded(&format!("its logits choose a token no launch chose: {why}"));
        }
        Ok(Agreement::Tolerated { fit, allowance, bounds: v.bounds })
    }

    /// Outputs that must not agree, each with what was done to it: `o` with its digest
    /// changed and, for a varying output, every byte of its first launch inverted; and
    /// where its distances are recorded, its first launch moved just past each limit,
    /// over every element and in its first 4 KiB block alone: a defect at the floor the
    /// case states, which the rule must refuse.
    pub fn wrongs(&self, o: &OutputCheck) -> Vec<(String, OutputCheck)> {
        let with =
            |bytes: Arc<Vec<u8>>| OutputCheck { actual_sha256: flip_first_digit(&o.actual_sha256), bytes, ..o.clone() };
        let Some(v) = self.varying.get(&(o.template.as_str(), o.buffer.as_str())) else {
            return vec![("its digest changed".into(), with(Arc::clone(&o.bytes)))];
        };
        let mut wrongs =
            vec![("every byte inverted".into(), with(Arc::new(v.first_launch.iter().map(|b| !b).collect())))];
        let (Some(bounds), element) = (v.bounds, v.variation.element) else { return wrongs };
        let elements = v.first_launch.len() / element.size();
        let block = BLOCK_BYTES / element.size();
        let moves: [(&str, Range<usize>, Bound, fn(&Distance) -> f64); 2] = [
            ("moved over every element", 0..elements, bounds.rms, |d| d.rms),
            ("moved in its first 4 KiB block", 0..block.min(elements), bounds.block_rms, |d| d.block_rms),
        ];
        for (what, range, bound, statistic) in moves {
            if let Some((bytes, distance)) = past_limit(element, &v.first_launch, range, bound.limit, statistic) {
                let by = in_means(&bound, statistic(&distance));
                wrongs.push((format!("{what} ({by} recorded means)"), with(Arc::new(bytes))));
            }
        }
        wrongs
    }
}

/// How far an output lay from the first launch, whole and in its noisiest block, beside
/// each limit, in units of the mean distance its recorded launches lay (a plant's
/// *effect*); absolute where those launches moved no value.
pub fn distances_said(fit: &Fit, bounds: &Bounds) -> String {
    format!(
        "its RMS distance {} (limit {}), in its noisiest 4 KiB block {} (limit {}), in means of its {} recorded \
         launches' distances",
        in_means(&bounds.rms, fit.distance.rms),
        in_means(&bounds.rms, bounds.rms.limit),
        in_means(&bounds.block_rms, fit.distance.block_rms),
        in_means(&bounds.block_rms, bounds.block_rms.limit),
        bounds.rms.launches,
    )
}

/// `value` in units of the bound's recorded mean, or absolute where that mean is 0.
fn in_means(bound: &Bound, value: f64) -> String {
    bound.in_means(value).map_or(format!("{value:.3e} absolute"), |m| format!("{m:.2}"))
}

/// Why agreeing with `o` would check nothing, if it would: its elements, as the reader
/// found them (of the element type the core declares, or its variation's), are all NaN or
/// infinite, or all one value.
pub fn checks_nothing(o: &OutputCheck) -> Option<String> {
    let BlankOutput { element, elements: n, all } = o.blank?;
    let what = match all {
        Blank::NonFinite => format!("every one of its {n} {element:?} elements is NaN or infinite"),
        Blank::Alike(value) => format!("all {n} of its {element:?} elements are {value:e}"),
    };
    Some(format!(
        "template `{}` output `{}` checks nothing: {what} in the original's first launch, so agreeing with it \
         says nothing of the port (a port that reads memory it never writes can give this: see \
         poison-independence)",
        o.template, o.buffer
    ))
}

pub(crate) fn flip_first_digit(hex: &str) -> String {
    let mut chars: Vec<char> = hex.chars().collect();
    if let Some(c) = chars.first_mut() {
        *c = if *c == '0' { '1' } else { '0' };
    }
    chars.into_iter().collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use gnomon_format::spread::Element;

    pub(in crate::qualify) fn floats(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn digest(bytes: &[u8]) -> String {
        hash_hex(bytes).unwrap()
    }

    pub(in crate::qualify) const FIRST: [f32; 8] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 0.0];

    fn variation(element: Element, first: &[u8], other: &[u8]) -> Variation {
        Variation {
            element,
            launches: 8,
            sha256s: vec![digest(other)],
            max_abs: 0.01,
            max_ulp: 1_000_000_000,
            differing_fraction: 0.125,
            atol: Some(0.01),
            rtol: Some(0.0),
            spread_of: None,
            file: format!("outputs/first-{}.bin", first.len()),
            nodes: vec![],
            distances: vec![],
            tokens: None,
        }
    }

    /// A core with one bitwise output (`a`/`y`) and one varying (`b`/`y`): its launches
    /// gave two digests, one element 0.01 apart across zero (a billion ULP), one element
    /// of eight at most.
    pub(in crate::qualify) fn manifest(element: Element, change: impl FnOnce(&mut Variation)) -> (Manifest, Vec<u8>) {
        let mut m = gnomon_fixtures::sample::v2_features().manifest;
        let first = floats(&FIRST);
        let other = floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, -0.01]);
        let template = m.templates[0].name.clone();
        let mut e = m.expectations[0].clone();
        e.template = "b".into();
        e.outputs[0].sha256 = digest(&first);
        let mut v = variation(element, &first, &other);
        change(&mut v);
        e.outputs[0].variation = Some(v);
        m.expectations[0].template = template;
        m.expectations.push(e);
        (m, first)
    }

    /// A first launch of `bytes` as the reader gives it: blank where they check nothing.
    pub(in crate::qualify) fn read_as(template: &str, element: Element, bytes: Vec<u8>) -> OutputCheck {
        OutputCheck { blank: BlankOutput::of_elements(element, &bytes), ..output(template, bytes) }
    }

    /// The agreements of a core from [`manifest`], its varying output's first launch `first`.
    pub(in crate::qualify) fn agreements(m: &Manifest, first: Vec<u8>) -> Agreements<'_> {
        Agreements::from_manifest(m, Rule::default(), move |_, _| Ok(first.clone())).unwrap()
    }

    pub(in crate::qualify) fn output(template: &str, bytes: Vec<u8>) -> OutputCheck {
        OutputCheck {
            template: template.into(),
            buffer: "y".into(),
            launch: 0,
            expected_sha256: String::new(),
            actual_sha256: digest(&bytes),
            bytes: bytes.into(),
            blank: None,
        }
    }

    fn judged_as(
        rule: Rule,
        got: &[f32],
        template: &str,
        change: impl FnOnce(&mut Variation),
    ) -> Result<Agreement, String> {
        let (m, first) = manifest(Element::Float32, change);
        let agreements = Agreements::from_manifest(&m, rule, |_, _| Ok(first.clone())).unwrap();
        agreements.agrees(&output(template, floats(got)), &digest(&first))
    }

    fn judged(rule: Rule, got: &[f32], template: &str) -> Result<Agreement, String> {
        judged_as(rule, got, template, |_| {})
    }

    fn with_last(last: f32) -> [f32; 8] {
        let mut v = FIRST;
        v[7] = last;
        v
    }

    #[test]
    fn a_varying_output_passes_as_recorded_or_within_margin_times_its_envelope() {
        let rule = Rule::default();
        assert_eq!(judged(rule, &FIRST, "b"), Ok(Agreement::Bitwise));
        assert_eq!(judged(rule, &with_last(-0.01), "b"), Ok(Agreement::Recorded));
        let within = judged(rule, &with_last(0.03), "b").unwrap();
        let Agreement::Tolerated { fit, allowance, bounds: None } = within else { panic!("{within:?}") };
        assert_eq!((fit.differing, fit.elements, allowance.fraction), (1, 8, 0.5));
        assert!((fit.worst_share - 0.75).abs() < 1e-6, "{}", fit.worst_share);
        let beyond = judged(rule, &with_last(0.05), "b").unwrap_err();
        assert!(beyond.contains("1 of its 8 elements lie outside |x − first| ≤ 4e-2 + 0e0·|first|"), "{beyond}");
        assert!(beyond.contains("recorded over 8 launches × margin 4"), "{beyond}");
        let nan = judged(rule, &with_last(f32::NAN), "b").unwrap_err();
        assert!(nan.contains("1 of its 8 elements lie outside"), "{nan}");
    }

    /// A logits output whose one element moved within its envelope and its distance limits,
    /// but past the recorded token of its row by more than a near tie: refused, the row
    /// named; the same move short of a tie passes.
    #[test]
    fn a_token_no_launch_chose_is_refused_within_the_envelope() {
        use gnomon_format::spread::Tokens;

        let logits = |v: &mut Variation| {
            v.atol = Some(1.0);
            v.distances = vec![Distance { rms: 0.4, block_rms: 0.4 }];
            v.tokens = Some(Tokens { vocabulary: 8, rows: vec![vec![6]] });
        };
        let mut got = FIRST;
        got[5] += 3.9;
        let said = judged_as(Rule::default(), &got, "b", logits).unwrap_err();
        assert!(
            said.contains(
                "its logits choose a token no launch chose: row 0 chose token 5 (9.9000e0), which no \
                 launch chose there (they chose [6]); token 6 lies 2.900e0 below it, more than a near tie's 2.828e0"
            ),
            "{said}"
        );
        got[5] = 6.0 + 2.5;
        assert!(matches!(judged_as(Rule::default(), &got, "b", logits), Ok(Agreement::Tolerated { .. })));
    }

    /// Each element within the envelope, but more of them changed than the launches ever
    /// changed (times the margin): a defect that moves everything a little.
    #[test]
    fn too_many_differing_elements_are_refused_however_small() {
        let mut got = FIRST;
        got.iter_mut().take(5).for_each(|x| *x += 0.001);
        let said = judged(Rule::default(), &got, "b").unwrap_err();
        assert!(
            said.contains("5 of its 8 elements differ from the original's first launch, more than the 0.5000"),
            "{said}"
        );
    }

    /// A core written before envelopes is judged by its largest absolute difference.
    #[test]
    fn an_older_variation_is_judged_by_its_largest_absolute_difference() {
        let legacy = |v: &mut Variation| (v.atol, v.rtol) = (None, None);
        assert!(judged_as(Rule::default(), &with_last(0.03), "b", legacy).is_ok());
        assert!(judged_as(Rule::default(), &with_last(0.05), "b", legacy).is_err());
    }

    /// The planted defect the rule must refuse: a tolerance applied to a bitwise output.
    #[test]
    fn a_bitwise_output_gets_no_tolerance() {
        let off = judged(Rule::default(), &with_last(1e-9), "a").unwrap_err();
        assert!(off.contains("template `a` output `y` has SHA-256"), "{off}");
    }

    #[test]
    fn a_profile_can_tighten_or_forbid_and_integers_take_only_recorded_digests() {
        let tight = Rule { margin: 0.0, bitwise_only: false };
        let said = judged(tight, &with_last(0.001), "b").unwrap_err();
        assert!(said.ends_with("the profile allows only the digests its launches gave"), "{said}");
        assert_eq!(judged(tight, &with_last(-0.01), "b"), Ok(Agreement::Recorded));
        let bitwise = Rule { margin: 4.0, bitwise_only: true };
        assert!(judged(bitwise, &with_last(-0.01), "b").is_err());
        let ints = judged_as(Rule::default(), &with_last(0.001), "b", |v| {
            (v.element, v.atol, v.rtol, v.max_abs) = (Element::Bytes, Some(0.0), Some(0.0), 0.0)
        });
        assert!(ints.unwrap_err().contains("not floating-point"));
    }

    /// Read from a core on disk: the varying sample's first launch, checked against its
    /// digest again when the judge reads it.
    #[test]
    fn a_cores_varying_outputs_are_read_with_their_first_launch() {
        let root = tempfile::tempdir().unwrap();
        let draft = gnomon_fixtures::sample::CoreDraft::varying();
        draft.write(root.path()).unwrap();
        let core = Core::open(root.path()).unwrap();
        let agreements = Agreements::of(&core, Rule::default()).unwrap();
        let first = draft.files[gnomon_fixtures::sample::VARYING_FILE].clone();
        let variation = core.manifest().expectations[0].outputs[0].variation.clone().unwrap();
        let mut other = output("decode-b1", first.clone());
        other.actual_sha256.clone_from(&variation.sha256s[0]);
        assert_eq!(agreements.agrees(&other, "0"), Ok(Agreement::Recorded));
        let mut flipped = first.clone();
        flipped[0] ^= 1;
        std::fs::write(root.path().join(gnomon_fixtures::sample::VARYING_FILE), flipped).unwrap();
        let changed = Agreements::of(&core, Rule::default()).err().unwrap();
        assert_eq!(changed, format!("{} changed since the core was validated", variation.file));
    }

    #[test]
    fn a_wrong_digest_differs_in_its_first_digit() {
        assert_eq!(flip_first_digit("ab12"), "0b12");
        assert_eq!(flip_first_digit("0b12"), "1b12");
    }

    #[test]
    fn the_wrong_output_fed_to_the_self_check_is_refused() {
        let (m, first) = manifest(Element::Float32, |_| {});
        let agreements = Agreements::from_manifest(&m, Rule::default(), |_, _| Ok(first.clone())).unwrap();
        for template in ["a", "b"] {
            let right = output(template, first.clone());
            assert!(agreements.agrees(&right, &right.actual_sha256).is_ok());
            for (what, wrong) in agreements.wrongs(&right) {
                assert!(agreements.agrees(&wrong, &right.actual_sha256).is_err(), "{template}: {what}");
            }
        }
    }

    /// The bfloat16 logits: 30 798 ULP recorded, which times four covered every
    /// bfloat16 value, so the self-test accepted inverted bytes. In the data's units the
    /// envelope is a few hundredths, and inverted bytes are far outside it.
    #[test]
    fn a_wide_bfloat16_spread_still_refuses_the_self_tests_wrong_output() {
        let values: Vec<f32> = (0..64).map(|i| (i as f32 - 31.5) / 8.0).collect();
        let first: Vec<u8> = values.iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect();
        let mut m = gnomon_fixtures::sample::v2_features().manifest;
        let e = &mut m.expectations[0];
        e.outputs[0].sha256 = digest(&first);
        let mut v = variation(Element::Bfloat16, &first, b"other");
        (v.max_ulp, v.max_abs, v.atol, v.rtol, v.differing_fraction) =
            (30_798, 0.0586, Some(0.0586), Some(2f64.powi(-7)), 0.11);
        e.outputs[0].variation = Some(v);
        let template = e.template.clone();
        let agreements = Agreements::from_manifest(&m, Rule::default(), |_, _| Ok(first.clone())).unwrap();
        let mut right = output(&template, first.clone());
        right.buffer = m.expectations[0].outputs[0].buffer.clone();
        let (what, inverted) = &agreements.wrongs(&right)[0];
        assert_eq!(what, "every byte inverted");
        let refused = agreements.agrees(inverted, &right.actual_sha256).unwrap_err();
        assert!(refused.contains("64 of its 64 elements lie outside"), "{refused}");
    }

    /// A deterministic stand-in for a kernel's run-to-run noise: ±1 rounding of a
    /// bfloat16-sized step on a share of the elements, from `seed`.
    fn noisy(first: &[f32], seed: u64, share: f64, step: f32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        first
            .iter()
            .map(|x| if next() < share { x + step * if next() < 0.5 { 1.0 } else { -1.0 } } else { *x })
            .collect()
    }

    /// The output of a port that varies on nine tenths of its elements (a split-K GEMM's
    /// atomics): 4096 float32 in four blocks, 24 launches recorded the way the kit records
    /// them, and the judge that reads them.
    fn split_k(distances: bool) -> (Agreements<'static>, Vec<f32>) {
        let first: Vec<f32> = (0..4096).map(|i| ((i * 37) % 101) as f32 / 10.0 - 5.0).collect();
        let mut spread = gnomon_format::spread::Spread::of_first(Element::Float32, &floats(&first));
        let launches: Vec<Vec<u8>> = (1..24).map(|seed| floats(&noisy(&first, seed, 0.9, 0.01))).collect();
        launches.iter().for_each(|l| spread.add(&floats(&first), l));
        let envelope = spread.envelope();
        let mut m = gnomon_fixtures::sample::v2_features().manifest;
        let e = &mut m.expectations[0];
        e.template = "b".into();
        e.outputs[0].sha256 = digest(&floats(&first));
        e.outputs[0].variation = Some(Variation {
            launches: 24,
            sha256s: launches.iter().map(|l| digest(l)).collect(),
            max_abs: spread.max_abs,
            differing_fraction: spread.differing_fraction(),
            atol: Some(envelope.atol),
            rtol: Some(envelope.rtol),
            distances: if distances { spread.distances.clone() } else { vec![] },
            ..variation(Element::Float32, &floats(&first), b"")
        });
        let m: &'static Manifest = Box::leak(Box::new(m));
        let bytes = floats(&first);
        (Agreements::from_manifest(m, Rule::default(), move |_, _| Ok(bytes.clone())).unwrap(), first)
    }

    fn held(agreements: &Agreements, got: &[f32]) -> Result<Agreement, String> {
        agreements.agrees(&output("b", floats(got)), "0")
    }

    /// A fresh launch of the unchanged port passes; a defect that moves every element by
    /// 1.65 × the noise's step (each element within the envelope, which is fitted to the
    /// widest launch times 4) passes the envelope alone but not the RMS distance (its
    /// effect is 2 × the recorded mean, past the floor of about 1.6); nor does a defect
    /// confined to one block, which the whole output's mean dilutes.
    #[test]
    fn distances_catch_what_the_envelope_lets_through() {
        let (judge, first) = split_k(true);
        let (envelope_alone, _) = split_k(false);
        let fresh = noisy(&first, 99, 0.9, 0.01);
        let Ok(Agreement::Tolerated { bounds: Some(_), .. }) = held(&judge, &fresh) else { panic!("a fresh launch") };
        let everywhere: Vec<f32> = noisy(&first, 98, 0.9, 0.01).iter().map(|x| x + 0.0165).collect();
        assert!(held(&envelope_alone, &everywhere).is_ok(), "the envelope alone lets it through");
        let said = held(&judge, &everywhere).unwrap_err();
        assert!(said.contains("its RMS distance from the original's first launch is"), "{said}");
        assert!(said.contains("is past its limit: its RMS distance 2.0"), "{said}");
        assert!(said.contains("(limit 1.5"), "{said}");
        assert!(said.contains("in means of its 23 recorded launches' distances"), "{said}");
        let mut one_block = noisy(&first, 97, 0.9, 0.01);
        one_block[1024..2048].iter_mut().enumerate().for_each(|(i, x)| *x += if i % 2 == 0 { 0.018 } else { -0.018 });
        assert!(held(&envelope_alone, &one_block).is_ok(), "the envelope alone lets it through");
        let said = held(&judge, &one_block).unwrap_err();
        assert!(said.contains("its RMS distance in one 4 KiB block"), "{said}");
    }

    /// What a refused and a tolerated varying output say, held as written:
    /// `tools/sensitivity.py` reads these sentences out of qualify's reports (its test
    /// reads this snapshot).
    #[test]
    fn the_distances_are_said_as_the_sensitivity_table_reads_them() {
        let (judge, first) = split_k(true);
        let everywhere: Vec<f32> = noisy(&first, 98, 0.9, 0.01).iter().map(|x| x + 0.0165).collect();
        let refused = held(&judge, &everywhere).unwrap_err();
        let Ok(Agreement::Tolerated { fit, bounds: Some(bounds), .. }) = held(&judge, &noisy(&first, 99, 0.9, 0.01))
        else {
            panic!("a fresh launch")
        };
        let digests = digests_hidden(&refused);
        insta::assert_snapshot!(format!("{digests}\n`b` `y` launch 0: {}", distances_said(&fit, &bounds)));
    }

    /// `s` with every 64-digit digest written as `<sha256>`.
    fn digests_hidden(s: &str) -> String {
        s.split(' ')
            .map(|w| match w.trim_end_matches(',') {
                d if d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()) => w.replace(d, "<sha256>"),
                _ => w.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The self-test's defects sit just past each limit and are refused; the floors say
    /// how far that is, in units of the recorded launches' mean distance.
    #[test]
    fn defects_at_the_floors_are_fed_and_refused() {
        let (judge, first) = split_k(true);
        let right = output("b", floats(&first));
        let wrongs = judge.wrongs(&right);
        let said: Vec<&str> = wrongs.iter().map(|(what, _)| what.as_str()).collect();
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said[1].starts_with("moved over every element (1."), "{said:?}");
        assert!(said[2].starts_with("moved in its first 4 KiB block ("), "{said:?}");
        for (what, wrong) in &wrongs {
            assert!(judge.agrees(wrong, "0").is_err(), "{what}");
        }
        let (block, first_bytes) = (BLOCK_BYTES, floats(&first));
        assert_eq!(wrongs[2].1.bytes[block..], first_bytes[block..], "the block's defect stays in its block");
        assert_ne!(wrongs[1].1.bytes[block..], first_bytes[block..], "the whole output's reaches past it");
        let floors = judge.floors();
        assert_eq!(floors.len(), 1);
        let rms = floors[0].rms.unwrap();
        assert!(rms > 1.5 && rms < 2.0, "{floors:?}");
        assert!(floors[0].said().starts_with("`b` `y`: 1."), "{}", floors[0].said());
    }

    /// Floors are listed least sensitive first: the wider of an output's two floors
    /// orders them, an output whose launches moved no value (any change caught) last.
    #[test]
    fn floors_come_least_sensitive_first() {
        let floor = |template: &str, rms: Option<f64>, block_rms: Option<f64>| Floor {
            template: template.into(),
            buffer: "y".into(),
            rms,
            block_rms,
            launches: 8,
        };
        let (wide, narrow, none) =
            (floor("a", Some(1.6), Some(3.0)), floor("b", Some(2.0), Some(2.1)), floor("c", None, None));
        assert_eq!((wide.widest(), narrow.widest(), none.widest()), (3.0, 2.1, 0.0));
        let mut judge = split_k(true).0;
        let like = |bounds| {
            let v = &judge.varying[&("b", "y")];
            Varying { first_launch: v.first_launch.clone(), bounds, ..*v }
        };
        let one_launch = Bounds::of(&[gnomon_format::spread::Distance { rms: 0.01, block_rms: 0.02 }]);
        let (wider, quiet) = (like(one_launch), like(Bounds::of(&[gnomon_format::spread::Distance::default(); 3])));
        judge.varying.extend([(("w", "y"), wider), (("q", "y"), quiet)]);
        let order: Vec<String> = judge.floors().iter().map(|f| f.template.clone()).collect();
        assert_eq!(order, ["w", "b", "q"], "one launch's floors, the split-K output's, then one catching any change");
    }

    /// Outputs the reader found of nothing but NaN, or of one value, check nothing; the
    /// element is the one the reader found (integer outputs alike, tokens, are values).
    #[test]
    fn outputs_that_say_nothing_check_nothing() {
        let nan = checks_nothing(&read_as("a", Element::Float32, vec![0xff; 64])).unwrap();
        assert!(nan.contains("every one of its 16 Float32 elements is NaN or infinite"), "{nan}");
        let zeros = checks_nothing(&read_as("b", Element::Float32, floats(&[0.0; 8]))).unwrap();
        assert!(zeros.contains("all 8 of its Float32 elements are 0e0"), "{zeros}");
        assert_eq!(checks_nothing(&read_as("a", Element::Float32, floats(&FIRST))), None);
        assert_eq!(checks_nothing(&read_as("a", Element::Bytes, vec![0; 64])), None, "integers alike");
    }
}
