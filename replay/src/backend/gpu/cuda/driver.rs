//! The CUDA driver library: probing for it, error translation, device queries.
//!
//! cudarc loads `libcuda.so` on first use and panics when it is absent, so
//! every entry point calls [`probe`] first, which turns absence into
//! [`BackendError::Unavailable`].

use std::ffi::{c_char, c_int, CStr};

use cudarc::driver::sys::{self, CUdevice, CUdevice_attribute, CUresult};

use crate::backend::gpu::target::DeviceTarget;
use crate::backend::BackendError;

/// What to tell the user when the driver library is missing.
pub const MISSING_DRIVER: &str = "the CUDA backend needs the NVIDIA driver library libcuda.so.1, \
which is not installed here: install the NVIDIA driver (Debian: nvidia-driver from the \
non-free component, which brings libcuda1; or NVIDIA's own driver package) on a machine with an NVIDIA GPU, or replay on another backend (--backend host|hip)";

/// Ok when `libcuda.so` can be loaded.
pub fn probe() -> Result<(), BackendError> {
    // SAFETY: is_culib_present only tries to dlopen candidate names.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(BackendError::Unavailable(MISSING_DRIVER.into()))
    }
}

/// `CUDA_ERROR_X (description)` for a driver result.
pub fn describe(r: CUresult) -> String {
    let mut name: *const c_char = std::ptr::null();
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: both calls only write a pointer to a static string.
    unsafe {
        sys::cuGetErrorName(r, &mut name);
        sys::cuGetErrorString(r, &mut text);
    }
    let s = |p: *const c_char| {
        if p.is_null() {
            None
        } else {
            // SAFETY: the driver returns NUL-terminated static strings.
            Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        }
    };
    match (s(name), s(text)) {
        (Some(n), Some(t)) => format!("{n} ({t})"),
        (Some(n), None) => n,
        _ => format!("CUDA error {}", r as i32),
    }
}

/// Map a driver result to `Ok` or [`BackendError::Driver`] naming the call.
pub fn ck(r: CUresult, op: &str) -> Result<(), BackendError> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(BackendError::Driver {
            op: op.into(),
            reason: describe(r),
        })
    }
}

/// Load the library and initialize the driver.
pub fn init() -> Result<(), BackendError> {
    probe()?;
    // From here this process holds driver state: it may fork no GPU child.
    crate::backend::gpu::driver_guard::note_driver_init("cuda");
    // SAFETY: the library is present (probe); cuInit has no other precondition.
    let r = unsafe { sys::cuInit(0) };
    if r == CUresult::CUDA_ERROR_NO_DEVICE {
        return Err(BackendError::Unavailable(
            "the NVIDIA driver is installed but reports no CUDA device".into(),
        ));
    }
    ck(r, "cuInit")
}

/// One CUDA device as `rrstore devices` shows it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct CudaDeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (u32, u32),
    pub memory_bytes: u64,
    pub vmm_supported: bool,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as nvidia-smi prints it
    /// (fleet, issue 21); None when the driver does not say.
    pub uuid: Option<String>,
}

impl CudaDeviceInfo {
    pub fn target(&self) -> DeviceTarget {
        DeviceTarget::Cuda {
            major: self.compute_capability.0,
            minor: self.compute_capability.1,
        }
    }
}

/// Driver version as `major.minor` (e.g. 13.0), after [`init`].
pub fn driver_version() -> Result<String, BackendError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    ck(
        unsafe { sys::cuDriverGetVersion(&mut v) },
        "cuDriverGetVersion",
    )?;
    Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
}

pub fn device_count() -> Result<usize, BackendError> {
    let mut n: c_int = 0;
    // SAFETY: writes one int; the driver is initialized.
    ck(unsafe { sys::cuDeviceGetCount(&mut n) }, "cuDeviceGetCount")?;
    Ok(n.max(0) as usize)
}

pub fn device(ordinal: usize) -> Result<CUdevice, BackendError> {
    let count = device_count()?;
    if ordinal >= count {
        return Err(BackendError::Unavailable(format!(
            "CUDA device {ordinal} does not exist; this machine has {count} CUDA device(s)"
        )));
    }
    let mut dev: CUdevice = 0;
    // SAFETY: ordinal < count.
    ck(
        unsafe { sys::cuDeviceGet(&mut dev, ordinal as c_int) },
        "cuDeviceGet",
    )?;
    Ok(dev)
}

/// One device attribute.
pub fn attribute(dev: CUdevice, a: CUdevice_attribute) -> Result<i32, BackendError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int for a valid device.
    ck(
        unsafe { sys::cuDeviceGetAttribute(&mut v, a, dev) },
        "cuDeviceGetAttribute",
    )?;
    Ok(v)
}

pub fn device_info(ordinal: usize) -> Result<CudaDeviceInfo, BackendError> {
    let dev = device(ordinal)?;
    let mut name = [0 as c_char; 256];
    // SAFETY: the buffer holds 256 bytes; the driver NUL-terminates.
    ck(
        unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as c_int, dev) },
        "cuDeviceGetName",
    )?;
    // SAFETY: NUL-terminated by the driver within the buffer.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let mut mem: usize = 0;
    // SAFETY: writes one usize.
    ck(
        unsafe { sys::cuDeviceTotalMem_v2(&mut mem, dev) },
        "cuDeviceTotalMem",
    )?;
    use CUdevice_attribute as A;
    let major = attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let vmm = attribute(
        dev,
        A::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
    )?;
    let mut u = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: writes the 16 bytes of `u` for a valid device.
    let uuid = (unsafe { sys::cuDeviceGetUuid(&mut u, dev) } == CUresult::CUDA_SUCCESS)
        .then(|| uuid_text(&u.bytes.map(|b| b as u8)));
    Ok(CudaDeviceInfo {
        ordinal,
        name,
        compute_capability: (major.max(0) as u32, minor.max(0) as u32),
        memory_bytes: mem as u64,
        vmm_supported: vmm != 0,
        uuid,
    })
}

/// nvidia-smi's form of a device UUID: `GPU-` and 8-4-4-4-12 hex digits.
pub fn uuid_text(b: &[u8; 16]) -> String {
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Driver version and every device, or why there are none: queried in a
/// short-lived child process, so that this one stays free to fork GPU
/// children ([`crate::backend::gpu::driver_guard`]).
pub fn list() -> Result<(String, Vec<CudaDeviceInfo>), BackendError> {
    crate::backend::gpu::driver_guard::in_child("cuda", list_here)
}

/// [`list`] in this process.
fn list_here() -> Result<(String, Vec<CudaDeviceInfo>), BackendError> {
    init()?;
    let version = driver_version()?;
    let devices = (0..device_count()?)
        .map(device_info)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((version, devices))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_read_like_nvidia_smi() {
        let b: [u8; 16] = std::array::from_fn(|i| (i * 17) as u8);
        assert_eq!(uuid_text(&b), "GPU-00112233-4455-6677-8899-aabbccddeeff");
    }

    #[test]
    fn absent_driver_is_unavailable_not_a_panic() {
        // SAFETY: dlopen probing only.
        if unsafe { sys::is_culib_present() } {
            eprintln!("libcuda present: the absent-driver path cannot be exercised here");
            return;
        }
        let err = init().unwrap_err();
        assert!(matches!(err, BackendError::Unavailable(_)));
        assert!(err.to_string().contains("libcuda.so"));
        assert!(matches!(list(), Err(BackendError::Unavailable(_))));
    }
}
