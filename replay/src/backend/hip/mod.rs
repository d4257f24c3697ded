//! HIP backend: replays AMDGPU code objects on an AMD GPU through the HIP
//! runtime, `libamdhip64.so` loaded at run time ([`ffi`]).
//!
//! Mirrors the CUDA backend: the arena is reserved with
//! `hipMemAddressReserve` at exactly the recorded address (the range is held
//! in this process with a PROT_NONE placeholder from before the runtime
//! initializes until right before the reservation), backed by `hipMemCreate`,
//! `hipMemMap` and `hipMemSetAccess`; the engine decodes the input straight
//! into pinned staging windows sent with asynchronous copies (the staging
//! shared with CUDA, [`crate::backend::staging`], over [`staging::HipQueue`]);
//! kernels are launched with `hipModuleLaunchKernel` and timed with events.
//!
//! No AMD GPU was available while writing this: the struct layouts and
//! values are taken from the HIP headers and unit-tested; the device paths
//! are untested on hardware.

pub mod ffi;
pub mod staging;

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Arc;
use std::time::Duration;

use self::ffi::*;
use self::staging::HipQueue;
use super::args::{KernelParams, LaunchDims};
use super::device_env::{
    amd_clock_frequency, encode_for_symbol, hardware_parallelism, refuse_rpc, DeviceEnv,
    AMDGPU_INIT_KERNEL, DEVICE_ENV_SYMBOL, RPC_CLIENT_SYMBOLS,
};
use super::placeholder::{occupants, round_range, Placeholder};
use super::reservation::{reservation_lengths, reserve_at_hint};
use super::staging::{ArenaUploads, Uploads};
use super::target::{self, DeviceTarget};
use super::wait::{poll_until, Poll};
use super::{Backend, BackendError, LaunchParams};

const STAGING_BUFFERS: usize = 3;
const STAGING_BYTES: usize = 32 << 20;

/// One HIP device as `rrstore devices` shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct HipDeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// `gcnArchName`, e.g. `gfx942:sramecc+:xnack-`.
    pub gcn_arch_name: String,
    pub memory_bytes: u64,
}

fn version_string(v: c_int) -> String {
    // HIP_VERSION = major * 10_000_000 + minor * 100_000 + patch.
    format!("{}.{}.{}", v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}

fn init(api: &HipApi) -> Result<usize, BackendError> {
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

fn device_info(api: &HipApi, ordinal: usize) -> Result<HipDeviceInfo, BackendError> {
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
    })
}

