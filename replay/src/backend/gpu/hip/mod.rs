//! HIP backend: replays AMDGPU code objects on an AMD GPU through the HIP
//! runtime, `libamdhip64.so` loaded at run time ([`ffi`]). The replay
//! sequence is the generic [`GpuBackend`]'s; this module is the HIP
//! [`DeviceApi`]: the arena with `hipMemAddressReserve`, `hipMemCreate`,
//! `hipMemMap` and `hipMemSetAccess` (the range held in this process with a
//! PROT_NONE placeholder from before the runtime initializes until right
//! before the reservation), pinned staging with `hipHostMalloc` and
//! `hipMemcpyHtoDAsync`, `hipModuleLaunchKernel`, events, on one
//! non-blocking stream. The runtime library is never unloaded
//! ([`ffi::open_resident`]).
//!
//! No AMD GPU was available while writing this: the struct layouts and
//! values are taken from the HIP headers and unit-tested; the device paths
//! are untested on hardware.

pub mod device;
pub mod ffi;

use std::ffi::{c_int, c_void, CStr};

use self::device::{device_info, init, version_string};
pub use self::device::{list, HipDeviceInfo};
use self::ffi::*;
use super::args::LaunchDims;
use super::device_env::{amd_clock_frequency, hardware_parallelism, DeviceEnv};
use super::heap::DeviceHeap;
use super::target::DeviceTarget;
use super::wait::Poll;
use super::{ApiResult, ArgPtrs, DeviceApi, GpuBackend, Handle, LoadFailure};
use crate::backend::BackendError;

/// The HIP backend.
pub type HipBackend = GpuBackend<HipApi>;

/// One opened AMD GPU and the replay stream.
pub struct HipApi {
    rt: HipRuntime,
    info: HipDeviceInfo,
    runtime_version: String,
    stream: HipStream,
}

impl HipApi {
    pub fn info(&self) -> &HipDeviceInfo {
        &self.info
    }

    fn ck(&self, e: HipError, op: &str) -> ApiResult<()> {
        self.rt.ck(e, op)
    }

    fn prop(&self) -> HipMemAllocationProp {
        HipMemAllocationProp::device(self.info.ordinal as c_int)
    }

    /// A device attribute, `None` when the runtime does not know it.
    fn attribute(&self, attr: c_int) -> Option<i32> {
        let mut v: c_int = 0;
        // SAFETY: writes one int for a valid device.
        let e =
            unsafe { (self.rt.hipDeviceGetAttribute)(&mut v, attr, self.info.ordinal as c_int) };
        (e == HIP_SUCCESS).then_some(v)
    }

    /// The module lookups' "not there" results.
    fn absent(e: HipError) -> bool {
        e == HIP_ERROR_NOT_FOUND || e == HIP_ERROR_INVALID_SYMBOL
    }
}

impl DeviceApi for HipApi {
    type Module = Handle<HipModule>;
    type Function = Handle<HipFunction>;
    type Event = Handle<HipEvent>;
    type Memory = Handle<HipMemHandle>;

    const NAME: &'static str = "hip";
    const RUNTIME: &'static str = "the HIP runtime";
    const HOLDS_PLACEHOLDER: bool = true;
    // LLVM's AMDGPU plugin hands the device runtime a pool it allocates.
    const HEAP: DeviceHeap = DeviceHeap::Pool;
    const STAGING_BYTES: usize = 32 << 20;

    fn open(device: u32) -> ApiResult<Self> {
        let rt = HipRuntime::load()?;
        let n = init(&rt)?;
        let ordinal = device as usize;
        if ordinal >= n {
            return Err(BackendError::Unavailable(format!(
                "AMD GPU {ordinal} does not exist; this machine has {n}"
            )));
        }
        // SAFETY: valid ordinal.
        rt.ck(
            unsafe { (rt.hipSetDevice)(ordinal as c_int) },
            "hipSetDevice",
        )?;
        let info = device_info(&rt, ordinal)?;
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        rt.ck(
            unsafe { (rt.hipRuntimeGetVersion)(&mut v) },
            "hipRuntimeGetVersion",
        )?;
        let mut stream: HipStream = std::ptr::null_mut();
        // SAFETY: writes one handle on the current device.
        rt.ck(
            unsafe { (rt.hipStreamCreateWithFlags)(&mut stream, HIP_STREAM_NON_BLOCKING) },
            "hipStreamCreateWithFlags",
        )?;
        Ok(HipApi {
            rt,
            info,
            runtime_version: version_string(v),
            stream,
        })
    }

