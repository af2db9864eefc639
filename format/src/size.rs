//! Byte sizes as people type them (`64MiB`, `8 GiB`, `1.5GiB`, `4096`): one parser behind
//! every door (`gnomon export --cap`, the kit's `use_arena` and `shard_cap`), so a text is
//! the same size wherever it is given. Units and their spelling are `bytesize`'s; what it
//! would let through that is no size here is refused first: signs, non-ASCII digits, and a
//! size past what 64 bits hold (which `bytesize` saturates).

use bytesize::ByteSize;

/// The bytes `text` names (surrounding blanks ignored), or why it names none.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let refused = || format!("not a size: `{text}` (write bytes, or a number and a unit such as 64MiB or 1.5GiB)");
    let trimmed = text.trim();
    if !trimmed.starts_with(|c: char| c.is_ascii_digit()) || !trimmed.is_ascii() {
        return Err(refused());
    }
    let bytes = trimmed.parse::<ByteSize>().map_err(|_| refused())?.as_u64();
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let per_unit = match unit.trim() {
        "" => 1,
        unit => format!("1{unit}").parse::<ByteSize>().map_err(|_| refused())?.as_u64(),
    };
    // Whole numbers are checked exactly; a fraction (`1.5GiB`) as a float.
    let fits = match number.parse::<u128>() {
        Ok(whole) => whole.checked_mul(u128::from(per_unit)).is_some_and(|b| b <= u128::from(u64::MAX)),
        Err(_) => number.parse::<f64>().map_err(|_| refused())? * (per_unit as f64) < 2f64.powi(64),
    };
    match fits {
        true => Ok(bytes),
        false => Err(format!("{}: past the 2⁶⁴ bytes a size may be", refused())),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn a_refusal_says_what_was_given_and_what_to_write() {
        assert_eq!(
            parse_size("lots"),
            Err("not a size: `lots` (write bytes, or a number and a unit such as 64MiB or 1.5GiB)".into())
        );
        assert!(parse_size("16EiB").unwrap_err().ends_with("past the 2⁶⁴ bytes a size may be"));
    }
}
