//! `libamdhip64.so` loaded at run time: the HIP functions the backend uses,
//! and the `#[repr(C)]` structs and enum values they take, checked against
//! the HIP 6.x/7.x headers (`hip/hip_runtime_api.h`, `amd_hip_vm`):
//!
//! * `hipMemAllocationProp`: `{ hipMemAllocationType type (u32);
//!   hipMemAllocationHandleType requestedHandleType (u32); hipMemLocation
//!   location { type (u32); int id }; void* win32HandleMetaData; struct {
//!   u8 compressionType; u8 gpuDirectRDMACapable; u16 usage } allocFlags }`
//!   = 32 bytes with trailing padding, like CUDA 12's `CUmemAllocationProp`.
//! * `hipMemAccessDesc`: `{ hipMemLocation location; hipMemAccessFlags flags }`.
//! * `hipDeviceProp_tR0600` is large and versioned; we read only
//!   `gcnArchName` (offset 1160, 256 bytes), validated (it must start with
//!   `gfx`), with a scan fallback.
//!
//! hip-sys is not used: it needs the ROCm headers to build and links
//! `-lamdhip64`, which would break every build on a machine without ROCm.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};

use libloading::Library;

use crate::backend::BackendError;

pub type HipError = c_int;
pub type HipDevicePtr = *mut c_void;
pub type HipStream = *mut c_void;
pub type HipEvent = *mut c_void;
pub type HipModule = *mut c_void;
pub type HipFunction = *mut c_void;
pub type HipMemHandle = *mut c_void;

pub const HIP_SUCCESS: HipError = 0;
pub const HIP_ERROR_NO_DEVICE: HipError = 100;
pub const HIP_ERROR_INVALID_IMAGE: HipError = 200;
pub const HIP_ERROR_NO_BINARY_FOR_GPU: HipError = 209;
pub const HIP_ERROR_INVALID_SYMBOL: HipError = 13;
pub const HIP_ERROR_NOT_FOUND: HipError = 500;
pub const HIP_ERROR_NOT_READY: HipError = 600;

