//! How far apart two launches' outputs are, element by element: what an exporter records
//! of an output that varies from launch to launch, and what a judge holds a replayed
//! output to. Floating-point elements are compared in units in the last place (ULP) of
//! their own type and in absolute value; other elements only bitwise.

use serde::{Deserialize, Serialize};

/// An output's element type, as far as a tolerance cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Element {
    Float64,
    Float32,
    Float16,
    Bfloat16,
    /// Integers, booleans, anything else: equal bits or not, never a tolerance.
    Bytes,
}

impl Element {
    pub fn size(self) -> usize {
        match self {
            Element::Float64 => 8,
            Element::Float32 => 4,
            Element::Float16 | Element::Bfloat16 => 2,
            Element::Bytes => 1,
        }
    }

    pub fn is_float(self) -> bool {
        self != Element::Bytes
    }

    /// The element type of a PyTorch dtype's name (`torch.bfloat16`, `bfloat16`); any
    /// non-float dtype compares bitwise.
    pub fn of_dtype(name: &str) -> Self {
        match name.trim_start_matches("torch.") {
            "float64" | "double" => Element::Float64,
            "float32" | "float" => Element::Float32,
            "float16" | "half" => Element::Float16,
            "bfloat16" => Element::Bfloat16,
            _ => Element::Bytes,
        }
    }

    /// The element at `i` of `bytes` (little-endian): its value, and its bits mapped onto
    /// a line where neighbouring floats are neighbouring integers (so a ULP distance is a
    /// difference), or `None` for a NaN.
    fn at(self, bytes: &[u8], i: usize) -> (f64, Option<i64>) {
        let size = self.size();
        let mut word = [0u8; 8];
        word[..size].copy_from_slice(&bytes[i * size..(i + 1) * size]);
        let bits = u64::from_le_bytes(word);
        let value = match self {
            Element::Float64 => f64::from_bits(bits),
            Element::Float32 => f32::from_bits(bits as u32) as f64,
            Element::Float16 => half::f16::from_bits(bits as u16).to_f64(),
            Element::Bfloat16 => half::bf16::from_bits(bits as u16).to_f64(),
            Element::Bytes => bits as f64,
        };
        let sign = 1u64 << (size * 8 - 1);
        let ordered = if bits & sign == 0 { bits as i64 } else { -((bits & !sign) as i64) };
        (value, (!value.is_nan()).then_some(ordered))
    }
}

/// How two outputs of equal length differ.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    pub elements: u64,
    pub differing: u64,
    /// Largest absolute difference of two numbers (0 for `Bytes`).
    pub max_abs: f64,
    /// Largest distance in ULP of the element type (0 for `Bytes`).
    pub max_ulp: u64,
    /// Elements where one side is NaN and the other not, or `Bytes` that differ: no
    /// tolerance covers them.
    pub incomparable: u64,
}

impl Spread {
    /// `a` against `b`, element by element. Lengths that differ, or that are not a whole
    /// number of elements, are all incomparable.
    pub fn between(element: Element, a: &[u8], b: &[u8]) -> Self {
        let size = element.size();
        let elements = (a.len() / size) as u64;
        if a.len() != b.len() || a.len() % size != 0 {
            return Self { elements, differing: elements, incomparable: elements.max(1), ..Self::default() };
        }
        let mut spread = Self { elements, ..Self::default() };
        for (i, (x, y)) in a.chunks_exact(size).zip(b.chunks_exact(size)).enumerate() {
            if x == y {
                continue;
            }
            spread.differing += 1;
            let ((vx, ox), (vy, oy)) = (element.at(a, i), element.at(b, i));
            match (element.is_float(), ox, oy) {
                (true, Some(ox), Some(oy)) => {
                    spread.max_ulp = spread.max_ulp.max(ox.abs_diff(oy));
                    spread.max_abs = spread.max_abs.max((vx - vy).abs());
                }
                // Two NaNs of different payload are both NaN.
                (true, None, None) => {}
                _ => spread.incomparable += 1,
            }
        }
        spread
    }

