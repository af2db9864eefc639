//! Small assertions for case bodies; each failure says what was expected and what came.

use std::fmt::{Debug, Display};

use crate::Verdict;

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), Verdict> {
    if condition {
        Ok(())
    } else {
        Err(Verdict::Failed(message()))
    }
}

/// Passes when `result` is an error that `expected` accepts; returns the error's text.
pub fn refused<T: Debug, E: Display + Debug>(
    result: Result<T, E>,
    expected: impl FnOnce(&E) -> bool,
) -> Result<String, Verdict> {
    match result {
        Ok(value) => Err(Verdict::Failed(format!("expected a refusal, got {value:?}"))),
        Err(e) if expected(&e) => Ok(e.to_string()),
        Err(e) => Err(Verdict::Failed(format!("refused with the wrong error: {e} ({e:?})"))),
    }
}

/// Passes when `result` is `Ok`, returning the value.
pub fn accepted<T, E: Display>(result: Result<T, E>, what: &str) -> Result<T, Verdict> {
    result.map_err(|e| Verdict::Failed(format!("{what}: {e}")))
}
