//! The case catalogue as a `cargo test` / `cargo nextest` target: the same runner as
//! `gnomon run`, with isolated cases run by the built `gnomon` binary. The report goes to
//! GNOMON_REPORT_DIR when set, else to `target/tmp/suite-report`, which outlives the run
//! (under nextest each case is its own run, so that report holds the last one).

use std::{path::PathBuf, process::ExitCode, time::Duration};

fn main() -> ExitCode {
    let report_dir = std::env::var_os("GNOMON_REPORT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("suite-report"));
    let config = gnomon::runner::RunConfig {
        source: gnomon::runner::CaseSource::Catalogue(gnomon_cases::CatalogueOptions::default()),
        libtest: libtest_mimic::Arguments::from_args(),
        report_dir: Some(report_dir),
        require_arch: None,
        case_timeout: Duration::from_secs(120),
        retries: 0,
        profile: "cargo-test".into(),
        child_exe: PathBuf::from(env!("CARGO_BIN_EXE_gnomon")),
        partition: None,
        expectations: gnomon_cases::expectations::Expectations::parse(gnomon_cases::expectations::DEFAULT)
            .expect("the built-in expectations parse"),
        empty_selection_fails: false,
        needs_gpu: false,
    };
    ExitCode::from(gnomon::runner::run(config) as u8)
}
