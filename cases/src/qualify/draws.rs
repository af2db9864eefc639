//! `random-draws`: a template that draws random numbers (the core's `generators`) draws
//! anew at every launch of a restore, and draws what the exporter's launches drew at the
//! offsets the producing program's next replays would write. Its launches otherwise
//! start from the stored offset and draw one set of numbers forever: every other case
//! passes such a core.

use std::collections::HashMap;

use gnomon_core::replay::OutputCheck;
use gnomon_format::{Draws, Manifest};

use crate::{measured, Metrics, Verdict};

/// The verdict on every drawing template of `m`, from the restore's `draws` (its next
/// launches' outputs). Each output must draw anew where the exporter's launches did (its
/// digest changes from one next launch to the next) and give the exporter's digest; an
/// output the core records as varying need not give that digest, but must give none the
/// launches at the stored offset gave.
pub fn judged(m: &Manifest, draws: &[OutputCheck]) -> Result<Metrics, Verdict> {
    if m.generators.is_empty() {
        return Err(Verdict::Skipped(
            "no template of the core draws random numbers from a generator it names (`generators`)".into(),
        ));
    }
    // A varying output's digests at the stored offset: the first launch's and the others'.
    let stored: HashMap<(&str, &str), Vec<&str>> = m
        .expectations
        .iter()
        .flat_map(|e| e.outputs.iter().map(move |o| (e, o)))
        .filter_map(|(e, o)| {
            let v = o.variation.as_ref()?;
            let digests = std::iter::once(o.sha256.as_str()).chain(v.sha256s.iter().map(String::as_str));
            Some(((e.template.as_str(), o.buffer.as_str()), digests.collect()))
        })
        .collect();
    let restored: HashMap<(&str, u32, &str), &OutputCheck> =
        draws.iter().map(|c| ((c.template.as_str(), c.launch, c.buffer.as_str()), c)).collect();
    let (mut failures, mut compared, mut templates) = (Vec::new(), 0, 0);
    for d in m.generators.iter().flat_map(|g| &g.draws) {
        templates += 1;
        let launches = launches_of(d, &restored, &mut failures);
        for (launch, l) in d.next_launches.iter().enumerate() {
            for (o, c) in l.outputs.iter().zip(&launches[launch]) {
                let Some(c) = c else { continue };
                let said = |what: &str| {
                    format!(
                        "template `{}` next launch {launch} (offset {}): `{}` {what}",
                        d.template, l.offset, o.buffer
                    )
                };
                compared += 1;
                match stored.get(&(d.template.as_str(), o.buffer.as_str())) {
                    None if !c.matches() => {
                        failures.push(said("is not what the exporter's launch at that offset drew"))
                    }
                    Some(at_stored) if at_stored.contains(&c.actual_sha256.as_str()) => {
                        failures.push(said("is what launches at the stored offset gave: its random numbers are frozen"))
                    }
                    _ => {}
                }
                if launch == 0 {
                    continue;
                }
                let before = launches[launch - 1].iter().flatten().find(|b| b.buffer == o.buffer);
                let recorded = d.next_launches[launch - 1].outputs.iter().find(|b| b.buffer == o.buffer);
                let drew_anew = recorded.is_some_and(|r| r.sha256 != o.sha256);
                if drew_anew && before.is_some_and(|b| b.actual_sha256 == c.actual_sha256) {
                    failures.push(said(&format!(
                        "is what next launch {} gave, where the exporter's launches differed: its random numbers are \
                         frozen",
                        launch - 1
                    )));
                }
            }
        }
    }
    let metrics = Metrics::from([
        measured("draws-templates", f64::from(templates), "1"),
        measured("draws-outputs-compared", f64::from(compared), "1"),
    ]);
    match failures.is_empty() {
        true => Ok(metrics),
        false => Err(Verdict::Failed(failures.join("; "))),
    }
}

/// Each next launch's restored outputs, in the order the core records them (`None`
/// where the restore read none, which fails).
fn launches_of<'c>(
    d: &Draws,
    restored: &HashMap<(&str, u32, &str), &'c OutputCheck>,
    failures: &mut Vec<String>,
) -> Vec<Vec<Option<&'c OutputCheck>>> {
    let launch = |(launch, l): (usize, &gnomon_format::DrawnLaunch)| {
        let found =
            |o: &gnomon_format::Drawn| restored.get(&(d.template.as_str(), launch as u32, o.buffer.as_str())).copied();
        let found: Vec<_> = l.outputs.iter().map(found).collect();
        if found.iter().any(Option::is_none) {
            failures.push(format!("template `{}` next launch {launch}: the restore read no output of it", d.template));
        }
        found
    };
    d.next_launches.iter().enumerate().map(launch).collect()
}