/// Runtime version and every AMD device, or why there are none.
pub fn list() -> Result<(String, Vec<HipDeviceInfo>), BackendError> {
    let api = HipApi::load()?;
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

/// The arena: reservation, physical allocation, mapping.
struct HipArena {
    api: Arc<HipApi>,
    start: u64,
    /// Bytes backed and mapped.
    len: usize,
    /// Bytes of address space reserved (>= len).
    reserved: usize,
    handle: Option<HipMemHandle>,
    mapped: bool,
}

impl Drop for HipArena {
    fn drop(&mut self) {
        let p = self.start as HipDevicePtr;
        // SAFETY: undo each successful step of `reserve`, in reverse order.
        unsafe {
            if self.mapped {
                (self.api.hipMemUnmap)(p, self.len);
            }
            if let Some(h) = self.handle.take() {
                (self.api.hipMemRelease)(h);
            }
            (self.api.hipMemAddressFree)(p, self.reserved);
        }
    }
}

pub struct HipBackend {
    api: Arc<HipApi>,
    info: HipDeviceInfo,
    runtime_version: String,
    stream: HipStream,
    start_ev: HipEvent,
    stop_ev: HipEvent,
    placeholder: Option<Placeholder>,
    /// The reservation the recorder made at the arena's address (`VAllocSize`).
    recorded_reservation: Option<u64>,
    arena: Option<HipArena>,
    uploads: Uploads<HipQueue>,
    module: Option<HipModule>,
    function: Option<HipFunction>,
    /// A launch timed out and may still run: teardown must not wait on it.
    wedged: bool,
}

impl HipBackend {
    /// Open AMD GPU `ordinal`. Pass the arena range when known: it is held
    /// in this process before the HIP runtime initializes.
    pub fn new(ordinal: usize, arena: Option<(u64, u64)>) -> Result<Self, BackendError> {
        let placeholder = match arena {
            Some((base, size)) => Some(Placeholder::new(base, size)?),
            None => None,
        };
        let api = Arc::new(HipApi::load()?);
        let n = init(&api)?;
        if ordinal >= n {
            return Err(BackendError::Unavailable(format!(
                "AMD GPU {ordinal} does not exist; this machine has {n}"
            )));
        }
        // SAFETY: valid ordinal.
        api.ck(
            unsafe { (api.hipSetDevice)(ordinal as c_int) },
            "hipSetDevice",
        )?;
        let info = device_info(&api, ordinal)?;
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        api.ck(
            unsafe { (api.hipRuntimeGetVersion)(&mut v) },
            "hipRuntimeGetVersion",
        )?;
        let mut b = HipBackend {
            api: api.clone(),
            info,
            runtime_version: version_string(v),
            stream: std::ptr::null_mut(),
            start_ev: std::ptr::null_mut(),
            stop_ev: std::ptr::null_mut(),
            placeholder,
            recorded_reservation: None,
            arena: None,
            uploads: Uploads::default(),
            module: None,
            function: None,
            wedged: false,
        };
        // SAFETY: each writes one handle on the current device.
        unsafe {
            api.ck(
                (api.hipStreamCreateWithFlags)(&mut b.stream, HIP_STREAM_NON_BLOCKING),
                "hipStreamCreateWithFlags",
            )?;
            api.ck(
                (api.hipEventCreateWithFlags)(&mut b.start_ev, HIP_EVENT_DEFAULT),
                "hipEventCreateWithFlags",
            )?;
            api.ck(
                (api.hipEventCreateWithFlags)(&mut b.stop_ev, HIP_EVENT_DEFAULT),
                "hipEventCreateWithFlags",
            )?;
        }
        Ok(b)
    }

    /// The reservation the recorder made at the arena's address
    /// (`VAllocSize`, when the recording has it): asked for first.
    pub fn with_recorded_reservation(mut self, reserved: Option<u64>) -> Self {
        self.recorded_reservation = reserved;
        self
    }

    pub fn info(&self) -> &HipDeviceInfo {
        &self.info
    }

    fn device_target(&self) -> DeviceTarget {
        DeviceTarget::from_gcn_arch_name(&self.info.gcn_arch_name)
    }

    /// A device attribute, `None` when the runtime does not know it.
    fn attribute(&self, attr: c_int) -> Option<i32> {
        let mut v: c_int = 0;
        // SAFETY: writes one int for a valid device.
        let e =
            unsafe { (self.api.hipDeviceGetAttribute)(&mut v, attr, self.info.ordinal as c_int) };
        (e == HIP_SUCCESS).then_some(v)
    }

    /// Device address and size of the global `name` of module `m`, or
    /// `None` when the image has none.
    fn global(&self, m: HipModule, name: &str) -> Result<Option<(u64, usize)>, BackendError> {
        let Ok(cname) = CString::new(name) else {
            return Ok(None);
        };
        let mut ptr: HipDevicePtr = std::ptr::null_mut();
        let mut bytes = 0usize;
        // SAFETY: valid module and name; writes two values.
        let e = unsafe { (self.api.hipModuleGetGlobal)(&mut ptr, &mut bytes, m, cname.as_ptr()) };
        match e {
            HIP_SUCCESS => Ok(Some((ptr as u64, bytes))),
            HIP_ERROR_NOT_FOUND | HIP_ERROR_INVALID_SYMBOL => Ok(None),
            _ => self.api.ck(e, "hipModuleGetGlobal").map(|()| None),
        }
    }

    /// What LLVM's AMDGPU plugin sets up after loading an image, in its
    /// order: the device environment, the refusal of images that need the
    /// host RPC server, then the image's constructors
    /// (`amdgcn.device.init`, one thread), all on the replay stream before
    /// the recorded globals and the launch.
    fn setup_device_state(&mut self, m: HipModule) -> Result<(), BackendError> {
        if let Some((ptr, size)) = self.global(m, DEVICE_ENV_SYMBOL)? {
            let mut n: c_int = 0;
            // SAFETY: writes one int.
            self.api.ck(
                unsafe { (self.api.hipGetDeviceCount)(&mut n) },
                "hipGetDeviceCount",
            )?;
            let env = DeviceEnv {
                num_devices: n.max(0) as u32,
                device_num: self.info.ordinal as u32,
                clock_frequency: amd_clock_frequency(self.attribute(HIP_ATTR_WALL_CLOCK_RATE)),
                hardware_parallelism: hardware_parallelism(
                    self.attribute(HIP_ATTR_MULTIPROCESSOR_COUNT).unwrap_or(0),
                    self.attribute(HIP_ATTR_MAX_THREADS_PER_MULTIPROCESSOR)
                        .unwrap_or(0),
                    self.attribute(HIP_ATTR_WARP_SIZE).unwrap_or(0),
                ),
                ..DeviceEnv::default()
            }
            .with_llvm_variables();
            let bytes = encode_for_symbol(&env, size as u64)?;
            self.uploads.write_device(ptr, &bytes)?;
        }
        for symbol in RPC_CLIENT_SYMBOLS {
            if self.global(m, symbol)?.is_some() {
                return Err(refuse_rpc(symbol));
            }
        }
        let name = CString::new(AMDGPU_INIT_KERNEL)
            .map_err(|_| BackendError::MissingKernel(AMDGPU_INIT_KERNEL.into()))?;
        let mut init: HipFunction = std::ptr::null_mut();
        // SAFETY: valid module, NUL-terminated name.
        let e = unsafe { (self.api.hipModuleGetFunction)(&mut init, m, name.as_ptr()) };
        if e == HIP_SUCCESS {
            // SAFETY: a kernel without arguments, one thread, on our stream
            // (after the environment's copy, before the globals' copies).
            let e = unsafe {
                (self.api.hipModuleLaunchKernel)(
                    init,
                    1,
                    1,
                    1,
                    1,
                    1,
                    1,
                    0,
                    self.stream,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            self.api
                .ck(e, "hipModuleLaunchKernel(amdgcn.device.init)")?;
        }
        Ok(())
    }
}

impl Backend for HipBackend {
    fn name(&self) -> &'static str {
        "hip"
    }

    fn device_description(&self) -> String {
        format!(
            "{} ({}, {} MiB), HIP runtime {}",
            self.info.name,
            self.info.gcn_arch_name,
            self.info.memory_bytes >> 20,
            self.runtime_version
        )
    }

    fn reserve(&mut self, base: u64, size: u64) -> Result<(), BackendError> {
        let api = self.api.clone();
        let prop = HipMemAllocationProp::device(self.info.ordinal as c_int);
        let mut gran = 0usize;
        // SAFETY: valid prop; writes one size_t.
        api.ck(
            unsafe {
                (api.hipMemGetAllocationGranularity)(
                    &mut gran,
                    &prop,
                    HIP_MEM_ALLOC_GRANULARITY_MINIMUM,
                )
            },
            "hipMemGetAllocationGranularity",
        )?;
        let reserve_err = |reason: String| BackendError::Reserve { base, size, reason };
        let (start, len) = round_range(base, size, gran.max(1) as u64)
            .ok_or_else(|| reserve_err("the range overflows the address space".into()))?;
        let len_us = usize::try_from(len)
            .map_err(|_| reserve_err("the range does not fit size_t".into()))?;
        if let Some(mut p) = self.placeholder.take() {
            p.release();
        }
        // Same order as CUDA: the recorder's own request, then the arena's
        // length, then larger ones (the hint is honoured for some sizes only).
        let lengths = reservation_lengths(len, self.recorded_reservation, gran.max(1) as u64);
        let landed = reserve_at_hint(
            start,
            &lengths,
            |vlen, hint| {
                let vlen = usize::try_from(vlen).map_err(|_| "larger than size_t".to_string())?;
                let mut got: HipDevicePtr = std::ptr::null_mut();
                // SAFETY: writes one pointer; the address is a hint.
                let e = unsafe {
                    (api.hipMemAddressReserve)(&mut got, vlen, 0, hint as HipDevicePtr, 0)
                };
                if e == HIP_SUCCESS {
                    Ok(got as u64)
                } else {
                    Err(api.describe(e))
                }
            },
            // SAFETY: frees a misplaced reservation just made (its length
            // fit size_t when it was made).
            |got, vlen| unsafe {
                (api.hipMemAddressFree)(got as HipDevicePtr, vlen as usize);
            },
        );
        let reserved = landed.map_err(|attempts| {
            reserve_err(format!(
                "the HIP runtime did not reserve the range at {start:#x} (attempts: {}); \
                 the range is in use: {}",
                attempts.join(", "),
                occupants(start, len)
            ))
        })?;
        let got = start as HipDevicePtr;
        let mut arena = HipArena {
            api: api.clone(),
            start,
            len: len_us,
            reserved: reserved as usize,
            handle: None,
            mapped: false,
        };
        let mut h: HipMemHandle = std::ptr::null_mut();
        // SAFETY: valid prop; writes one handle.
        let e = unsafe { (api.hipMemCreate)(&mut h, len_us, &prop, 0) };
        if e != HIP_SUCCESS {
            return Err(BackendError::Driver {
                op: "hipMemCreate".into(),
                reason: format!(
                    "cannot allocate {len} bytes of device memory for the arena: {}",
                    api.describe(e)
                ),
            });
        }
        arena.handle = Some(h);
        // SAFETY: our reservation, a handle of exactly len bytes.
        api.ck(
            unsafe { (api.hipMemMap)(got, len_us, 0, h, 0) },
            "hipMemMap",
        )?;
        arena.mapped = true;
        let desc = HipMemAccessDesc {
            location: prop.location,
            flags: HIP_MEM_ACCESS_FLAGS_PROT_READ_WRITE,
        };
        // SAFETY: the range is mapped; one descriptor.
        api.ck(
            unsafe { (api.hipMemSetAccess)(got, len_us, &desc, 1) },
            "hipMemSetAccess",
        )?;
        self.arena = Some(arena);
        let queue = HipQueue {
            api,
            stream: self.stream,
        };
        self.uploads.bind(ArenaUploads::new(
            queue,
            base,
            size,
            STAGING_BUFFERS,
            STAGING_BYTES,
        )?);
        Ok(())
    }

    fn upload(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        self.uploads.upload(offset, data)
    }

    fn staging_window(&mut self, max_len: usize) -> Result<Option<&mut [u8]>, BackendError> {
        self.uploads.window(max_len)
    }

    fn commit_staging(&mut self, offset: u64, len: usize) -> Result<(), BackendError> {
        self.uploads.commit(offset, len)
    }

    fn load_image(&mut self, image: &[u8], kernel: &str) -> Result<(), BackendError> {
        let api = self.api.clone();
        let image_target = rrstore_format::image::detect(&image[..image.len().min(4096)]);
        target::check(&image_target, &self.device_target())?;
        if let Some(m) = self.module.take() {
            self.function = None;
            // SAFETY: our module; nothing in flight.
            unsafe { (api.hipModuleUnload)(m) };
        }
        let mut m: HipModule = std::ptr::null_mut();
        // SAFETY: a complete code object in memory.
        let e = unsafe { (api.hipModuleLoadData)(&mut m, image.as_ptr() as *const c_void) };
        match e {
            HIP_SUCCESS => {}
            HIP_ERROR_NO_BINARY_FOR_GPU => {
                return Err(BackendError::TargetMismatch {
                    image: image_target.describe(),
                    device: self.device_target().describe(),
                })
            }
            _ => {
                return Err(BackendError::Image(format!(
                    "hipModuleLoadData: {}",
                    api.describe(e)
                )))
            }
        }
        self.module = Some(m);
        let name = CString::new(kernel).map_err(|_| BackendError::MissingKernel(kernel.into()))?;
        let mut f: HipFunction = std::ptr::null_mut();
        // SAFETY: valid module, NUL-terminated name.
        let e = unsafe { (api.hipModuleGetFunction)(&mut f, m, name.as_ptr()) };
        match e {
            HIP_SUCCESS => {}
            HIP_ERROR_NOT_FOUND | HIP_ERROR_INVALID_SYMBOL => {
                return Err(BackendError::MissingKernel(kernel.into()))
            }
            _ => api.ck(e, "hipModuleGetFunction")?,
        }
        self.function = Some(f);
        self.setup_device_state(m)
    }

    fn write_global(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError> {
        let api = self.api.clone();
        let m = self.module.ok_or_else(|| BackendError::Driver {
            op: "write_global".into(),
            reason: "no image loaded yet (load_image must come first)".into(),
        })?;
        let cname =
            CString::new(name).map_err(|_| BackendError::MissingGlobal { name: name.into() })?;
        let mut ptr: HipDevicePtr = std::ptr::null_mut();
        let mut bytes = 0usize;
        // SAFETY: valid module and name; writes two values.
        let e = unsafe { (api.hipModuleGetGlobal)(&mut ptr, &mut bytes, m, cname.as_ptr()) };
        match e {
            HIP_SUCCESS => {}
            HIP_ERROR_NOT_FOUND | HIP_ERROR_INVALID_SYMBOL => {
                return Err(BackendError::MissingGlobal { name: name.into() })
            }
            _ => api.ck(e, "hipModuleGetGlobal")?,
        }
        if bytes as u64 != data.len() as u64 {
            return Err(BackendError::GlobalSize {
                name: name.into(),
                recorded: data.len() as u64,
                actual: bytes as u64,
            });
        }
        // Asynchronous on the replay stream, ordered before the launch
        // (hipMemcpyHtoD uses the null stream, which the non-blocking
        // replay stream does not wait for).
        self.uploads.write_device(ptr as u64, data)
    }

    fn launch(&mut self, args: &[u64], params: &LaunchParams) -> Result<Duration, BackendError> {
        let api = self.api.clone();
        let f = self.function.ok_or_else(|| BackendError::Driver {
            op: "launch".into(),
            reason: "no kernel loaded yet (load_image must come first)".into(),
        })?;
        let dims = LaunchDims::from_params(params)?;
        self.uploads.settle()?;
        let mut kp = KernelParams::new(args);
        // SAFETY: valid handles; kernelParams points at one live u64 per
        // argument during the call.
        unsafe {
            api.ck(
                (api.hipEventRecord)(self.start_ev, self.stream),
                "hipEventRecord",
            )?;
            let e = (api.hipModuleLaunchKernel)(
                f,
                dims.grid,
                1,
                1,
                dims.block,
                1,
                1,
                dims.shared_memory,
                self.stream,
                kp.as_driver_ptr(),
                std::ptr::null_mut(),
            );
            api.ck(e, "hipModuleLaunchKernel")?;
            api.ck(
                (api.hipEventRecord)(self.stop_ev, self.stream),
                "hipEventRecord",
            )?;
            // Polled, not hipEventSynchronize: that would block past
            // --timeout on a kernel that never ends.
            let stop = self.stop_ev;
            let e = poll_until(params.timeout, || match (api.hipEventQuery)(stop) {
                HIP_ERROR_NOT_READY => Poll::Pending,
                e => Poll::Done(e),
            });
            let Some(e) = e else {
                self.wedged = true;
                return Err(BackendError::TimedOut(params.timeout.unwrap_or_default()));
            };
            if e != HIP_SUCCESS {
                return Err(BackendError::DeviceFault(api.describe(e)));
            }
        }
        let mut ms = 0f32;
        // SAFETY: both events completed.
        api.ck(
            unsafe { (api.hipEventElapsedTime)(&mut ms, self.start_ev, self.stop_ev) },
            "hipEventElapsedTime",
        )?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    fn download(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        let src = self.uploads.address(offset, dst.len(), "download")?;
        self.uploads.settle()?;
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: inside the mapped arena; dst is writable.
        self.api.ck(
            unsafe {
                (self.api.hipMemcpyDtoH)(
                    dst.as_mut_ptr() as *mut c_void,
                    src as HipDevicePtr,
                    dst.len(),
                )
            },
            "hipMemcpyDtoH",
        )
    }
}

impl Drop for HipBackend {
    fn drop(&mut self) {
        let api = self.api.clone();
        if self.wedged {
            // hipStreamSynchronize and the frees would wait for the kernel
            // that timed out; process exit reclaims everything.
            std::mem::forget(self.uploads.take());
            std::mem::forget(self.arena.take());
            return;
        }
        // SAFETY: teardown in reverse order of creation; errors ignored.
        unsafe {
            if !self.stream.is_null() {
                (api.hipStreamSynchronize)(self.stream);
            }
            drop(self.uploads.take());
            self.function = None;
            if let Some(m) = self.module.take() {
                (api.hipModuleUnload)(m);
            }
            self.arena = None;
            for ev in [self.stop_ev, self.start_ev] {
                if !ev.is_null() {
                    (api.hipEventDestroy)(ev);
                }
            }
            if !self.stream.is_null() {
                (api.hipStreamDestroy)(self.stream);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hip_version_numbers_are_decoded() {
        assert_eq!(version_string(60_342_134), "6.3.42134");
        assert_eq!(version_string(70_051_831), "7.0.51831");
    }

    #[test]
    fn absent_runtime_means_unavailable_for_backend_and_listing() {
        if HipApi::load().is_ok() {
            return;
        }
        assert!(matches!(list(), Err(BackendError::Unavailable(_))));
        assert!(matches!(
            HipBackend::new(0, None),
            Err(BackendError::Unavailable(_))
        ));
    }
}
