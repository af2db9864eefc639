//! When a replayed output agrees with the original run. A bitwise output agrees when its
//! digest is the one it is compared with. An output the core records as varying (its
//! launches in the capturing process did not give alike) also agrees when its digest is
//! one those launches gave, or, for floating-point elements, when no element is further
//! from the original's first launch than the recorded spread allows: `margin` × the
//! largest ULP distance recorded (at least one ULP), NaNs where the first launch has
//! NaNs. The `outputs`, `determinism` and `poison-independence` cases use this one rule.

use std::collections::HashMap;

use gnomon_core::{
    format::{hash_hex, Manifest, Variation},
    replay::OutputCheck,
    spread::Spread,
    Core,
};

/// The margin over the recorded spread unless a profile sets another.
pub const DEFAULT_MARGIN: f64 = 4.0;

/// How a profile lets varying outputs pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// Times the recorded largest ULP distance that an output may be from the first launch;
    /// 0 allows only the digests the original run gave.
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
    /// Within the tolerance: the largest ULP distance found and the one allowed.
    Tolerated {
        max_ulp: u64,
        allowed: u64,
        max_abs: f64,
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
        let recorded = v.variation.max_ulp.max(1);
        let allowed = (recorded as f64 * self.rule.margin).floor() as u64;
        let spread = Spread::between(v.variation.element, &v.first_launch, &o.bytes);
        let why = match (v.variation.element.is_float(), allowed, spread.incomparable) {
            (false, _, _) => "its elements are not floating-point, so only the digests its launches gave pass",
            (true, 0, _) => "the profile allows only the digests its launches gave",
            (true, _, 0) if spread.max_ulp <= allowed => {
                return Ok(Agreement::Tolerated { max_ulp: spread.max_ulp, allowed, max_abs: spread.max_abs })
            }
            (true, _, 0) => "",
            (true, _, n) => return Err(format!("{}; {n} elements are NaN on one side only", differs())),
        };
        let spread_said = format!(
            "{} ULP (absolute {:e}) from the original's first launch, {} elements of {}",
            spread.max_ulp, spread.max_abs, spread.differing, spread.elements
        );
        Err(match why {
            "" => format!(
                "{}, which no launch of the original gave: {spread_said}, beyond the {allowed} ULP allowed \
                 ({recorded} recorded over {} launches × margin {})",
                differs(),
                v.variation.launches,
                self.rule.margin
            ),
            why => format!("{}, which no launch of the original gave, and {why}", differs()),
        })
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
    use gnomon_core::spread::Element;

    fn floats(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn ulps(x: f32, n: i32) -> f32 {
        f32::from_bits((x.to_bits() as i32 + n) as u32)
    }

    fn digest(bytes: &[u8]) -> String {
        hash_hex(bytes).unwrap()
    }

    /// A core with one bitwise output (`a`/`y`) and one varying (`b`/`y`): launches gave
    /// two digests, 2 ULP apart at most.
    fn manifest(element: Element) -> (Manifest, Vec<u8>) {
        let mut m = gnomon_fixtures::sample::v2_features().manifest;
        let first = floats(&[1.0, 2.0]);
        let other = floats(&[1.0, ulps(2.0, 2)]);
        let template = m.templates[0].name.clone();
        let mut e = m.expectations[0].clone();
        e.template = "b".into();
        e.outputs[0].sha256 = digest(&first);
        e.outputs[0].variation = Some(Variation {
            element,
            launches: 8,
            sha256s: vec![digest(&other)],
            max_abs: 0.0,
            max_ulp: 2,
            differing_fraction: 0.5,
            file: "outputs/first.bin".into(),
            nodes: vec![],
        });
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

    fn judged(element: Element, rule: Rule, got: &[f32], template: &str) -> Result<Agreement, String> {
        let (m, first) = manifest(element);
        let agreements = Agreements::from_manifest(&m, rule, |_, _| Ok(first.clone())).unwrap();
        agreements.agrees(&output(template, floats(got)), &digest(&first))
    }

    #[test]
    fn a_varying_output_passes_as_recorded_or_within_margin_times_its_spread() {
        let rule = Rule::default();
        assert_eq!(judged(Element::Float32, rule, &[1.0, 2.0], "b"), Ok(Agreement::Bitwise));
        assert_eq!(judged(Element::Float32, rule, &[1.0, ulps(2.0, 2)], "b"), Ok(Agreement::Recorded));
        let within = judged(Element::Float32, rule, &[ulps(1.0, -8), 2.0], "b").unwrap();
        assert!(matches!(within, Agreement::Tolerated { max_ulp: 8, allowed: 8, .. }), "{within:?}");
        let beyond = judged(Element::Float32, rule, &[ulps(1.0, 9), 2.0], "b").unwrap_err();
        assert!(beyond.contains("9 ULP") && beyond.contains("8 ULP allowed (2 recorded over 8 launches × margin 4)"));
        let nan = judged(Element::Float32, rule, &[f32::NAN, 2.0], "b").unwrap_err();
        assert!(nan.ends_with("1 elements are NaN on one side only"), "{nan}");
    }

    /// The planted defect the rule must refuse: a tolerance applied to a bitwise output.
    #[test]
    fn a_bitwise_output_gets_no_tolerance() {
        let off = judged(Element::Float32, Rule::default(), &[1.0, ulps(2.0, 1)], "a").unwrap_err();
        assert!(off.contains("template `a` output `y` has SHA-256"), "{off}");
    }

    #[test]
    fn a_profile_can_tighten_or_forbid_and_integers_take_only_recorded_digests() {
        let tight = Rule { margin: 0.0, bitwise_only: false };
        let said = judged(Element::Float32, tight, &[ulps(1.0, 1), 2.0], "b").unwrap_err();
        assert!(said.ends_with("the profile allows only the digests its launches gave"), "{said}");
        assert_eq!(judged(Element::Float32, tight, &[1.0, ulps(2.0, 2)], "b"), Ok(Agreement::Recorded));
        let bitwise = Rule { margin: 4.0, bitwise_only: true };
        assert!(judged(Element::Float32, bitwise, &[1.0, ulps(2.0, 2)], "b").is_err());
        let ints = judged(Element::Bytes, Rule::default(), &[ulps(1.0, 1), 2.0], "b").unwrap_err();
        assert!(ints.contains("not floating-point"), "{ints}");
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
        let (m, first) = manifest(Element::Float32);
        let agreements = Agreements::from_manifest(&m, Rule::default(), |_, _| Ok(first.clone())).unwrap();
        for template in ["a", "b"] {
            let right = output(template, first.clone());
            assert!(agreements.agrees(&right, &right.actual_sha256).is_ok());
            assert!(agreements.agrees(&agreements.wrong(&right), &right.actual_sha256).is_err(), "{template}");
        }
    }
}