#[cfg(test)]
mod tests {
    use gnomon_format::{BufferRef, Drawn, DrawnLaunch, Draws, Generator};

    use super::*;

    const TEMPLATE: &str = "decode-b1";

    /// The sample core with a generator its template draws from: two next launches, each
    /// output's digest `recorded[launch]` repeated.
    fn drawing(recorded: [&str; 2]) -> Manifest {
        let mut m = gnomon_fixtures::sample::v3_features().manifest;
        let outputs: Vec<String> = m.expectations[0].outputs.iter().map(|o| o.buffer.clone()).collect();
        let launch = |launch: usize| DrawnLaunch {
            offset: 36 + 8 * launch as u64,
            outputs: outputs.iter().map(|b| Drawn { buffer: b.clone(), sha256: recorded[launch].repeat(32) }).collect(),
        };
        let at = |offset| BufferRef { buffer: "x".into(), offset };
        let draws = Draws { template: TEMPLATE.into(), increment: 8, next_launches: vec![launch(0), launch(1)] };
        m.generators = vec![Generator { seed: at(0), offset: at(8), next_offset: 36, draws: vec![draws] }];
        m
    }

    /// What a restore's next launches read: each output of `m`'s drawing template, launch
    /// by launch, with digest `actual[launch]` repeated.
    fn restored(m: &Manifest, actual: [&str; 2]) -> Vec<OutputCheck> {
        let d = &m.generators[0].draws[0];
        let mut checks = Vec::new();
        for (launch, l) in d.next_launches.iter().enumerate() {
            checks.extend(l.outputs.iter().map(|o| OutputCheck {
                template: d.template.clone(),
                buffer: o.buffer.clone(),
                launch: launch as u32,
                expected_sha256: o.sha256.clone(),
                actual_sha256: actual[launch].repeat(32),
                bytes: Default::default(),
                blank: None,
            }));
        }
        checks
    }

    fn failed(result: Result<Metrics, Verdict>) -> String {
        match result {
            Err(Verdict::Failed(why)) => why,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn draws_as_the_producing_program_drew_pass_with_what_was_compared() {
        let m = drawing(["aa", "bb"]);
        let metrics = judged(&m, &restored(&m, ["aa", "bb"])).unwrap();
        let outputs = m.generators[0].draws[0].next_launches[0].outputs.len() as f64;
        assert_eq!(metrics["draws-templates"].value, 1.0);
        assert_eq!(metrics["draws-outputs-compared"].value, 2.0 * outputs);
    }

    #[test]
    fn frozen_or_other_draws_fail_and_say_which() {
        let m = drawing(["aa", "bb"]);
        let frozen = failed(judged(&m, &restored(&m, ["aa", "aa"])));
        assert!(frozen.contains("next launch 1 (offset 44): `y` is what next launch 0 gave"), "{frozen}");
        assert!(frozen.contains("frozen") && !frozen.contains("next launch 0 (offset 36)"), "{frozen}");
        let other = failed(judged(&m, &restored(&m, ["cc", "dd"])));
        assert!(other.contains("next launch 0 (offset 36): `y` is not what the exporter's launch"), "{other}");
        assert!(!other.contains("frozen"), "{other}");
        let mut missing = restored(&m, ["aa", "bb"]);
        missing.retain(|c| c.launch == 0);
        assert!(failed(judged(&m, &missing)).contains("next launch 1: the restore read no output of it"));
    }

    #[test]
    fn a_varying_output_need_only_draw_unlike_the_stored_offset_and_anew_and_a_core_without_generators_is_skipped() {
        let mut m = drawing(["aa", "bb"]);
        for o in &mut m.expectations[0].outputs {
            o.variation = Some(
                serde_json::from_value(serde_json::json!({
                    "element": "float32", "launches": 2, "sha256s": ["cc".repeat(32)], "max-abs": 1e-6, "max-ulp": 1,
                    "differing-fraction": 0.5, "file": "outputs/y-first.bin"
                }))
                .unwrap(),
            );
        }
        assert!(judged(&m, &restored(&m, ["ee", "dd"])).is_ok(), "varying outputs drew anew");
        let at_stored = failed(judged(&m, &restored(&m, ["cc", "dd"])));
        assert!(at_stored.contains("next launch 0 (offset 36): `y` is what launches at the stored offset gave"));
        assert!(failed(judged(&m, &restored(&m, ["ee", "ee"]))).contains("is what next launch 0 gave"));
        m.generators.clear();
        assert!(matches!(judged(&m, &[]), Err(Verdict::Skipped(why)) if why.contains("no template")));
    }
}
