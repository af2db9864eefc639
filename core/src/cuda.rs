//! The only module that talks to the CUDA driver and NVRTC; all `unsafe` lives here.
//! Libraries are loaded at run time (cudarc `dynamic-loading`), so a binary built without
//! CUDA runs on a GPU machine unchanged, and on a machine without one it reports why.

use cudarc::driver::{result as cu, sys};

/// What preflight records about one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: u32,
    pub name: String,
    /// Compute capability as major*10 + minor.
    pub sm: u32,
    pub total_memory: u64,
}

/// The driver's and NVRTC's versions and the devices present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preflight {
    /// As `cuDriverGetVersion` reports it (13000 for CUDA 13.0).
    pub driver_version: u32,
    /// `major.minor`, or why NVRTC is unusable.
    pub nvrtc_version: Result<String, String>,
    pub devices: Vec<DeviceInfo>,
}

/// Finds the driver and the devices, or says in words why there are none.
pub fn preflight() -> Result<Preflight, String> {
    // SAFETY: only probes whether the shared library can be loaded.
    if !unsafe { sys::is_culib_present() } {
        return Err("the CUDA driver library (libcuda) is not installed".into());
    }
    cu::init().map_err(|e| format!("cuInit failed: {}", describe(e)))?;
    let mut driver_version = 0;
    // SAFETY: writes one int through a valid pointer.
    unsafe { sys::cuDriverGetVersion(&mut driver_version) }
        .result()
        .map_err(describe)?;
    let count = cu::device::get_count().map_err(describe)?;
    if count == 0 {
        return Err("the CUDA driver reports no devices".into());
    }
    let devices = (0..count).map(device_info).collect::<Result<_, _>>()?;
    Ok(Preflight {
        driver_version: driver_version as u32,
        nvrtc_version: nvrtc_version(),
        devices,
    })
}

fn device_info(ordinal: i32) -> Result<DeviceInfo, String> {
    use sys::CUdevice_attribute::*;
    let dev = cu::device::get(ordinal).map_err(describe)?;
    // SAFETY: `dev` is a valid device handle from cuDeviceGet.
    let (major, minor, total) = unsafe {
        (
            cu::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
                .map_err(describe)?,
            cu::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
                .map_err(describe)?,
            cu::device::total_mem(dev).map_err(describe)?,
        )
    };
    let name = cu::device::get_name(dev).map_err(describe)?;
    Ok(DeviceInfo {
        ordinal: ordinal as u32,
        name,
        sm: (major * 10 + minor) as u32,
        total_memory: total as u64,
    })
}

fn nvrtc_version() -> Result<String, String> {
    use cudarc::nvrtc::sys as nv;
    // SAFETY: only probes whether the shared library can be loaded.
    if !unsafe { nv::is_culib_present() } {
        return Err("NVRTC (libnvrtc) is not installed".into());
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints through valid pointers.
    unsafe { nv::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| format!("{e:?}"))?;
    Ok(format!("{major}.{minor}"))
}

/// `CUDA_ERROR_X (text)` for a driver error.
pub fn describe(e: cu::DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{name} ({text})")
}
