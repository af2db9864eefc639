//! The tokens a logits output chooses. Where an output holds logits (rows of scores over a
//! vocabulary), a serving stack samples each row's argmax greedily, and a port whose
//! logits stay near the first launch's can still choose another token. An exporter
//! records, per row, every token its launches' argmax gave; a judge finds a replayed row
//! whose argmax no launch gave, as vLLM's and SGLang's tests compare tokens, unless the
//! row's lead over the recorded token is a near tie that the launches' own noise could
//! flip ([`near_tie`]). The envelope alone admits flips of ties up to twice its width,
//! which is many times the typical element's noise.

use serde::{Deserialize, Serialize};

use super::{bits_of, Bounds, Element};

/// The largest lead a token no launch chose may have over a token one chose, and still be
/// a near tie: two elements, each moved by noise of the noisiest 4 KiB block's RMS
/// distance (the widest launch's), differ by that times √2 in RMS; Z = 5 of those make a
/// false failure as rare as the distance bounds' (Φ(−5) per row under a normal model).
pub fn near_tie(bounds: &Bounds) -> f64 {
    5.0 * std::f64::consts::SQRT_2 * bounds.block_rms.widest()
}

/// Each row's argmax over the launches of a logits output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Tokens {
    /// Elements per row: the vocabulary.
    pub vocabulary: u32,
    /// Per row, every token a launch's argmax gave, in the order first given; empty for a
    /// row with no finite element.
    pub rows: Vec<Vec<u32>>,
}

/// A row's argmax: the first index of its largest finite element, and that element.
fn argmax(element: Element, row: &[u8]) -> Option<(u32, f64)> {
    let values = row.chunks_exact(element.size()).map(|e| element.value(bits_of(e)));
    let finite = values.enumerate().filter(|(_, v)| v.is_finite());
    let (at, value) = finite.fold(None, |best: Option<(usize, f64)>, (i, v)| match best {
        Some((_, b)) if b >= v => best,
        _ => Some((i, v)),
    })?;
    Some((u32::try_from(at).ok()?, value))
}

/// The first `count` rows of `bytes`, `vocabulary` elements each, or `None` where `bytes`
/// are shorter (or the elements are not floats, or a row is empty): logits may begin a
/// buffer that is longer than they are.
fn rows(element: Element, vocabulary: u32, count: usize, bytes: &[u8]) -> Option<std::slice::ChunksExact<'_, u8>> {
    let row = (vocabulary as usize).checked_mul(element.size()).filter(|&r| r > 0 && element.is_float())?;
    let logits = bytes.get(..row.checked_mul(count).filter(|&n| n > 0)?)?;
    Some(logits.chunks_exact(row))
}

impl Tokens {
    /// The tokens of a first launch's `bytes`, whose first `count` rows of `vocabulary`
    /// elements are logits; `None` where they are not floats or `bytes` are shorter.
    pub fn of_first(element: Element, vocabulary: u32, count: usize, bytes: &[u8]) -> Option<Self> {
        let rows = rows(element, vocabulary, count, bytes)?;
        Some(Self {
            vocabulary,
            rows: rows.map(|r| argmax(element, r).map(|(t, _)| t).into_iter().collect()).collect(),
        })
    }

    /// Notes the tokens of another launch's `bytes` (of the first's length).
    pub fn add(&mut self, element: Element, bytes: &[u8]) {
        let Some(rows) = rows(element, self.vocabulary, self.rows.len(), bytes) else { return };
        for (seen, row) in self.rows.iter_mut().zip(rows) {
            if let Some((token, _)) = argmax(element, row) {
                if !seen.contains(&token) {
                    seen.push(token);
                }
            }
        }
    }

