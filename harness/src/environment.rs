//! What the report records about the machine: host, CPU, OS, harness build, and the GPU
//! preflight (device names, arch, memory, driver and NVRTC versions).

use std::fs;

use gnomon_cases::Facilities;
use gnomon_reports::{Environment, Gpu, GpuProcess};

pub const HARNESS_COMMIT: &str = env!("GNOMON_COMMIT");

pub fn collect() -> Environment {
    let mut env = Environment {
        host: gethostname::gethostname().to_string_lossy().into_owned(),
        cpu: cpu_model(),
        os: os_name(),
        harness_version: env!("CARGO_PKG_VERSION").into(),
        harness_commit: HARNESS_COMMIT.into(),
        transparent_huge_pages: fs::read_to_string(THP_MODE).ok().and_then(|s| selected_mode(&s)),
        ..Environment::default()
    };
    match gnomon_core::cuda::preflight() {
        Ok(p) => {
            env.driver_version = Some(format!("{}.{}", p.driver_version / 1000, p.driver_version % 1000 / 10));
            env.driver_release = driver_release();
            env.nvrtc_version = Some(p.nvrtc_version.unwrap_or_else(|e| format!("unavailable: {e}")));
            env.gpus = p
                .devices
                .into_iter()
                .map(|d| Gpu { arch: d.arch(), index: d.ordinal, name: d.name, memory_bytes: d.total_memory })
                .collect();
            add_gpu_processes(&mut env);
        }
        Err(reason) => {
            env.gpu_unavailable = Some(reason);
            // NVRTC compiles without a GPU, so compile-only cases can still run.
            env.nvrtc_version = gnomon_core::cuda::nvrtc_version().ok();
        }
    }
    env
}

/// Adds the processes other than this one that NVML sees on a GPU now, to those seen
/// before. Where NVML cannot be asked, none are named.
pub fn add_gpu_processes(env: &mut Environment) {
    let Ok(seen) = gnomon_core::sharing::other_processes(&[]) else { return };
    for p in seen {
        let p = GpuProcess { gpu: p.gpu, pid: p.pid, name: p.name, used_bytes: p.used_bytes };
        if !env.gpu_processes.iter().any(|q| (q.gpu, q.pid) == (p.gpu, p.pid)) {
            env.gpu_processes.push(p);
        }
    }
}

/// Why this machine cannot give cases a scratch directory (a `TMPDIR` that does not
/// exist, a full or read-only disk), if it cannot: cases that need one would be blocked
/// for a reason that is the machine's, not the subject's.
pub fn scratch_problem() -> Option<String> {
    let under = std::env::temp_dir();
    let made = tempfile::tempdir_in(&under);
    made.err().map(|e| format!("no scratch directory can be made under {} (TMPDIR): {e}", under.display()))
}

pub fn facilities(env: &Environment) -> Facilities {
    let nvrtc_unavailable = match &env.nvrtc_version {
        Some(v) if !v.starts_with("unavailable") => None,
        Some(v) => Some(v.clone()),
        None => Some("NVRTC (libnvrtc) is not installed".into()),
    };
    Facilities { gpus: env.gpus.len() as u32, gpu_unavailable: env.gpu_unavailable.clone(), nvrtc_unavailable }
}

const THP_MODE: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// The mode the kernel marks as selected: `madvise` of `always [madvise] never`.
fn selected_mode(modes: &str) -> Option<String> {
    modes.split_whitespace().find_map(|m| m.strip_prefix('[')?.strip_suffix(']').map(String::from))
}

fn cpu_model() -> String {
    let info = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info.lines().find_map(|l| l.strip_prefix("model name").and_then(|r| r.split(':').nth(1)));
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!("{} x{threads}", model.map(str::trim).unwrap_or(std::env::consts::ARCH))
}

fn os_name() -> String {
    let release = fs::read_to_string("/etc/os-release").unwrap_or_default();
    let pretty = release.lines().find_map(|l| l.strip_prefix("PRETTY_NAME="));
    pretty.map(|p| p.trim_matches('"').to_owned()).unwrap_or_else(|| std::env::consts::OS.into())
}

/// `580.159.04` from the NVIDIA kernel module's version file, where there is one.
fn driver_release() -> Option<String> {
    let text = fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    let line = text.lines().next()?;
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::selected_mode;

    #[test]
    fn the_bracketed_mode_is_the_selected_one() {
        assert_eq!(selected_mode("always [madvise] never\n").as_deref(), Some("madvise"));
        assert_eq!(selected_mode("[always] madvise never").as_deref(), Some("always"));
        assert_eq!(selected_mode("always madvise never"), None);
    }
}
