//! Names from manifests and reports are data: before they reach a terminal or a Markdown
//! table, control characters (escape sequences, carriage returns, newlines) are written
//! out as escapes, and Markdown's `|` and backticks cannot end a cell or a code span.

use std::borrow::Cow;

/// `text` with every control character written as its escape (`\u{1b}`, `\n`, `\r`).
pub fn printable(text: &str) -> Cow<'_, str> {
    match text.chars().any(char::is_control) {
        false => Cow::Borrowed(text),
        true => Cow::Owned(
            text.chars().map(|c| if c.is_control() { c.escape_debug().to_string() } else { c.into() }).collect(),
        ),
    }
}

/// A Markdown code span holding `text` as it is, inside a table cell too: fenced with one
/// more backtick than its longest run of them, `|` escaped, control characters escaped.
pub fn md_code(text: &str) -> String {
    let body = printable(text).replace('|', "\\|");
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if body.starts_with('`') || body.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// Prose in a Markdown table cell: one line, `|` escaped.
pub fn md_cell(text: &str) -> String {
    printable(text).replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_reach_a_terminal_or_break_a_table() {
        assert_eq!(printable("core: \u{1b}[2K\rvalid\n"), "core: \\u{1b}[2K\\rvalid\\n");
        assert!(matches!(printable("plain é"), Cow::Borrowed(_)));
        assert_eq!(md_code("a|b`c\nd"), "``a\\|b`c\\nd``");
        assert_eq!(md_code("`x"), "`` `x ``");
        assert_eq!(md_code("plain"), "`plain`");
        assert_eq!(md_cell("one | two\nthree"), "one \\| two\\nthree");
    }
}