    /// Why a replayed output `got` chose tokens no launch chose, if it did: the first row
    /// whose argmax no launch gave, leading every token a launch chose there by more than
    /// `tie` ([`near_tie`]).
    pub fn unchosen(&self, element: Element, tie: f64, got: &[u8]) -> Option<String> {
        let Some(rows) = rows(element, self.vocabulary, self.rows.len(), got) else {
            return Some(format!("its bytes hold fewer than {} rows of {} logits", self.rows.len(), self.vocabulary));
        };
        for (r, (seen, row)) in self.rows.iter().zip(rows).enumerate() {
            let (token, value) = match argmax(element, row) {
                Some(chosen) if !seen.contains(&chosen.0) => chosen,
                Some(_) => continue,
                None if seen.is_empty() => continue,
                None => return Some(format!("row {r} has no finite logit, where the launches chose {seen:?}")),
            };
            let at = |t: u32| element.value(bits_of(&row[t as usize * element.size()..][..element.size()]));
            let nearest =
                seen.iter().map(|&t| (t, at(t))).filter(|(_, v)| v.is_finite()).max_by(|a, b| a.1.total_cmp(&b.1));
            match nearest {
                Some((_, v)) if value - v <= tie => continue,
                Some((t, v)) => {
                    return Some(format!(
                        "row {r} chose token {token} ({value:.4e}), which no launch chose there (they chose \
                         {seen:?}); token {t} lies {:.3e} below it, more than a near tie's {tie:.3e}",
                        value - v
                    ))
                }
                None => {
                    return Some(format!(
                    "row {r} chose token {token}, and the tokens the launches chose ({seen:?}) are not finite there"
                ))
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    const TIGHT: f64 = 0.02;

    /// A tie is 5·√2 of the widest launch's noisiest-block RMS distance.
    #[test]
    fn a_near_tie_is_five_sigma_of_a_difference_of_two_elements() {
        let d = |block_rms| super::super::Distance { rms: 0.0, block_rms };
        let bounds = Bounds::of(&[d(0.01), d(0.03), d(0.02)]).unwrap();
        assert!((near_tie(&bounds) - 5.0 * 2f64.sqrt() * 0.03).abs() < 1e-12, "{}", near_tie(&bounds));
    }

    #[test]
    fn each_row_records_every_argmax_its_launches_gave_once() {
        let first = f32s(&[1.0, 2.0, 0.0, 5.0, 5.0, f32::NAN, 7.0]);
        let mut tokens = Tokens::of_first(Element::Float32, 3, 2, &first).unwrap();
        assert_eq!(
            tokens.rows,
            [vec![1], vec![0]],
            "the first of equal maxima; NaN is no candidate; past the rows, none"
        );
        tokens.add(Element::Float32, &f32s(&[3.0, 2.0, 0.0, 5.0, 5.0, 9.0]));
        tokens.add(Element::Float32, &f32s(&[3.0, 2.0, 0.0, 5.0, 5.0, 9.0]));
        assert_eq!(tokens.rows, [vec![1, 0], vec![0, 2]]);
        let blank = Tokens::of_first(Element::Float32, 2, 1, &f32s(&[f32::NAN, f32::INFINITY])).unwrap();
        assert_eq!(blank.rows, [Vec::<u32>::new()]);
    }

    #[test]
    fn only_whole_rows_of_floats_have_tokens() {
        assert_eq!(Tokens::of_first(Element::Float32, 3, 1, &f32s(&[1.0, 2.0])), None);
        assert_eq!(Tokens::of_first(Element::Bytes, 1, 1, &[1, 2]), None);
        assert_eq!(Tokens::of_first(Element::Float32, 0, 1, &f32s(&[1.0])), None);
        assert_eq!(Tokens::of_first(Element::Float32, 1, 0, &f32s(&[1.0])), None);
        assert_eq!(Tokens::of_first(Element::Float32, u32::MAX, usize::MAX, &f32s(&[1.0])), None);
    }

    #[test]
    fn a_token_no_launch_chose_is_named_with_its_row_unless_a_near_tie() {
        let tokens = Tokens { vocabulary: 3, rows: vec![vec![1], vec![0, 2]] };
        let agree = f32s(&[0.0, 2.0, 1.0, 1.0, 0.0, 3.0]);
        assert_eq!(tokens.unchosen(Element::Float32, TIGHT, &agree), None, "either recorded token will do");
        let tie = f32s(&[2.015, 2.0, 1.0, 1.0, 0.0, 0.0]);
        assert_eq!(tokens.unchosen(Element::Float32, TIGHT, &tie), None, "0.015 apart, a tie to 0.02");
        let flipped = f32s(&[2.5, 2.0, 1.0, 1.0, 0.0, 0.0]);
        let said = tokens.unchosen(Element::Float32, TIGHT, &flipped).unwrap();
        assert_eq!(
            said,
            "row 0 chose token 0 (2.5000e0), which no launch chose there (they chose [1]); token 1 lies 5.000e-1 \
             below it, more than a near tie's 2.000e-2"
        );
        assert_eq!(tokens.unchosen(Element::Float32, 0.5, &flipped), None, "a lead of 0.5 is a tie to 0.5");
        let blank = f32s(&[f32::NAN, f32::NAN, f32::NAN, 1.0, 0.0, 3.0]);
        assert!(tokens.unchosen(Element::Float32, TIGHT, &blank).unwrap().starts_with("row 0 has no finite logit"));
        let short = f32s(&[0.0, 2.0, 1.0]);
        assert_eq!(
            tokens.unchosen(Element::Float32, TIGHT, &short).unwrap(),
            "its bytes hold fewer than 2 rows of 3 logits"
        );
    }

    /// The tie only excuses a token no launch chose: a replayed row whose argmax a launch
    /// gave is never weighed against the others, so it passes even where no lead at all is
    /// excused (a negative tie).
    #[test]
    fn a_token_a_launch_chose_passes_whatever_the_tie() {
        let tokens = Tokens { vocabulary: 3, rows: vec![vec![1], vec![0, 2]] };
        let agree = f32s(&[0.0, 2.0, 1.0, 1.0, 0.0, 3.0]);
        assert_eq!(tokens.unchosen(Element::Float32, -1.0, &agree), None);
    }

    /// A row where no launch had a finite logit recorded no token, so a replay with none
    /// there either agrees; only a row the launches chose in must still have one.
    #[test]
    fn a_row_without_finite_logits_passes_where_no_launch_had_one() {
        let tokens = Tokens { vocabulary: 2, rows: vec![vec![], vec![1]] };
        let blank = f32s(&[f32::NAN, f32::INFINITY, 0.0, 1.0]);
        assert_eq!(tokens.unchosen(Element::Float32, TIGHT, &blank), None);
    }
}