    fn description(&self) -> String {
        format!(
            "{} ({}, {} MiB), HIP runtime {}",
            self.info.name,
            self.info.gcn_arch_name,
            self.info.memory_bytes >> 20,
            self.runtime_version
        )
    }

    fn uuid(&self) -> Option<String> {
        self.info.uuid.clone()
    }

    fn target(&self) -> DeviceTarget {
        DeviceTarget::from_gcn_arch_name(&self.info.gcn_arch_name)
    }

    fn make_current(&self) -> ApiResult<()> {
        // hipSetDevice in `open`: the backend runs on one thread.
        Ok(())
    }

    fn device_env(&self) -> ApiResult<DeviceEnv> {
        let mut n: c_int = 0;
        // SAFETY: writes one int.
        self.ck(
            unsafe { (self.rt.hipGetDeviceCount)(&mut n) },
            "hipGetDeviceCount",
        )?;
        Ok(DeviceEnv {
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
        })
    }

    fn set_stack_limit(&self, bytes: u64) -> ApiResult<()> {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        // SAFETY: sets one limit of the current device (hipSetDevice in `open`).
        self.ck(
            unsafe { (self.rt.hipDeviceSetLimit)(HIP_LIMIT_STACK_SIZE, bytes) },
            "hipDeviceSetLimit(hipLimitStackSize) for LIBOMPTARGET_STACK_SIZE",
        )
    }

    fn granularity(&self) -> ApiResult<u64> {
        let prop = self.prop();
        let mut gran = 0usize;
        // SAFETY: valid prop; writes one size_t.
        self.ck(
            unsafe {
                (self.rt.hipMemGetAllocationGranularity)(
                    &mut gran,
                    &prop,
                    HIP_MEM_ALLOC_GRANULARITY_MINIMUM,
                )
            },
            "hipMemGetAllocationGranularity",
        )?;
        Ok(gran as u64)
    }

    fn reserve_va(&self, len: u64, hint: u64) -> Result<u64, String> {
        let len = usize::try_from(len).map_err(|_| "larger than size_t".to_string())?;
        let mut got: HipDevicePtr = std::ptr::null_mut();
        // SAFETY: writes one pointer; the address is a hint.
        let e =
            unsafe { (self.rt.hipMemAddressReserve)(&mut got, len, 0, hint as HipDevicePtr, 0) };
        if e == HIP_SUCCESS {
            Ok(got as u64)
        } else {
            Err(self.rt.describe(e))
        }
    }

    unsafe fn free_va(&self, at: u64, len: u64) {
        // SAFETY: per the trait contract; its length fit size_t when made.
        unsafe { (self.rt.hipMemAddressFree)(at as HipDevicePtr, len as usize) };
    }

    fn create_memory(&self, len: u64) -> ApiResult<Self::Memory> {
        let prop = self.prop();
        let mut h: HipMemHandle = std::ptr::null_mut();
        // SAFETY: valid prop; writes one handle.
        let e = unsafe { (self.rt.hipMemCreate)(&mut h, len as usize, &prop, 0) };
        if e != HIP_SUCCESS {
            return Err(BackendError::Driver {
                op: "hipMemCreate".into(),
                reason: format!(
                    "cannot allocate {len} bytes of device memory for the arena: {}",
                    self.rt.describe(e)
                ),
            });
        }
        Ok(Handle(h))
    }

    fn map_memory(&self, start: u64, len: u64, mem: &Self::Memory) -> ApiResult<()> {
        let (at, len) = (start as HipDevicePtr, len as usize);
        // SAFETY: our reservation, a handle of exactly len bytes.
        self.ck(
            unsafe { (self.rt.hipMemMap)(at, len, 0, mem.0, 0) },
            "hipMemMap",
        )?;
        let desc = HipMemAccessDesc {
            location: self.prop().location,
            flags: HIP_MEM_ACCESS_FLAGS_PROT_READ_WRITE,
        };
        // SAFETY: the range is mapped; one descriptor.
        self.ck(
            unsafe { (self.rt.hipMemSetAccess)(at, len, &desc, 1) },
            "hipMemSetAccess",
        )
    }

