//! The rules of `generators` (v3): each seed and offset is a whole, aligned 64-bit word
//! of a writable buffer, the seed one replay loads, no offset word another generator's
//! word, a template draws from one generator, and its launches are the next replays'
//! offsets with digests of all its expected outputs.

use std::collections::{HashMap, HashSet};

use super::{digest, first_duplicate, BufferMap, Result, E};
use crate::{Buffer, BufferContents, BufferRef, BufferRole, Draws, Expectation, Generator, Manifest};

/// The bytes of a generator's seed and of its offset.
const WORD: u64 = 8;
/// At most this many next launches of a drawing template: `gnomon qualify` makes each.
const MAX_NEXT_LAUNCHES: usize = 16;

pub(super) fn generators(m: &Manifest, buffers: &BufferMap) -> Result {
    let templates: HashSet<&str> = m.templates.iter().map(|t| t.name.as_str()).collect();
    // An expectation without outputs expects nothing, as `checked` counts it.
    let expected: HashMap<&str, &Expectation> =
        m.expectations.iter().filter(|e| !e.outputs.is_empty()).map(|e| (e.template.as_str(), e)).collect();
    // Each word so far, and whose: replay writes an offset word before each launch, so it
    // may be no other generator's seed or offset (aligned words are equal or apart).
    let mut words: HashMap<u64, (usize, &str)> = HashMap::new();
    // Replay writes one generator's offset before a drawing launch: a template draws from one.
    let mut drawing: HashMap<&str, usize> = HashMap::new();
    for (index, g) in m.generators.iter().enumerate() {
        let fail = |what: String| E::Generator { index, what };
        let (seed, seed_in) = word(buffers, "seed", &g.seed).map_err(fail)?;
        let (offset, offset_in) = word(buffers, "offset", &g.offset).map_err(fail)?;
        // Every launch but the draws reads both words as loaded: an undefined buffer is poison.
        for (what, b) in [("seed", seed_in), ("offset", offset_in)] {
            if b.contents == BufferContents::Undefined {
                let what =
                    format!("its {what} lies in buffer `{}`, whose contents are undefined: replay poisons it", b.name);
                return Err(fail(what));
            }
        }
        if seed.abs_diff(offset) < WORD {
            return Err(fail("its seed and offset overlap".into()));
        }
        if let Some((other, whose)) = words.get(&offset) {
            return Err(fail(format!("its offset is generator {other}'s {whose}")));
        }
        if let Some((other, "offset")) = words.get(&seed) {
            return Err(fail(format!("its seed is generator {other}'s offset")));
        }
        words.entry(seed).or_insert((index, "seed"));
        words.insert(offset, (index, "offset"));
        if g.draws.is_empty() {
            return Err(fail("no template draws from it".into()));
        }
        for d in &g.draws {
            if let Some(other) = drawing.insert(d.template.as_str(), index) {
                return Err(fail(format!("template `{}` draws from generator {other} already", d.template)));
            }
            let drawn = match expected.get(d.template.as_str()) {
                _ if !templates.contains(d.template.as_str()) => Err("the core has no such template".into()),
                None => Err("it has no expected outputs to compare its draws by".into()),
                Some(e) => draws(g, d, e),
            };
            drawn.map_err(|what| fail(format!("template `{}`: {what}", d.template)))?;
        }
    }
    Ok(())
}

/// The offset from the arena's base of the word `at` names, and its buffer, where it is a
/// whole, aligned word of a writable buffer.
fn word<'m>(buffers: &BufferMap<'m>, what: &str, at: &BufferRef) -> std::result::Result<(u64, &'m Buffer), String> {
    let Some(&b) = buffers.by_name.get(at.buffer.as_str()) else {
        return Err(format!("its {what}'s buffer `{}` does not exist", at.buffer));
    };
    if b.role == BufferRole::Weight {
        return Err(format!("its {what} lies in weight `{}`, which no launch may change", b.name));
    }
    if at.offset.checked_add(WORD).is_none_or(|end| end > b.size) {
        return Err(format!("its {what} at {} does not lie in buffer `{}` of {} bytes", at.offset, b.name, b.size));
    }
    let offset = b.offset + at.offset;
    if !(buffers.base + offset).is_multiple_of(WORD) {
        return Err(format!("its {what} at {:#x} is not aligned to {WORD} bytes", buffers.base + offset));
    }
    Ok((offset, b))
}

