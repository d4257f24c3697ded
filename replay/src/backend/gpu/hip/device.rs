//! The HIP runtime's devices: initialization, the properties `rrstore
//! devices` shows and the device description names.

use std::ffi::{c_char, c_int, c_void, CStr};

use super::ffi::*;
use crate::backend::BackendError;

/// One HIP device as `rrstore devices` shows it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct HipDeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// `gcnArchName`, e.g. `gfx942:sramecc+:xnack-`.
    pub gcn_arch_name: String,
    pub memory_bytes: u64,
    /// `GPU-...` (`device_uuid`), `None` when the runtime gives none.
    pub uuid: Option<String>,
}

pub(super) fn version_string(v: c_int) -> String {
    // HIP_VERSION = major * 10_000_000 + minor * 100_000 + patch.
    format!("{}.{}.{}", v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}

pub(super) fn init(api: &HipRuntime) -> Result<usize, BackendError> {
    // From here this process holds runtime state: it may fork no GPU child.
    crate::backend::gpu::driver_guard::note_driver_init("hip");
    // SAFETY: hipInit takes flags 0.
    let e = unsafe { (api.hipInit)(0) };
    if e == HIP_ERROR_NO_DEVICE {
        return Err(BackendError::Unavailable(format!(
            "the HIP runtime ({}) reports no AMD GPU",
            api.path
        )));
    }
    api.ck(e, "hipInit")?;
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    let e = unsafe { (api.hipGetDeviceCount)(&mut n) };
    if e == HIP_ERROR_NO_DEVICE || n <= 0 {
        return Err(BackendError::Unavailable(format!(
            "the HIP runtime ({}) reports no AMD GPU",
            api.path
        )));
    }
    api.ck(e, "hipGetDeviceCount")?;
    Ok(n as usize)
}

pub(super) fn device_info(api: &HipRuntime, ordinal: usize) -> Result<HipDeviceInfo, BackendError> {
    let dev = ordinal as c_int;
    let mut name = [0 as c_char; 256];
    // SAFETY: 256-byte buffer, NUL-terminated by HIP.
    api.ck(
        unsafe { (api.hipDeviceGetName)(name.as_mut_ptr(), name.len() as c_int, dev) },
        "hipDeviceGetName",
    )?;
    // SAFETY: NUL-terminated within the buffer.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let mut mem = 0usize;
    // SAFETY: writes one size_t.
    api.ck(
        unsafe { (api.hipDeviceTotalMem)(&mut mem, dev) },
        "hipDeviceTotalMem",
    )?;
    let mut props = vec![0u8; DEVICE_PROP_BUFFER];
    // SAFETY: the buffer is larger than hipDeviceProp_tR0600 (1472 bytes).
    api.ck(
        unsafe { (api.hipGetDevicePropertiesR0600)(props.as_mut_ptr() as *mut c_void, dev) },
        "hipGetDeviceProperties",
    )?;
    let gcn_arch_name = gcn_arch_name(&props).ok_or_else(|| BackendError::Driver {
        op: "hipGetDeviceProperties".into(),
        reason: "no gcnArchName (gfx...) in the device properties".into(),
    })?;
    Ok(HipDeviceInfo {
        ordinal,
        name,
        gcn_arch_name,
        memory_bytes: mem as u64,
        uuid: device_uuid(&props),
    })
}

/// Runtime version and every AMD device, or why there are none: queried in
/// a short-lived child process, so that this one stays free to fork GPU
/// children ([`crate::backend::gpu::driver_guard`]).
pub fn list() -> Result<(String, Vec<HipDeviceInfo>), BackendError> {
    crate::backend::gpu::driver_guard::in_child("hip", list_here)
}

/// [`list`] in this process.
fn list_here() -> Result<(String, Vec<HipDeviceInfo>), BackendError> {
    let api = HipRuntime::load()?;
    let n = init(&api)?;
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    api.ck(
        unsafe { (api.hipRuntimeGetVersion)(&mut v) },
        "hipRuntimeGetVersion",
    )?;
    let devices = (0..n)
        .map(|i| device_info(&api, i))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((version_string(v), devices))
}