    unsafe fn unmap_memory(&self, start: u64, len: u64) {
        // SAFETY: per the trait contract.
        unsafe { (self.rt.hipMemUnmap)(start as HipDevicePtr, len as usize) };
    }

    unsafe fn release_memory(&self, mem: Self::Memory) {
        // SAFETY: per the trait contract.
        unsafe { (self.rt.hipMemRelease)(mem.0) };
    }

    fn alloc_device(&self, len: usize) -> ApiResult<u64> {
        let mut p: HipDevicePtr = std::ptr::null_mut();
        // SAFETY: writes one device pointer.
        self.ck(unsafe { (self.rt.hipMalloc)(&mut p, len) }, "hipMalloc")?;
        Ok(p as u64)
    }

    unsafe fn free_device(&self, ptr: u64) {
        // SAFETY: per the trait contract.
        unsafe { (self.rt.hipFree)(ptr as HipDevicePtr) };
    }

    fn alloc_pinned(&self, len: usize) -> ApiResult<*mut u8> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one pointer to `len` pinned bytes.
        self.ck(
            unsafe { (self.rt.hipHostMalloc)(&mut p, len, HIP_HOST_MALLOC_DEFAULT) },
            "hipHostMalloc",
        )?;
        Ok(p as *mut u8)
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        if !ptr.is_null() {
            // SAFETY: per the trait contract.
            unsafe { (self.rt.hipHostFree)(ptr as *mut c_void) };
        }
    }

    fn create_event(&self, timing: bool) -> ApiResult<Self::Event> {
        let flags = if timing {
            HIP_EVENT_DEFAULT
        } else {
            HIP_EVENT_DISABLE_TIMING
        };
        let mut ev: HipEvent = std::ptr::null_mut();
        // SAFETY: writes one event handle.
        self.ck(
            unsafe { (self.rt.hipEventCreateWithFlags)(&mut ev, flags) },
            "hipEventCreateWithFlags",
        )?;
        Ok(Handle(ev))
    }

    unsafe fn destroy_event(&self, ev: Self::Event) {
        if !ev.0.is_null() {
            // SAFETY: per the trait contract.
            unsafe { (self.rt.hipEventDestroy)(ev.0) };
        }
    }

    unsafe fn copy_htod_async(&self, dst: u64, src: *const u8, len: usize) -> ApiResult<()> {
        // SAFETY: per the trait contract: `src` is pinned and unchanged
        // until a later event completes; `dst` is mapped device memory.
        let e = unsafe {
            (self.rt.hipMemcpyHtoDAsync)(
                dst as HipDevicePtr,
                src as *const c_void,
                len,
                self.stream,
            )
        };
        self.ck(e, "hipMemcpyHtoDAsync")
    }

    fn copy_dtoh(&self, dst: &mut [u8], src: u64) -> ApiResult<()> {
        // SAFETY: the caller checked the source range; dst is writable.
        let e = unsafe {
            (self.rt.hipMemcpyDtoH)(
                dst.as_mut_ptr() as *mut c_void,
                src as HipDevicePtr,
                dst.len(),
            )
        };
        self.ck(e, "hipMemcpyDtoH")
    }

    unsafe fn record_event(&self, ev: Self::Event) -> ApiResult<()> {
        // SAFETY: per the trait contract; our stream.
        self.ck(
            unsafe { (self.rt.hipEventRecord)(ev.0, self.stream) },
            "hipEventRecord",
        )
    }

    unsafe fn wait_event(&self, ev: Self::Event) -> ApiResult<()> {
        // SAFETY: per the trait contract.
        self.ck(
            unsafe { (self.rt.hipEventSynchronize)(ev.0) },
            "hipEventSynchronize",
        )
    }

    fn query_event(&self, ev: Self::Event) -> Poll<Result<(), String>> {
        // SAFETY: a live event of ours.
        match unsafe { (self.rt.hipEventQuery)(ev.0) } {
            HIP_ERROR_NOT_READY => Poll::Pending,
            HIP_SUCCESS => Poll::Done(Ok(())),
            e => Poll::Done(Err(self.rt.describe(e))),
        }
    }

    fn elapsed_ms(&self, start: Self::Event, stop: Self::Event) -> ApiResult<f32> {
        let mut ms = 0f32;
        // SAFETY: both events completed.
        self.ck(
            unsafe { (self.rt.hipEventElapsedTime)(&mut ms, start.0, stop.0) },
            "hipEventElapsedTime",
        )?;
        Ok(ms)
    }

    fn sync(&self) -> Result<(), String> {
        // SAFETY: our stream.
        match unsafe { (self.rt.hipStreamSynchronize)(self.stream) } {
            HIP_SUCCESS => Ok(()),
            e => Err(self.rt.describe(e)),
        }
    }

    fn load_module(&self, image: &[u8]) -> Result<Self::Module, LoadFailure> {
        let mut m: HipModule = std::ptr::null_mut();
        // SAFETY: a complete code object in memory.
        match unsafe { (self.rt.hipModuleLoadData)(&mut m, image.as_ptr() as *const c_void) } {
            HIP_SUCCESS => Ok(Handle(m)),
            HIP_ERROR_NO_BINARY_FOR_GPU => Err(LoadFailure::WrongTarget),
            e => Err(LoadFailure::Failed(format!(
                "hipModuleLoadData: {}",
                self.rt.describe(e)
            ))),
        }
    }

    unsafe fn unload_module(&self, m: Self::Module) {
        // SAFETY: per the trait contract.
        unsafe { (self.rt.hipModuleUnload)(m.0) };
    }

    fn function(&self, m: Self::Module, name: &CStr) -> ApiResult<Option<Self::Function>> {
        let mut f: HipFunction = std::ptr::null_mut();
        // SAFETY: valid module, NUL-terminated name.
        match unsafe { (self.rt.hipModuleGetFunction)(&mut f, m.0, name.as_ptr()) } {
            HIP_SUCCESS => Ok(Some(Handle(f))),
            e if Self::absent(e) => Ok(None),
            e => self.ck(e, "hipModuleGetFunction").map(|()| None),
        }
    }

    fn global(&self, m: Self::Module, name: &CStr) -> ApiResult<Option<(u64, usize)>> {
        let mut ptr: HipDevicePtr = std::ptr::null_mut();
        let mut bytes = 0usize;
        // SAFETY: valid module and name; writes two values.
        match unsafe { (self.rt.hipModuleGetGlobal)(&mut ptr, &mut bytes, m.0, name.as_ptr()) } {
            HIP_SUCCESS => Ok(Some((ptr as u64, bytes))),
            e if Self::absent(e) => Ok(None),
            e => self.ck(e, "hipModuleGetGlobal").map(|()| None),
        }
    }

    fn static_shared(&self, _f: Self::Function) -> ApiResult<u32> {
        // Only the opt-in decision reads it, and AMD GPUs have no opt-in.
        Ok(0)
    }

    fn shared_opt_in_limit(&self) -> ApiResult<Option<u32>> {
        // A workgroup may use all of its LDS without asking.
        Ok(None)
    }

    fn set_max_dynamic_shared(&self, _f: Self::Function, _bytes: u32) -> ApiResult<()> {
        Ok(())
    }

    unsafe fn launch(&self, f: Self::Function, d: LaunchDims, args: ArgPtrs) -> ApiResult<()> {
        let (g, b, sh, st) = (d.grid, d.block, d.shared_memory, self.stream);
        let null = std::ptr::null_mut();
        let launch = self.rt.hipModuleLaunchKernel;
        // SAFETY: per the trait contract; our stream.
        let e = unsafe { launch(f.0, g, 1, 1, b, 1, 1, sh, st, args, null) };
        self.ck(e, "hipModuleLaunchKernel")
    }
}

impl Drop for HipApi {
    fn drop(&mut self) {
        if !self.stream.is_null() {
            // SAFETY: the backend released everything made on the stream.
            unsafe { (self.rt.hipStreamDestroy)(self.stream) };
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
        if HipRuntime::load().is_ok() {
            return;
        }
        assert!(matches!(list(), Err(BackendError::Unavailable(_))));
        assert!(matches!(
            HipBackend::open(0, None),
            Err(BackendError::Unavailable(_))
        ));
    }
}