/// A drawing template's next launches: enough, each at the offset the next replays would
/// write, each with a well-formed digest of every expected output `e` lists, once.
fn draws(g: &Generator, d: &Draws, e: &Expectation) -> std::result::Result<(), String> {
    if d.increment == 0 {
        return Err("its increment is 0: a launch that does not advance the offset draws nothing new".into());
    }
    let n = d.next_launches.len();
    if !(2..=MAX_NEXT_LAUNCHES).contains(&n) {
        return Err(format!(
            "{n} next launches recorded: 2 to {MAX_NEXT_LAUNCHES} are (one cannot show its draws change)"
        ));
    }
    let outputs: HashSet<&str> = e.outputs.iter().map(|o| o.buffer.as_str()).collect();
    for (launch, l) in d.next_launches.iter().enumerate() {
        let at = g.offset_of(d, launch as u64).ok_or_else(|| format!("next launch {launch}'s offset overflows"))?;
        if l.offset != at {
            return Err(format!("next launch {launch} is at offset {}, the next replays' is {at}", l.offset));
        }
        if let Some(o) = l.outputs.iter().find(|o| !outputs.contains(o.buffer.as_str())) {
            return Err(format!("next launch {launch} names `{}`, not an expected output", o.buffer));
        }
        if let Some(b) = first_duplicate(l.outputs.iter().map(|o| o.buffer.as_str())) {
            return Err(format!("next launch {launch} names `{b}` twice"));
        }
        // Every expected output, so each is compared after the launches that draw.
        if l.outputs.len() < outputs.len() {
            let named: HashSet<&str> = l.outputs.iter().map(|o| o.buffer.as_str()).collect();
            let missing = e.outputs.iter().find(|o| !named.contains(o.buffer.as_str())).expect("fewer, none twice");
            return Err(format!("next launch {launch} lacks expected output `{}`", missing.buffer));
        }
        for o in &l.outputs {
            digest(|| format!("next launch {launch} output `{}`", o.buffer), &o.sha256).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{validate::manifest, Drawn, DrawnLaunch};

    fn golden(json: &str) -> Manifest {
        serde_json::from_str(json).unwrap()
    }

    fn at(buffer: &str, offset: u64) -> BufferRef {
        BufferRef { buffer: buffer.into(), offset }
    }

    fn launch(offset: u64) -> DrawnLaunch {
        DrawnLaunch { offset, outputs: vec![Drawn { buffer: "y".into(), sha256: format!("{:064x}", offset) }] }
    }

    /// The golden v3 core with a generator: its seed and offset the first two words of
    /// input `x`, drawn from by `decode-b1` (expected output `y`) at its next two launches.
    fn drawing() -> Manifest {
        let mut m = golden(include_str!("../../../fixtures/golden/v3/manifest.json"));
        let draws =
            Draws { template: "decode-b1".into(), increment: 4, next_launches: vec![launch(1000), launch(1004)] };
        m.generators = vec![Generator { seed: at("x", 0), offset: at("x", 8), next_offset: 1000, draws: vec![draws] }];
        m
    }

    fn first(m: &mut Manifest) -> &mut Generator {
        &mut m.generators[0]
    }

    fn drawn(m: &mut Manifest) -> &mut Draws {
        &mut m.generators[0].draws[0]
    }

    /// A second generator: a copy of the first with its seed and offset at `seed` and
    /// `offset` of `x`.
    fn second(m: &mut Manifest, seed: u64, offset: u64) {
        let again = Generator { seed: at("x", seed), offset: at("x", offset), ..m.generators[0].clone() };
        m.generators.push(again);
    }

    /// How a row changes the drawing core.
    type Change = fn(&mut Manifest);
    type Row = (&'static str, Change, &'static str);

    /// Each rule broken once, and what its refusal says.
    const REFUSED: &[Row] = &[
        ("seed-buffer-missing", |m| first(m).seed.buffer = "z".into(), "its seed's buffer `z` does not exist"),
        ("offset-in-weight", |m| first(m).offset = at("w", 8), "its offset lies in weight `w`"),
        ("seed-past-its-buffer", |m| first(m).seed.offset = 4089, "its seed at 4089 does not lie in buffer `x`"),
        ("offset-past-every-address", |m| first(m).offset.offset = u64::MAX - 3, "does not lie in buffer `x`"),
        ("offset-misaligned", |m| first(m).offset.offset = 12, "its offset at 0x20000000000c is not aligned"),
        (
            "seed-undefined",
            |m| first(m).seed = at("tmp", 0),
            "its seed lies in buffer `tmp`, whose contents are undefined",
        ),
        (
            "offset-undefined",
            |m| first(m).offset = at("tmp", 0),
            "its offset lies in buffer `tmp`, whose contents are undefined",
        ),
        ("seed-and-offset-overlap", |m| first(m).offset.offset = 0, "its seed and offset overlap"),
        ("offset-shared", |m| second(m, 16, 8), "its offset is generator 0's offset"),
        ("offset-on-a-seed", |m| second(m, 16, 0), "its offset is generator 0's seed"),
        ("seed-on-an-offset", |m| second(m, 8, 16), "its seed is generator 0's offset"),
        ("no-draws", |m| first(m).draws.clear(), "no template draws from it"),
        (
            "template-twice",
            |m| {
                let again = drawn(m).clone();
                first(m).draws.push(again);
            },
            "template `decode-b1` draws from generator 0 already",
        ),
        ("template-in-two-generators", |m| second(m, 16, 24), "template `decode-b1` draws from generator 0 already"),
        ("template-unknown", |m| drawn(m).template = "z".into(), "template `z`: the core has no such template"),
        ("template-unchecked", |m| drawn(m).template = "prefill-b2".into(), "it has no expected outputs"),
        (
            "template-expecting-nothing",
            |m| {
                let nothing = Expectation { outputs: vec![], ..m.expectations[0].clone() };
                m.expectations.push(Expectation { template: "prefill-b2".into(), ..nothing });
                drawn(m).template = "prefill-b2".into();
            },
            "it has no expected outputs",
        ),
        ("increment-0", |m| drawn(m).increment = 0, "its increment is 0"),
        ("one-next-launch", |m| drawn(m).next_launches.truncate(1), "1 next launches recorded: 2 to 16 are"),
        (
            "too-many-next-launches",
            |m| drawn(m).next_launches = (0..=MAX_NEXT_LAUNCHES as u64).map(|k| launch(1000 + 4 * k)).collect(),
            "17 next launches recorded: 2 to 16",
        ),
        ("launch-off-its-offset", |m| drawn(m).next_launches[1].offset = 1005, "next launch 1 is at offset 1005"),
        (
            "launch-offset-overflows",
            |m| {
                first(m).next_offset = u64::MAX - 3;
                drawn(m).next_launches[0].offset = u64::MAX - 3;
            },
            "next launch 1's offset overflows",
        ),
        ("output-unexpected", |m| drawn(m).next_launches[1].outputs[0].buffer = "x".into(), "names `x`, not an"),
        ("output-twice", |m| drawn(m).next_launches[1].outputs.push(launch(1004).outputs[0].clone()), "`y` twice"),
        ("output-missing", |m| drawn(m).next_launches[1].outputs.clear(), "lacks expected output `y`"),
        (
            "output-digest-malformed",
            |m| drawn(m).next_launches[1].outputs[0].sha256 = "A".repeat(64),
            "next launch 1 output `y` digest `AAAA",
        ),
    ];

    /// Every rule refuses with its own text, and the texts are a snapshot (what an
    /// exporter reads when its generators are refused).
    #[test]
    fn every_broken_rule_is_refused_with_its_text() {
        assert_eq!(manifest(&drawing()), Ok(()));
        let mut wrong = Vec::new();
        let mut texts = Vec::new();
        for (slug, break_it, said) in REFUSED {
            let mut m = drawing();
            break_it(&mut m);
            match manifest(&m) {
                Err(e @ E::Generator { .. }) if e.to_string().contains(said) => texts.push(format!("{slug}: {e}")),
                other => wrong.push(format!("{slug}: {other:?}")),
            }
        }
        assert!(wrong.is_empty(), "refused otherwise or accepted: {wrong:#?}");
        insta::assert_snapshot!(texts.join("\n"));
    }

    /// Each rule's edge is accepted: a word ending its buffer, a seed two generators share,
    /// a last launch at the last offset.
    #[test]
    fn every_rule_refuses_no_earlier() {
        let accepted: &[(&str, Change)] = &[
            ("seed-ending-its-buffer", |m| first(m).seed.offset = 4088),
            ("seed-shared", |m| {
                // Another template, checked by `y` too, draws from a second generator.
                m.unchecked.clear();
                m.expectations.push(Expectation { template: "prefill-b2".into(), ..m.expectations[0].clone() });
                second(m, 0, 16);
                m.generators[1].draws[0].template = "prefill-b2".into();
            }),
            ("last-launch-at-the-last-offset", |m| {
                first(m).next_offset = u64::MAX - 4;
                drawn(m).next_launches = vec![launch(u64::MAX - 4), launch(u64::MAX)];
            }),
        ];
        for (slug, change) in accepted {
            let mut m = drawing();
            change(&mut m);
            assert_eq!(manifest(&m), Ok(()), "{slug}");
        }
    }

    #[test]
    fn an_older_core_with_generators_is_refused() {
        let mut m = golden(include_str!("../../../fixtures/golden/v2/manifest.json"));
        m.generators = drawing().generators;
        assert!(matches!(manifest(&m), Err(E::V3FieldInOlder { field: "generators", version: 2, .. })));
    }
}
