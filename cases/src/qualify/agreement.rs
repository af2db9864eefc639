//! When a replayed output agrees with the original run. A bitwise output agrees when its
//! digest is the one it is compared with. An output the core records as varying (its
//! launches in the capturing process did not give alike) also agrees when its digest is
//! one those launches gave, or, for floating-point elements, when it lies within the
//! recorded envelope widened by `margin`: every element within `margin × (atol + rtol ×
//! |first|)` of the original's first launch (NaN where the first launch has NaN), and no
//! more than `margin ×` the recorded fraction of elements differing. The `outputs`,
//! `determinism` and `poison-independence` cases use this one rule.

use std::collections::HashMap;

use gnomon_format::{
    hash_hex,
    spread::{Envelope, DEFAULT_MARGIN},
    Core, Manifest, Variation,
};

use gnomon_core::replay::OutputCheck;

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
    /// Within the widened envelope: how many elements differed, how many might, and the
    /// largest share of its allowance any element used.
    Tolerated {
        differing: u64,
        elements: u64,
        fraction_allowed: f64,
        worst_share: f64,
        max_abs: f64,
        allowed: Envelope,
    },
}

/// A varying output as the judge holds it: what the core records, and its first launch.
struct Varying<'m> {
    expected: &'m str,
    variation: &'m Variation,
    first_launch: Vec<u8>,
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
        let mut varying = HashMap::new();
        for e in &m.expectations {
            for o in &e.outputs {
                let Some(variation) = &o.variation else { continue };
                let first_launch = read(&variation.file, &o.sha256)?;
                varying.insert(
                    (e.template.as_str(), o.buffer.as_str()),
                    Varying { expected: &o.sha256, variation, first_launch },
                );
            }
        }
        Ok(Self { rule, varying })
    }

    /// Whether `o` agrees with the output whose digest is `with` (the original run's for
    /// the outputs case, the first replayed launch's for determinism and poison).
    pub fn agrees(&self, o: &OutputCheck, with: &str) -> Result<Agreement, String> {
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
        let (fit, admitted) = allowance.judge(v.variation.element, &v.first_launch, &o.bytes);
        let (allowed, fraction_allowed) = (allowance.envelope, allowance.fraction);
        if admitted {
            let (differing, elements, worst_share, max_abs) =
                (fit.differing, fit.elements, fit.worst_share, fit.max_abs);
            return Ok(Agreement::Tolerated { differing, elements, fraction_allowed, worst_share, max_abs, allowed });
        }
        let recorded = format!(
            "recorded over {} launches{} × margin {}",
            v.variation.launches,
            v.variation.spread_of.as_ref().map_or(String::new(), |s| format!(" of template `{}`", s.template)),
            self.rule.margin
        );
        let past = match fit.outside {
            0 => format!(
                "{} of its {} elements differ from the original's first launch, more than the {:.4} allowed \
                 ({:.4} {recorded})",
                fit.differing, fit.elements, fraction_allowed, v.variation.differing_fraction
            ),
            n => format!(
                "{n} of its {} elements lie outside |x − first| ≤ {:e} + {:e}·|first| (atol and rtol {recorded}), \
                 the farthest at {:.3e} of its allowance; largest absolute difference {:e}",
                fit.elements, allowed.atol, allowed.rtol, fit.worst_share, fit.max_abs
            ),
        };
        unrecorded(&past)
    }

    /// An output that must not agree: `o` with its digest changed and, for a varying
    /// output, every byte of its first launch inverted (far past any tolerance). What the
    /// checker's self-test feeds the rule.
    pub fn wrong(&self, o: &OutputCheck) -> OutputCheck {
        let mut wrong = o.clone();
        wrong.actual_sha256 = flip_first_digit(&o.actual_sha256);
        if let Some(v) = self.varying.get(&(o.template.as_str(), o.buffer.as_str())) {
            wrong.bytes = v.first_launch.iter().map(|b| !b).collect();
        }
        wrong
    }
}

pub(crate) fn flip_first_digit(hex: &str) -> String {
    let mut chars: Vec<char> = hex.chars().collect();
    if let Some(c) = chars.first_mut() {
        *c = if *c == '0' { '1' } else { '0' };
    }
    chars.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gnomon_format::spread::Element;

    fn floats(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn digest(bytes: &[u8]) -> String {
        hash_hex(bytes).unwrap()
    }

    const FIRST: [f32; 8] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 0.0];

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
        }
    }

    /// A core with one bitwise output (`a`/`y`) and one varying (`b`/`y`): its launches
    /// gave two digests, one element 0.01 apart across zero (a billion ULP), one element
    /// of eight at most.
    fn manifest(element: Element, change: impl FnOnce(&mut Variation)) -> (Manifest, Vec<u8>) {
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

    fn output(template: &str, bytes: Vec<u8>) -> OutputCheck {
        OutputCheck {
            template: template.into(),
            buffer: "y".into(),
            launch: 0,
            expected_sha256: String::new(),
            actual_sha256: digest(&bytes),
            bytes,
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
        let Agreement::Tolerated { differing: 1, elements: 8, fraction_allowed, worst_share, .. } = within else {
            panic!("{within:?}")
        };
        assert_eq!(fraction_allowed, 0.5);
        assert!((worst_share - 0.75).abs() < 1e-6, "{worst_share}");
        let beyond = judged(rule, &with_last(0.05), "b").unwrap_err();
        assert!(beyond.contains("1 of its 8 elements lie outside |x − first| ≤ 4e-2 + 0e0·|first|"), "{beyond}");
        assert!(beyond.contains("recorded over 8 launches × margin 4"), "{beyond}");
        let nan = judged(rule, &with_last(f32::NAN), "b").unwrap_err();
        assert!(nan.contains("1 of its 8 elements lie outside"), "{nan}");
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
            assert!(agreements.agrees(&agreements.wrong(&right), &right.actual_sha256).is_err(), "{template}");
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
        let refused = agreements.agrees(&agreements.wrong(&right), &right.actual_sha256).unwrap_err();
        assert!(refused.contains("64 of its 64 elements lie outside"), "{refused}");
    }
}
