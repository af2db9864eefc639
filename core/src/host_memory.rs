//! Host memory at its peak, stage by stage. Linux keeps each process's high-water mark of
//! resident memory (`VmHWM` in `/proc/self/status`), and writing 5 to
//! `/proc/self/clear_refs` sets it back to what is resident now (proc(5)): the peak of a
//! stage is the mark read after it, once it was reset before it.

use std::collections::BTreeMap;

/// The process's peak resident memory since start or the last reset, in bytes; `None`
/// where the kernel does not say.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    vm_hwm(&status)
}

/// `VmHWM` of a `/proc/PID/status` text, in bytes.
fn vm_hwm(status: &str) -> Option<u64> {
    let kib = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().strip_suffix("kB")?;
    kib.trim().parse::<u64>().ok()?.checked_mul(1024)
}

/// Sets the peak back to what is resident now; whether the kernel let it.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", b"5").is_ok()
}

/// The peak of each stage measured, by name (a stage met again keeps its largest), and
/// of the whole process: the mark found before the first stage, or any stage's.
#[derive(Clone, Debug, Default)]
pub struct Peaks {
    by_stage: BTreeMap<&'static str, u64>,
    before: u64,
}

impl Peaks {
    /// Runs `f` as stage `name`, its peak measured where the kernel resets the mark.
    pub fn measure<T>(&mut self, name: &'static str, f: impl FnOnce() -> T) -> T {
        self.before = self.before.max(peak_rss_bytes().unwrap_or(0));
        let reset = reset_peak();
        let out = f();
        if let Some(peak) = peak_rss_bytes().filter(|_| reset) {
            let kept = self.by_stage.entry(name).or_default();
            *kept = (*kept).max(peak);
        }
        out
    }

    /// Each stage's peak, in bytes.
    pub fn by_stage(&self) -> &BTreeMap<&'static str, u64> {
        &self.by_stage
    }

    /// The process's peak over every stage and before them.
    pub fn overall(&self) -> u64 {
        let now = peak_rss_bytes().unwrap_or(0);
        self.by_stage.values().copied().fold(self.before.max(now), u64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_high_water_mark_is_read_in_bytes() {
        assert_eq!(vm_hwm("Name:\tgnomon\nVmHWM:\t  2048 kB\nVmRSS:\t 1024 kB\n"), Some(2 << 20));
        assert_eq!(vm_hwm("VmRSS:\t 1024 kB\n"), None);
        assert_eq!(vm_hwm("VmHWM:\t 99999999999999999999 kB\n"), None, "too large to be bytes");
    }

    /// A stage that touches 64 MiB peaks at least that high (the mark was reset to what
    /// was resident, which the 64 MiB then add to; other test threads can only add more),
    /// and the process's peak holds it.
    #[test]
    fn a_stage_that_touches_memory_peaks_at_least_that_high() {
        if !reset_peak() {
            return; // a kernel without clear_refs: no stage is measured, as `measure` says.
        }
        let mut peaks = Peaks::default();
        let touched = peaks.measure("touch", || {
            let v = vec![1u8; 64 << 20];
            std::hint::black_box(v.iter().map(|&b| b as u64).sum::<u64>())
        });
        assert_eq!(touched, 64 << 20);
        let touch = peaks.by_stage()["touch"];
        assert!(touch >= 64 << 20, "touch {touch}");
        peaks.measure("touch", || ());
        assert!(peaks.by_stage()["touch"] >= touch, "a stage met again keeps its largest");
        assert!(peaks.overall() >= touch);
    }
}
