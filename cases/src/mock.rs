//! `mock/`: cases that pass, fail, panic, abort, hang and flake on purpose. Hidden from
//! normal runs; the runner's own tests use them to check isolation without a GPU.

use std::{fs, path::PathBuf, time::Duration};

use crate::{Case, Verdict};

/// Where `mock/flaky` keeps its attempt counter between child processes.
pub const FLAKY_STATE_ENV: &str = "GNOMON_MOCK_FLAKY_STATE";
/// Where `mock/hang-with-helper` writes the process id of the helper it starts.
pub const HELPER_PID_ENV: &str = "GNOMON_MOCK_HELPER_PID";

fn mock(id: &str, body: impl Fn(&mut crate::Ctx) -> Result<(), Verdict> + Send + Sync + 'static) -> Case {
    Case::new(id, "mock", body).isolated()
}

pub fn cases() -> Vec<Case> {
    vec![
        mock("mock/pass", |ctx| {
            ctx.metric("answer", 42.0, "1");
            Ok(())
        }),
        mock("mock/fail", |_| Err(Verdict::Failed("failed on purpose".into()))),
        mock("mock/panic", |_| panic!("panicked on purpose")),
        mock("mock/abort", |_| {
            eprintln!("mock/abort: aborting on purpose");
            std::process::abort()
        }),
        mock("mock/hang", |_| loop {
            std::thread::sleep(Duration::from_secs(3600));
        }),
        // Like an exit-handover replay case whose exporter hangs: the helper must end with
        // the case, or it would keep the GPU.
        mock("mock/hang-with-helper", |_| {
            let pid_file = std::env::var_os(HELPER_PID_ENV)
                .map(PathBuf::from)
                .ok_or_else(|| Verdict::Blocked(format!("{HELPER_PID_ENV} is not set")))?;
            let helper = std::process::Command::new("sleep").arg("3600").spawn();
            let helper = helper.map_err(|e| Verdict::Blocked(format!("start the helper: {e}")))?;
            fs::write(pid_file, helper.id().to_string()).map_err(|e| Verdict::Blocked(e.to_string()))?;
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }),
        mock("mock/flaky", |_| {
            let state = std::env::var_os(FLAKY_STATE_ENV)
                .map(PathBuf::from)
                .ok_or_else(|| Verdict::Blocked(format!("{FLAKY_STATE_ENV} is not set")))?;
            let attempts = fs::read_to_string(&state).map(|s| s.trim().parse().unwrap_or(0)).unwrap_or(0) + 1;
            fs::write(&state, attempts.to_string()).map_err(|e| Verdict::Blocked(e.to_string()))?;
            if attempts == 1 {
                return Err(Verdict::Failed("first attempt fails on purpose".into()));
            }
            Ok(())
        }),
    ]
}
