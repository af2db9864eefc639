//! Who else is on the GPU. A launch that shares the device with another process can give
//! other bits (argmax over tied logits, some GEMMs), so an expectation recorded, or a
//! verdict reached, beside another process is named as such. NVML (the driver's
//! management library, loaded at run time like the driver) lists the processes that hold
//! a context on each device.

use std::{ffi::OsStr, sync::OnceLock};

use nvml_wrapper::{enums::device::UsedGpuMemory, Nvml};
use serde::Serialize;

/// A process other than this one that holds a context on a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct GpuProcess {
    /// The device's NVML index.
    pub gpu: u32,
    pub pid: u32,
    pub name: String,
    /// Device memory it holds, where NVML says.
    pub used_bytes: Option<u64>,
}

/// NVML, loaded and initialised once for the process and never unloaded: a second load
/// after NVML was shut down and unloaded crashed an exporting process on the H200.
fn nvml() -> Result<&'static Nvml, String> {
    static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();
    // The versioned name: the unversioned one comes only with the driver's development files.
    let loaded = NVML.get_or_init(|| {
        Nvml::builder().lib_path(OsStr::new("libnvidia-ml.so.1")).init().map_err(|e| format!("NVML: {e}"))
    });
    loaded.as_ref().map_err(Clone::clone)
}

/// Every process but this one and `also_mine` (its parent, say) that NVML sees on any
/// GPU, by device then process id; `Err` says why NVML could not be asked.
pub fn other_processes(also_mine: &[u32]) -> Result<Vec<GpuProcess>, String> {
    let nvml = nvml()?;
    let mine = |pid: u32| pid == std::process::id() || also_mine.contains(&pid);
    let mut found = Vec::new();
    for gpu in 0..nvml.device_count().map_err(|e| format!("NVML device count: {e}"))? {
        let device = nvml.device_by_index(gpu).map_err(|e| format!("NVML device {gpu}: {e}"))?;
        let compute = device.running_compute_processes().map_err(|e| format!("NVML processes of device {gpu}: {e}"))?;
        let graphics = device.running_graphics_processes().unwrap_or_default();
        for p in compute.into_iter().chain(graphics).filter(|p| !mine(p.pid)) {
            let used_bytes = match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            };
            let name = nvml.sys_process_name(p.pid, 64).unwrap_or_else(|_| "?".into());
            found.push(GpuProcess { gpu, pid: p.pid, name, used_bytes });
        }
    }
    found.sort_by_key(|p| (p.gpu, p.pid));
    found.dedup_by_key(|p| (p.gpu, p.pid));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a driver (this CI machine) NVML cannot be asked, and says why.
    #[test]
    fn without_nvml_the_reason_is_given() {
        if let Err(why) = other_processes(&[]) {
            assert!(why.starts_with("NVML"), "{why}");
        }
    }
}