/// `hipMemAllocationTypePinned`.
pub const HIP_MEM_ALLOCATION_TYPE_PINNED: c_uint = 1;
/// `hipMemHandleTypeNone`.
pub const HIP_MEM_HANDLE_TYPE_NONE: c_uint = 0;
/// `hipMemLocationTypeDevice`.
pub const HIP_MEM_LOCATION_TYPE_DEVICE: c_uint = 1;
/// `hipMemAccessFlagsProtReadWrite`.
pub const HIP_MEM_ACCESS_FLAGS_PROT_READ_WRITE: c_uint = 3;
/// `hipMemAllocationGranularityMinimum`.
pub const HIP_MEM_ALLOC_GRANULARITY_MINIMUM: c_uint = 0;
/// `hipStreamNonBlocking`.
pub const HIP_STREAM_NON_BLOCKING: c_uint = 1;
/// `hipEventDefault` / `hipEventDisableTiming`.
pub const HIP_EVENT_DEFAULT: c_uint = 0;
pub const HIP_EVENT_DISABLE_TIMING: c_uint = 2;
/// `hipDeviceAttribute_t` values (HIP 6.x/7.x `hip_runtime_api.h`).
pub const HIP_ATTR_MAX_THREADS_PER_MULTIPROCESSOR: c_int = 57;
pub const HIP_ATTR_MULTIPROCESSOR_COUNT: c_int = 63;
pub const HIP_ATTR_WARP_SIZE: c_int = 87;
/// kHz of the constant-rate counter `omp_get_wtime` reads on AMD GPUs.
pub const HIP_ATTR_WALL_CLOCK_RATE: c_int = 10017;
/// `hipHostMallocDefault`.
pub const HIP_HOST_MALLOC_DEFAULT: c_uint = 0;
/// `hipLimit_t::hipLimitStackSize`.
pub const HIP_LIMIT_STACK_SIZE: c_uint = 0;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HipMemLocation {
    pub type_: c_uint,
    pub id: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HipMemAllocFlags {
    pub compression_type: u8,
    pub gpu_direct_rdma_capable: u8,
    pub usage: u16,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HipMemAllocationProp {
    pub type_: c_uint,
    pub requested_handle_type: c_uint,
    pub location: HipMemLocation,
    pub win32_handle_meta_data: *mut c_void,
    pub alloc_flags: HipMemAllocFlags,
}

impl HipMemAllocationProp {
    /// Device memory on device `ordinal`, no exportable handle.
    pub fn device(ordinal: c_int) -> Self {
        HipMemAllocationProp {
            type_: HIP_MEM_ALLOCATION_TYPE_PINNED,
            requested_handle_type: HIP_MEM_HANDLE_TYPE_NONE,
            location: HipMemLocation {
                type_: HIP_MEM_LOCATION_TYPE_DEVICE,
                id: ordinal,
            },
            win32_handle_meta_data: std::ptr::null_mut(),
            alloc_flags: HipMemAllocFlags::default(),
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HipMemAccessDesc {
    pub location: HipMemLocation,
    pub flags: c_uint,
}

/// Offset and length of `gcnArchName` in `hipDeviceProp_tR0600`.
pub const GCN_ARCH_NAME_OFFSET: usize = 1160;
pub const GCN_ARCH_NAME_LEN: usize = 256;
/// Bytes handed to `hipGetDevicePropertiesR0600` (the struct is 1472 bytes
/// in HIP 6.x; generous room for later additions).
pub const DEVICE_PROP_BUFFER: usize = 8192;

/// Offset of `hipUUID uuid` (16 bytes) in `hipDeviceProp_tR0600`: right
/// after the 256-byte `name`, as in CUDA's `cudaDeviceProp`.
pub const UUID_OFFSET: usize = 256;

/// The device's UUID from a filled `hipDeviceProp_tR0600` buffer, in the
/// form `rocm-smi` prints (`GPU-` and the unique ID): ROCm fills the 16
/// bytes with the ASCII hex digits of the GPU's unique ID; other bytes are
/// written as CUDA's form (`GPU-xxxxxxxx-xxxx-...`). `None` when all zero
/// (the runtime did not say).
pub fn device_uuid(props: &[u8]) -> Option<String> {
    let b: &[u8; 16] = props.get(UUID_OFFSET..UUID_OFFSET + 16)?.try_into().ok()?;
    if b.iter().all(|&c| c == 0) {
        return None;
    }
    if b.iter().all(u8::is_ascii_hexdigit) {
        return Some(format!("GPU-{}", String::from_utf8_lossy(b)));
    }
    Some(crate::backend::gpu::cuda::driver::uuid_text(b))
}

/// Extract `gcnArchName` from a filled `hipDeviceProp_tR0600` buffer.
pub fn gcn_arch_name(props: &[u8]) -> Option<String> {
    let cstr = |b: &[u8]| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    if let Some(field) = props.get(GCN_ARCH_NAME_OFFSET..GCN_ARCH_NAME_OFFSET + GCN_ARCH_NAME_LEN) {
        let s = cstr(field);
        if s.starts_with("gfx") {
            return Some(s);
        }
    }
    // Layout differs from the one we know: find a NUL-preceded "gfx" string
    // after the 256-byte marketing name.
    let hay = props.get(256..)?;
    let pos = hay
        .windows(4)
        .position(|w| w[0] == 0 && &w[1..4] == b"gfx")?;
    Some(cstr(&hay[pos + 1..]))
}

macro_rules! hip_api {
    ($( $field:ident : fn($($arg:ty),*) -> $ret:ty ; )*) => {
        /// Function table of the loaded `libamdhip64`.
        #[allow(non_snake_case)]
        pub struct HipRuntime {
            $( pub $field: unsafe extern "C" fn($($arg),*) -> $ret, )*
            /// Where the library was loaded from.
            pub path: String,
            /// Never closed: see [`open_resident`].
            _lib: ManuallyDrop<Library>,
        }

        impl HipRuntime {
            fn from_library(
                lib: ManuallyDrop<Library>,
                path: String,
            ) -> Result<Self, BackendError> {
                Ok(HipRuntime {
                    $( $field: {
                        // SAFETY: the symbol has this C signature in HIP 6.x/7.x
                        // (hip_runtime_api.h); the pointer stays valid while
                        // `_lib` is alive, which this struct guarantees.
                        let sym = unsafe {
                            lib.get::<unsafe extern "C" fn($($arg),*) -> $ret>(
                                concat!(stringify!($field), "\0").as_bytes(),
                            )
                        };
                        match sym {
                            Ok(s) => *s,
                            Err(e) => return Err(BackendError::Unavailable(format!(
                                "{path} lacks {}: {e}; {OLD_RUNTIME}",
                                stringify!($field)
                            ))),
                        }
                    }, )*
                    path,
                    _lib: lib,
                })
            }
        }
    };
}

hip_api! {
    hipInit: fn(c_uint) -> HipError;
    hipGetErrorString: fn(HipError) -> *const c_char;
    hipGetErrorName: fn(HipError) -> *const c_char;
    hipRuntimeGetVersion: fn(*mut c_int) -> HipError;
    hipDriverGetVersion: fn(*mut c_int) -> HipError;
    hipGetDeviceCount: fn(*mut c_int) -> HipError;
    hipSetDevice: fn(c_int) -> HipError;
    hipDeviceGetName: fn(*mut c_char, c_int, c_int) -> HipError;
    hipDeviceTotalMem: fn(*mut usize, c_int) -> HipError;
    hipDeviceGetAttribute: fn(*mut c_int, c_int, c_int) -> HipError;
    hipDeviceSetLimit: fn(c_uint, usize) -> HipError;
    hipGetDevicePropertiesR0600: fn(*mut c_void, c_int) -> HipError;
    hipMemGetAllocationGranularity: fn(*mut usize, *const HipMemAllocationProp, c_uint) -> HipError;
    hipMemAddressReserve: fn(*mut HipDevicePtr, usize, usize, HipDevicePtr, c_ulonglong) -> HipError;
    hipMemAddressFree: fn(HipDevicePtr, usize) -> HipError;
    hipMemCreate: fn(*mut HipMemHandle, usize, *const HipMemAllocationProp, c_ulonglong) -> HipError;
    hipMemRelease: fn(HipMemHandle) -> HipError;
    hipMemMap: fn(HipDevicePtr, usize, usize, HipMemHandle, c_ulonglong) -> HipError;
    hipMemUnmap: fn(HipDevicePtr, usize) -> HipError;
    hipMemSetAccess: fn(HipDevicePtr, usize, *const HipMemAccessDesc, usize) -> HipError;
    hipHostMalloc: fn(*mut *mut c_void, usize, c_uint) -> HipError;
    hipHostFree: fn(*mut c_void) -> HipError;
    hipMemcpyHtoDAsync: fn(HipDevicePtr, *const c_void, usize, HipStream) -> HipError;
    hipMemcpyHtoD: fn(HipDevicePtr, *const c_void, usize) -> HipError;
    hipMemcpyDtoH: fn(*mut c_void, HipDevicePtr, usize) -> HipError;
    hipMalloc: fn(*mut HipDevicePtr, usize) -> HipError;
    hipFree: fn(HipDevicePtr) -> HipError;
    hipStreamCreateWithFlags: fn(*mut HipStream, c_uint) -> HipError;
    hipStreamSynchronize: fn(HipStream) -> HipError;
    hipStreamDestroy: fn(HipStream) -> HipError;
    hipEventCreateWithFlags: fn(*mut HipEvent, c_uint) -> HipError;
    hipEventRecord: fn(HipEvent, HipStream) -> HipError;
    hipEventSynchronize: fn(HipEvent) -> HipError;
    hipEventQuery: fn(HipEvent) -> HipError;
    hipEventElapsedTime: fn(*mut f32, HipEvent, HipEvent) -> HipError;
    hipEventDestroy: fn(HipEvent) -> HipError;
    hipModuleLoadData: fn(*mut HipModule, *const c_void) -> HipError;
    hipModuleUnload: fn(HipModule) -> HipError;
    hipModuleGetFunction: fn(*mut HipFunction, HipModule, *const c_char) -> HipError;
    hipModuleGetGlobal: fn(*mut HipDevicePtr, *mut usize, HipModule, *const c_char) -> HipError;
    hipModuleLaunchKernel: fn(HipFunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, HipStream, *mut *mut c_void, *mut *mut c_void) -> HipError;
}

/// Open a library that stays loaded until the process exits, whatever is
/// dropped: the HIP runtime starts threads (ROCr's signal and interrupt
/// handlers) that keep running in its code after the last HIP call, so
/// `dlclose` on it could unmap code those threads execute. cudarc never
/// unloads `libcuda` for the same reason.
pub fn open_resident(path: &Path) -> Result<ManuallyDrop<Library>, libloading::Error> {
    // SAFETY: loading the HIP runtime runs its initializers, which is what
    // using it requires.
    unsafe { Library::new(path) }.map(ManuallyDrop::new)
}

/// Names tried, in order, for the HIP runtime.
pub fn candidates() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ["libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Some(root) = std::env::var_os("ROCM_PATH") {
        v.push(PathBuf::from(root).join("lib/libamdhip64.so"));
    }
    v.push(PathBuf::from("/opt/rocm/lib/libamdhip64.so"));
    v
}

/// What to tell the user when the HIP runtime is missing.
pub const MISSING_RUNTIME: &str = "the HIP backend needs the ROCm HIP runtime libamdhip64.so \
of ROCm 6.0 or newer (tried libamdhip64.so, .so.7, .so.6, $ROCM_PATH/lib and /opt/rocm/lib), which \
is not installed here: install AMD's ROCm 6.0 or newer (AMD's repository repo.radeon.com, package \
hip-runtime-amd; check with `cat /opt/rocm/.info/version`) on a machine with an AMD GPU, or replay on \
another backend (--backend host|cuda). Debian 12's libamdhip64-5 is HIP 5.2, which lacks the \
R0600 entry points (hipGetDevicePropertiesR0600) the backend uses";

/// The hint when a loaded runtime lacks an entry point (an older HIP).
pub const OLD_RUNTIME: &str = "the backend needs HIP from ROCm 6.0 or newer (AMD's repository \
repo.radeon.com, package hip-runtime-amd; `cat /opt/rocm/.info/version` says which is installed); \
Debian 12's libamdhip64-5 is HIP 5.2, which lacks it: set ROCM_PATH or LD_LIBRARY_PATH to a \
ROCm 6+ installation";

impl HipRuntime {
    /// Load the first candidate that opens and resolve every function.
    pub fn load() -> Result<Self, BackendError> {
        for path in candidates() {
            if let Ok(lib) = open_resident(&path) {
                return HipRuntime::from_library(lib, path.display().to_string());
            }
        }
        Err(BackendError::Unavailable(MISSING_RUNTIME.into()))
    }

    /// `hipErrorX (description)`.
    pub fn describe(&self, e: HipError) -> String {
        let s = |p: *const c_char| {
            if p.is_null() {
                None
            } else {
                // SAFETY: HIP returns static NUL-terminated strings.
                Some(
                    unsafe { std::ffi::CStr::from_ptr(p) }
                        .to_string_lossy()
                        .into_owned(),
                )
            }
        };
        // SAFETY: both only look up static strings.
        let (n, t) = unsafe { (s((self.hipGetErrorName)(e)), s((self.hipGetErrorString)(e))) };
        match (n, t) {
            (Some(n), Some(t)) => format!("{n} ({t})"),
            (Some(n), None) => n,
            _ => format!("HIP error {e}"),
        }
    }

    /// `Ok` or [`BackendError::Driver`] naming the call.
    pub fn ck(&self, e: HipError, op: &str) -> Result<(), BackendError> {
        if e == HIP_SUCCESS {
            Ok(())
        } else {
            Err(BackendError::Driver {
                op: op.into(),
                reason: self.describe(e),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hints_name_rocm_6_not_debians_hip_5() {
        // Debian 12's libamdhip64-5/-dev are HIP 5.2: no R0600 entry points.
        assert!(
            !MISSING_RUNTIME.contains("libamdhip64-dev"),
            "{MISSING_RUNTIME}"
        );
        for hint in [MISSING_RUNTIME, OLD_RUNTIME] {
            assert!(hint.contains("ROCm 6.0 or newer") && hint.contains(".info/version"));
            assert!(hint.contains("HIP 5.2"), "{hint}");
        }
    }
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn struct_layouts_match_the_hip_headers() {
        assert_eq!(size_of::<HipMemLocation>(), 8);
        assert_eq!(size_of::<HipMemAllocFlags>(), 4);
        assert_eq!(offset_of!(HipMemAllocationProp, type_), 0);
        assert_eq!(offset_of!(HipMemAllocationProp, requested_handle_type), 4);
        assert_eq!(offset_of!(HipMemAllocationProp, location), 8);
        assert_eq!(offset_of!(HipMemAllocationProp, win32_handle_meta_data), 16);
        assert_eq!(offset_of!(HipMemAllocationProp, alloc_flags), 24);
        assert_eq!(size_of::<HipMemAllocationProp>(), 32);
        assert_eq!(align_of::<HipMemAllocationProp>(), 8);
        assert_eq!(size_of::<HipMemAccessDesc>(), 12);
        assert_eq!(offset_of!(HipMemAccessDesc, flags), 8);
        let p = HipMemAllocationProp::device(3);
        assert_eq!((p.type_, p.location.type_, p.location.id), (1, 1, 3));
    }

    /// `tests/gpu/hip_layouts.c` checks these values against a machine's
    /// HIP headers at compile time (`scripts/hip-check.sh`, the first step
    /// of docs/gpu.md's AMD check list): its CHECK lines and the constants
    /// here must say the same, or the check would prove nothing.
    #[test]
    fn the_c_layout_check_lists_every_constant() {
        let c = include_str!("../../../../../tests/gpu/hip_layouts.c");
        let lines: Vec<&str> = c
            .lines()
            .filter_map(|l| l.strip_prefix("CHECK(")?.strip_suffix(");"))
            .collect();
        let expect: Vec<(&str, i64)> = vec![
            ("hipSuccess", HIP_SUCCESS.into()),
            ("hipErrorNoDevice", HIP_ERROR_NO_DEVICE.into()),
            ("hipErrorInvalidImage", HIP_ERROR_INVALID_IMAGE.into()),
            ("hipErrorNoBinaryForGpu", HIP_ERROR_NO_BINARY_FOR_GPU.into()),
            ("hipErrorInvalidSymbol", HIP_ERROR_INVALID_SYMBOL.into()),
            ("hipErrorNotFound", HIP_ERROR_NOT_FOUND.into()),
            ("hipErrorNotReady", HIP_ERROR_NOT_READY.into()),
            (
                "hipMemAllocationTypePinned",
                HIP_MEM_ALLOCATION_TYPE_PINNED.into(),
            ),
            ("hipMemHandleTypeNone", HIP_MEM_HANDLE_TYPE_NONE.into()),
            (
                "hipMemLocationTypeDevice",
                HIP_MEM_LOCATION_TYPE_DEVICE.into(),
            ),
            (
                "hipMemAccessFlagsProtReadWrite",
                HIP_MEM_ACCESS_FLAGS_PROT_READ_WRITE.into(),
            ),
            (
                "hipMemAllocationGranularityMinimum",
                HIP_MEM_ALLOC_GRANULARITY_MINIMUM.into(),
            ),
            ("hipStreamNonBlocking", HIP_STREAM_NON_BLOCKING.into()),
            ("hipEventDefault", HIP_EVENT_DEFAULT.into()),
            ("hipEventDisableTiming", HIP_EVENT_DISABLE_TIMING.into()),
            (
                "hipDeviceAttributeMaxThreadsPerMultiProcessor",
                HIP_ATTR_MAX_THREADS_PER_MULTIPROCESSOR.into(),
            ),
            (
                "hipDeviceAttributeMultiprocessorCount",
                HIP_ATTR_MULTIPROCESSOR_COUNT.into(),
            ),
            ("hipDeviceAttributeWarpSize", HIP_ATTR_WARP_SIZE.into()),
            (
                "hipDeviceAttributeWallClockRate",
                HIP_ATTR_WALL_CLOCK_RATE.into(),
            ),
            ("hipHostMallocDefault", HIP_HOST_MALLOC_DEFAULT.into()),
            ("hipLimitStackSize", HIP_LIMIT_STACK_SIZE.into()),
            ("sizeof(hipMemLocation)", size_of::<HipMemLocation>() as i64),
            (
                "sizeof(((hipMemAllocationProp *)0)->allocFlags)",
                size_of::<HipMemAllocFlags>() as i64,
            ),
            (
                "offsetof(hipMemAllocationProp, type)",
                offset_of!(HipMemAllocationProp, type_) as i64,
            ),
            (
                "offsetof(hipMemAllocationProp, requestedHandleType)",
                offset_of!(HipMemAllocationProp, requested_handle_type) as i64,
            ),
            (
                "offsetof(hipMemAllocationProp, location)",
                offset_of!(HipMemAllocationProp, location) as i64,
            ),
            (
                "offsetof(hipMemAllocationProp, win32HandleMetaData)",
                offset_of!(HipMemAllocationProp, win32_handle_meta_data) as i64,
            ),
            (
                "offsetof(hipMemAllocationProp, allocFlags)",
                offset_of!(HipMemAllocationProp, alloc_flags) as i64,
            ),
            (
                "sizeof(hipMemAllocationProp)",
                size_of::<HipMemAllocationProp>() as i64,
            ),
            (
                "sizeof(hipMemAccessDesc)",
                size_of::<HipMemAccessDesc>() as i64,
            ),
            (
                "offsetof(hipMemAccessDesc, flags)",
                offset_of!(HipMemAccessDesc, flags) as i64,
            ),
            ("offsetof(hipDeviceProp_tR0600, uuid)", UUID_OFFSET as i64),
            (
                "offsetof(hipDeviceProp_tR0600, gcnArchName)",
                GCN_ARCH_NAME_OFFSET as i64,
            ),
            (
                "sizeof(((hipDeviceProp_tR0600 *)0)->gcnArchName)",
                GCN_ARCH_NAME_LEN as i64,
            ),
        ];
        for (name, value) in &expect {
            let line = format!("{name}, {value}");
            assert!(
                lines.contains(&line.as_str()),
                "hip_layouts.c lacks CHECK({line})"
            );
        }
        let bound = format!("sizeof(hipDeviceProp_tR0600) <= {DEVICE_PROP_BUFFER}, 1");
        assert!(
            lines.contains(&bound.as_str()),
            "hip_layouts.c lacks CHECK({bound})"
        );
        assert_eq!(
            lines.len(),
            expect.len() + 1,
            "a CHECK line with no Rust constant beside it"
        );
    }

    #[test]
    fn gcn_arch_name_is_read_at_its_offset_or_found() {
        let mut props = vec![0u8; DEVICE_PROP_BUFFER];
        props[..19].copy_from_slice(b"AMD Instinct MI300X");
        let name = b"gfx942:sramecc+:xnack-";
        props[GCN_ARCH_NAME_OFFSET..GCN_ARCH_NAME_OFFSET + name.len()].copy_from_slice(name);
        assert_eq!(gcn_arch_name(&props).unwrap(), "gfx942:sramecc+:xnack-");
        // Shifted layout: found by the scan.
        let mut shifted = vec![0u8; DEVICE_PROP_BUFFER];
        shifted[1300..1306].copy_from_slice(b"gfx90a");
        assert_eq!(gcn_arch_name(&shifted).unwrap(), "gfx90a");
        assert_eq!(gcn_arch_name(&[0u8; 2000]), None);
    }

    #[test]
    fn uuids_are_read_after_the_name_like_rocm_smi_prints_them() {
        let mut props = vec![0u8; 2000];
        assert_eq!(device_uuid(&props), None, "all zero: unknown");
        props[UUID_OFFSET..UUID_OFFSET + 16].copy_from_slice(b"5e8a1c0b2d3f4a69");
        assert_eq!(device_uuid(&props).unwrap(), "GPU-5e8a1c0b2d3f4a69");
        let raw: Vec<u8> = (0..16u8).map(|i| i * 17).collect();
        props[UUID_OFFSET..UUID_OFFSET + 16].copy_from_slice(&raw);
        assert_eq!(
            device_uuid(&props).unwrap(),
            "GPU-00112233-4455-6677-8899-aabbccddeeff"
        );
        assert_eq!(device_uuid(&props[..200]), None, "a short buffer");
    }

    /// Whether `name` is loaded in this process (dlopen with RTLD_NOLOAD
    /// opens nothing new).
    fn loaded(name: &str) -> bool {
        let c = std::ffi::CString::new(name).unwrap();
        // SAFETY: RTLD_NOLOAD only looks the name up.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if h.is_null() {
            return false;
        }
        // SAFETY: drops the reference the lookup just took.
        unsafe { libc::dlclose(h) };
        true
    }

    #[test]
    fn the_runtime_library_is_never_unloaded() {
        // Two libraries this test binary does not link, standing in for
        // libamdhip64 (absent here): one opened the old way, one resident.
        let mut spare = [
            "libz.so.1",
            "libexpat.so.1",
            "liblzma.so.5",
            "libbz2.so.1.0",
        ]
        .into_iter()
        // SAFETY: system libraries without unusual initializers.
        .filter(|n| !loaded(n) && unsafe { Library::new(n) }.is_ok());
        let (Some(plain), Some(resident)) = (spare.next(), spare.next()) else {
            eprintln!("no two spare system libraries to load: cannot check unloading here");
            return;
        };
        // The old holder, a plain Library: dropping it unloads.
        // SAFETY: a system library without unusual initializers.
        drop(unsafe { Library::new(plain) }.unwrap());
        assert!(!loaded(plain), "a dropped Library is dlclosed");
        let api_like = open_resident(Path::new(resident)).unwrap();
        // What dropping a HipRuntime does to its library: nothing.
        let _ = api_like;
        assert!(loaded(resident), "{resident} must stay loaded");
    }

    #[test]
    fn absent_runtime_is_unavailable_with_the_names_tried() {
        if candidates()
            .iter()
            // SAFETY: dlopen probing only.
            .any(|p| unsafe { Library::new(p) }.is_ok())
        {
            eprintln!("HIP runtime present: the absent-runtime path cannot be exercised here");
            return;
        }
        let err = HipRuntime::load().err().expect("no HIP runtime here");
        assert!(matches!(err, BackendError::Unavailable(_)));
        let msg = err.to_string();
        assert!(
            msg.contains("libamdhip64.so") && msg.contains(".so.6") && msg.contains("ROCm"),
            "{msg}"
        );
    }
}
