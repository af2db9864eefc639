//! Exit codes of the `gnomon` binary.

/// Every selected case passed, was skipped, blocked or failed as expected.
pub const SUCCESS: i32 = 0;
/// `gnomon compare` found a regression.
pub const REGRESSION: i32 = 1;
/// At least one case failed, crashed, timed out or passed unexpectedly (libtest's code).
pub const CASES_FAILED: i32 = 101;
/// The command line or an input file was invalid.
pub const USAGE: i32 = 2;
/// A precondition of the whole run failed (for example `--require-arch` on another arch).
pub const PRECONDITION: i32 = 3;
/// Gnomon itself failed (a panic outside any case body): a bug to report, never a verdict
/// on the subject. Distinct from 101, which a panic would otherwise share.
pub const INTERNAL_ERROR: i32 = 70;
