//! Small assertions for case bodies (the fixtures' rule checks' own, failing as a verdict).

use std::fmt::{Debug, Display};

use gnomon_fixtures::rules::check as rules;

use crate::Verdict;

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), Verdict> {
    rules::ensure(condition, message).map_err(Verdict::Failed)
}

/// Passes when `result` is an error that `expected` accepts; returns the error's text.
pub fn refused<T: Debug, E: Display + Debug>(
    result: Result<T, E>,
    expected: impl FnOnce(&E) -> bool,
) -> Result<String, Verdict> {
    rules::refused(result, expected).map_err(Verdict::Failed)
}

/// Passes when `result` is `Ok`, returning the value.
pub fn accepted<T, E: Display>(result: Result<T, E>, what: &str) -> Result<T, Verdict> {
    rules::accepted(result, what).map_err(Verdict::Failed)
}