    /// The larger of two spreads, field by field.
    pub fn widest(self, other: Self) -> Self {
        Self {
            elements: self.elements.max(other.elements),
            differing: self.differing.max(other.differing),
            max_abs: self.max_abs.max(other.max_abs),
            max_ulp: self.max_ulp.max(other.max_ulp),
            incomparable: self.incomparable.max(other.incomparable),
        }
    }

    pub fn differing_fraction(&self) -> f64 {
        match self.elements {
            0 => 0.0,
            n => self.differing as f64 / n as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16s(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect()
    }

    #[test]
    fn neighbouring_floats_are_one_ulp_apart_across_zero_too() {
        let one = 1.0f32;
        let next = f32::from_bits(one.to_bits() + 1);
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let s = Spread::between(Element::Float32, &bytes(&[one, 2.0, 0.0]), &bytes(&[next, 2.0, -0.0]));
        assert_eq!((s.elements, s.differing, s.max_ulp, s.incomparable), (3, 2, 1, 0));
        assert_eq!(s.max_abs, (next - one) as f64);
        let tiny = f32::from_bits(1);
        let s = Spread::between(Element::Float32, &bytes(&[tiny]), &bytes(&[-tiny]));
        assert_eq!(s.max_ulp, 2);
    }

    #[test]
    fn bfloat16_differences_count_in_its_own_ulp() {
        // 1.0 and the next bfloat16 (1 + 2^-7).
        let s = Spread::between(Element::Bfloat16, &bf16s(&[1.0, 3.0]), &bf16s(&[1.0078125, 3.0]));
        assert_eq!((s.differing, s.max_ulp, s.max_abs), (1, 1, 0.0078125));
        assert_eq!(s.differing_fraction(), 0.5);
    }

    #[test]
    fn nan_against_a_number_and_differing_bytes_take_no_tolerance() {
        let s = Spread::between(Element::Bfloat16, &bf16s(&[f32::NAN, 1.0]), &bf16s(&[1.0, 1.0]));
        assert_eq!((s.differing, s.incomparable, s.max_ulp), (1, 1, 0));
        let s = Spread::between(Element::Bfloat16, &bf16s(&[f32::NAN]), &[0xc1, 0x7f]);
        assert_eq!((s.differing, s.incomparable), (1, 0), "two NaNs");
        let s = Spread::between(Element::Bytes, &[1, 2, 3], &[1, 2, 4]);
        assert_eq!((s.differing, s.incomparable, s.max_ulp), (1, 1, 0));
        let s = Spread::between(Element::Float32, &[0; 8], &[0; 4]);
        assert!(s.incomparable > 0, "lengths differ");
    }

    #[test]
    fn dtypes_name_their_elements() {
        let named = [
            ("torch.float64", Element::Float64),
            ("double", Element::Float64),
            ("torch.float32", Element::Float32),
            ("float", Element::Float32),
            ("torch.float16", Element::Float16),
            ("half", Element::Float16),
            ("torch.bfloat16", Element::Bfloat16),
            ("torch.int64", Element::Bytes),
            ("torch.bool", Element::Bytes),
        ];
        for (dtype, element) in named {
            assert_eq!(Element::of_dtype(dtype), element, "{dtype}");
        }
    }

    #[test]
    fn outputs_of_other_lengths_are_wholly_incomparable() {
        let s = Spread::between(Element::Float32, &[0; 8], &[0; 12]);
        assert_eq!(s, Spread { elements: 2, differing: 2, incomparable: 2, ..Spread::default() });
    }

    #[test]
    fn the_widest_spread_takes_each_field_from_either_side() {
        let a = Spread { elements: 4, differing: 1, max_abs: 0.5, max_ulp: 7, incomparable: 0 };
        let b = Spread { elements: 4, differing: 3, max_abs: 0.25, max_ulp: 9, incomparable: 1 };
        let widest = Spread { elements: 4, differing: 3, max_abs: 0.5, max_ulp: 9, incomparable: 1 };
        assert_eq!((a.widest(b), b.widest(a)), (widest, widest));
    }
}
