//! CUDA backend: replays cubin/fatbin/PTX images on an NVIDIA GPU through
//! the driver API (cudarc, `libcuda.so` loaded at run time). The replay
//! sequence is the generic [`GpuBackend`]'s; this module is the CUDA
//! [`DeviceApi`]: the arena with the VMM API (`cuMemAddressReserve`,
//! `cuMemCreate`, `cuMemMap`, `cuMemSetAccess`), pinned staging with
//! `cuMemHostAlloc` and `cuMemcpyHtoDAsync`, modules, launches and events,
//! all in the device's primary context on one non-blocking stream.
//!
//! * [`driver`]: probing for the library, errors, device queries.

pub mod driver;

use std::ffi::{c_int, c_void, CStr};

use cudarc::driver::sys::{
    self, CUcontext, CUdevice, CUdevice_attribute as A, CUevent, CUfunction,
    CUfunction_attribute as F, CUmemGenericAllocationHandle, CUmodule, CUresult, CUstream,
};

use self::driver::{ck, describe, CudaDeviceInfo};
use super::args::LaunchDims;
use super::device_env::{hardware_parallelism, DeviceEnv};
use super::heap::DeviceHeap;
use super::target::DeviceTarget;
use super::wait::Poll;
use super::{ApiResult, ArgPtrs, DeviceApi, GpuBackend, Handle, LoadFailure};
use crate::backend::BackendError;

/// The CUDA backend.
pub type CudaBackend = GpuBackend<CudaApi>;

/// One opened CUDA device: its primary context and the replay stream.
pub struct CudaApi {
    info: CudaDeviceInfo,
    driver_version: String,
    dev: CUdevice,
    ctx: CUcontext,
    stream: CUstream,
}

impl CudaApi {
    pub fn info(&self) -> &CudaDeviceInfo {
        &self.info
    }

    fn prop(&self) -> sys::CUmemAllocationProp {
        // SAFETY: all-zero is a valid CUmemAllocationProp (INVALID enum
        // values, null pointer, zero flags); what matters is set below.
        let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        p.requestedHandleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
        p.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        p.location.id = self.dev;
        p
    }

    fn attribute(&self, a: A) -> ApiResult<i32> {
        driver::attribute(self.dev, a)
    }
}

impl DeviceApi for CudaApi {
    type Module = Handle<CUmodule>;
    type Function = Handle<CUfunction>;
    type Event = Handle<CUevent>;
    type Memory = CUmemGenericAllocationHandle;

    const NAME: &'static str = "cuda";
    const RUNTIME: &'static str = "the CUDA driver";
    // The driver sets up its virtual address heap at context creation
    // around the mappings that exist then and honours cuMemAddressReserve
    // hints only inside it, so a PROT_NONE placeholder would push the
    // recorded address out of reach (observed on an H200, driver 580).
    const HOLDS_PLACEHOLDER: bool = false;
    // Device malloc is the driver's; LLVM's CUDA plugin only sizes it.
    const HEAP: DeviceHeap = DeviceHeap::DriverLimit;

    fn open(device: u32) -> ApiResult<Self> {
        driver::init()?;
        let ordinal = device as usize;
        let info = driver::device_info(ordinal)?;
        if !info.vmm_supported {
            return Err(BackendError::Unavailable(format!(
                "CUDA device {ordinal} ({}) does not support virtual memory management, \
                 which replaying at the recorded address needs",
                info.name
            )));
        }
        let driver_version = driver::driver_version()?;
        let dev = driver::device(ordinal)?;
        let mut api = CudaApi {
            info,
            driver_version,
            dev,
            ctx: std::ptr::null_mut(),
            stream: std::ptr::null_mut(),
        };
        // SAFETY: valid device; writes one context handle.
        ck(
            unsafe { sys::cuDevicePrimaryCtxRetain(&mut api.ctx, dev) },
            "cuDevicePrimaryCtxRetain",
        )?;
        api.make_current()?;
        // SAFETY: writes one handle in the current context.
        ck(
            unsafe {
                sys::cuStreamCreate(
                    &mut api.stream,
                    sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                )
            },
            "cuStreamCreate",
        )?;
        Ok(api)
    }

    fn description(&self) -> String {
        format!(
            "{} (sm_{}{}, {} MiB), CUDA driver {}",
            self.info.name,
            self.info.compute_capability.0,
            self.info.compute_capability.1,
            self.info.memory_bytes >> 20,
            self.driver_version
        )
    }

    fn uuid(&self) -> Option<String> {
        self.info.uuid.clone()
    }

    fn target(&self) -> DeviceTarget {
        self.info.target()
    }

    fn make_current(&self) -> ApiResult<()> {
        // SAFETY: ctx is the retained primary context.
        ck(unsafe { sys::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    fn device_env(&self) -> ApiResult<DeviceEnv> {
        Ok(DeviceEnv {
            num_devices: driver::device_count()? as u32,
            device_num: self.info.ordinal as u32,
            // omp_get_wtime on NVIDIA reads the nanosecond global timer.
            clock_frequency: 1_000_000_000,
            hardware_parallelism: hardware_parallelism(
                self.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
                self.attribute(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
                self.attribute(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            ),
            ..DeviceEnv::default()
        })
    }

    fn set_heap_limit(&self, bytes: u64) -> ApiResult<()> {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        // SAFETY: sets one limit of the current (primary) context.
        ck(
            unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE, bytes) },
            "cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE) for LIBOMPTARGET_HEAP_SIZE",
        )
    }

    fn set_stack_limit(&self, bytes: u64) -> ApiResult<()> {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        // SAFETY: sets one limit of the current (primary) context.
        ck(
            unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_STACK_SIZE, bytes) },
            "cuCtxSetLimit(CU_LIMIT_STACK_SIZE) for LIBOMPTARGET_STACK_SIZE",
        )
    }

    fn granularity(&self) -> ApiResult<u64> {
        let p = self.prop();
        let mut g: usize = 0;
        // SAFETY: p is a valid prop; writes one usize.
        ck(
            unsafe {
                sys::cuMemGetAllocationGranularity(
                    &mut g,
                    &p,
                    sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
                )
            },
            "cuMemGetAllocationGranularity",
        )?;
        Ok(g as u64)
    }

    fn reserve_va(&self, len: u64, hint: u64) -> Result<u64, String> {
        let len = usize::try_from(len).map_err(|_| "larger than size_t".to_string())?;
        let mut got = 0;
        // SAFETY: writes one device pointer; the hint is only a hint.
        match unsafe { sys::cuMemAddressReserve(&mut got, len, 0, hint, 0) } {
            CUresult::CUDA_SUCCESS => Ok(got),
            r => Err(describe(r)),
        }
    }

    unsafe fn free_va(&self, at: u64, len: u64) {
        // SAFETY: per the trait contract; its length fit size_t when made.
        unsafe { sys::cuMemAddressFree(at, len as usize) };
    }

    fn create_memory(&self, len: u64) -> ApiResult<Self::Memory> {
        let p = self.prop();
        let mut h = 0;
        // SAFETY: p is valid; writes one handle.
        match unsafe { sys::cuMemCreate(&mut h, len as usize, &p, 0) } {
            CUresult::CUDA_SUCCESS => Ok(h),
            r => Err(BackendError::Driver {
                op: "cuMemCreate".into(),
                reason: format!(
                    "cannot allocate {len} bytes of device memory for the arena: {}",
                    describe(r)
                ),
            }),
        }
    }

    fn map_memory(&self, start: u64, len: u64, mem: &Self::Memory) -> ApiResult<()> {
        let len = len as usize;
        // SAFETY: the range is our reservation and mem has exactly len bytes.
        ck(unsafe { sys::cuMemMap(start, len, 0, *mem, 0) }, "cuMemMap")?;
        let desc = sys::CUmemAccessDesc {
            location: self.prop().location,
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the range is mapped; one descriptor.
        ck(
            unsafe { sys::cuMemSetAccess(start, len, &desc, 1) },
            "cuMemSetAccess",
        )
    }

    unsafe fn unmap_memory(&self, start: u64, len: u64) {
        // SAFETY: per the trait contract.
        unsafe { sys::cuMemUnmap(start, len as usize) };
    }

    unsafe fn release_memory(&self, mem: Self::Memory) {
        // SAFETY: per the trait contract.
        unsafe { sys::cuMemRelease(mem) };
    }

    fn alloc_device(&self, len: usize) -> ApiResult<u64> {
        let mut p = 0;
        // SAFETY: writes one device pointer.
        ck(unsafe { sys::cuMemAlloc_v2(&mut p, len) }, "cuMemAlloc")?;
        Ok(p)
    }

    unsafe fn free_device(&self, ptr: u64) {
        // SAFETY: per the trait contract.
        unsafe { sys::cuMemFree_v2(ptr) };
    }

    fn alloc_pinned(&self, len: usize) -> ApiResult<*mut u8> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one pointer to `len` pinned bytes.
        ck(
            unsafe { sys::cuMemHostAlloc(&mut p, len, 0) },
            "cuMemHostAlloc",
        )?;
        Ok(p as *mut u8)
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        if !ptr.is_null() {
            // SAFETY: per the trait contract.
            unsafe { sys::cuMemFreeHost(ptr as *mut c_void) };
        }
    }

    fn create_event(&self, timing: bool) -> ApiResult<Self::Event> {
        let flags = if timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        let mut ev: CUevent = std::ptr::null_mut();
        // SAFETY: writes one event handle.
        ck(
            unsafe { sys::cuEventCreate(&mut ev, flags as u32) },
            "cuEventCreate",
        )?;
        Ok(Handle(ev))
    }

    unsafe fn destroy_event(&self, ev: Self::Event) {
        if !ev.0.is_null() {
            // SAFETY: per the trait contract.
            unsafe { sys::cuEventDestroy_v2(ev.0) };
        }
    }

    unsafe fn copy_htod_async(&self, dst: u64, src: *const u8, len: usize) -> ApiResult<()> {
        // SAFETY: per the trait contract: `src` is pinned and unchanged
        // until a later event completes; `dst` is mapped device memory.
        ck(
            unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src as *const c_void, len, self.stream) },
            "cuMemcpyHtoDAsync",
        )
    }

    fn copy_dtoh(&self, dst: &mut [u8], src: u64) -> ApiResult<()> {
        // SAFETY: the caller checked src..src+len against device memory;
        // dst is writable for its length.
        ck(
            unsafe { sys::cuMemcpyDtoH_v2(dst.as_mut_ptr() as *mut c_void, src, dst.len()) },
            "cuMemcpyDtoH",
        )
    }

    unsafe fn record_event(&self, ev: Self::Event) -> ApiResult<()> {
        // SAFETY: per the trait contract; our stream.
        ck(
            unsafe { sys::cuEventRecord(ev.0, self.stream) },
            "cuEventRecord",
        )
    }

    unsafe fn wait_event(&self, ev: Self::Event) -> ApiResult<()> {
        // SAFETY: per the trait contract.
        ck(
            unsafe { sys::cuEventSynchronize(ev.0) },
            "cuEventSynchronize",
        )
    }

    fn query_event(&self, ev: Self::Event) -> Poll<Result<(), String>> {
        // SAFETY: a live event of ours.
        match unsafe { sys::cuEventQuery(ev.0) } {
            CUresult::CUDA_ERROR_NOT_READY => Poll::Pending,
            CUresult::CUDA_SUCCESS => Poll::Done(Ok(())),
            r => Poll::Done(Err(describe(r))),
        }
    }

    fn elapsed_ms(&self, start: Self::Event, stop: Self::Event) -> ApiResult<f32> {
        let mut ms = 0f32;
        // SAFETY: both events completed.
        ck(
            unsafe { sys::cuEventElapsedTime(&mut ms, start.0, stop.0) },
            "cuEventElapsedTime",
        )?;
        Ok(ms)
    }

    fn sync(&self) -> Result<(), String> {
        // SAFETY: our stream.
        match unsafe { sys::cuStreamSynchronize(self.stream) } {
            CUresult::CUDA_SUCCESS => Ok(()),
            r => Err(describe(r)),
        }
    }

    fn load_module(&self, image: &[u8]) -> Result<Self::Module, LoadFailure> {
        // PTX is text the driver reads up to a NUL; cubin/fatbin are read by size.
        let is_ptx = matches!(
            rrstore_format::image::detect(&image[..image.len().min(4096)]),
            rrstore_format::image::ImageTarget::Ptx { .. }
        );
        let owned;
        let bytes: &[u8] = if is_ptx && image.last() != Some(&0) {
            owned = [image, &[0u8]].concat();
            &owned
        } else {
            image
        };
        let mut m: CUmodule = std::ptr::null_mut();
        // SAFETY: `bytes` is a complete image (ELF, fatbin, or NUL-terminated PTX).
        match unsafe { sys::cuModuleLoadData(&mut m, bytes.as_ptr() as *const c_void) } {
            CUresult::CUDA_SUCCESS => Ok(Handle(m)),
            CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU => Err(LoadFailure::WrongTarget),
            r => Err(LoadFailure::Failed(format!(
                "cuModuleLoadData: {}",
                describe(r)
            ))),
        }
    }

    unsafe fn unload_module(&self, m: Self::Module) {
        // SAFETY: per the trait contract.
        unsafe { sys::cuModuleUnload(m.0) };
    }

    fn function(&self, m: Self::Module, name: &CStr) -> ApiResult<Option<Self::Function>> {
        let mut f: CUfunction = std::ptr::null_mut();
        // SAFETY: valid module and NUL-terminated name.
        match unsafe { sys::cuModuleGetFunction(&mut f, m.0, name.as_ptr()) } {
            CUresult::CUDA_SUCCESS => Ok(Some(Handle(f))),
            CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
            r => ck(r, "cuModuleGetFunction").map(|()| None),
        }
    }

    fn global(&self, m: Self::Module, name: &CStr) -> ApiResult<Option<(u64, usize)>> {
        let (mut ptr, mut bytes) = (0u64, 0usize);
        // SAFETY: valid module and NUL-terminated name; writes two values.
        match unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, m.0, name.as_ptr()) } {
            CUresult::CUDA_SUCCESS => Ok(Some((ptr, bytes))),
            CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
            r => ck(r, "cuModuleGetGlobal").map(|()| None),
        }
    }

    fn static_shared(&self, f: Self::Function) -> ApiResult<u32> {
        let mut v: c_int = 0;
        // SAFETY: valid function; writes one int.
        ck(
            unsafe { sys::cuFuncGetAttribute(&mut v, F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f.0) },
            "cuFuncGetAttribute(SHARED_SIZE_BYTES)",
        )?;
        Ok(v.max(0) as u32)
    }

    fn shared_opt_in_limit(&self) -> ApiResult<Option<u32>> {
        let v = self.attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
        Ok(Some(v.max(0) as u32))
    }

    fn set_max_dynamic_shared(&self, f: Self::Function, bytes: u32) -> ApiResult<()> {
        // SAFETY: valid function; the value was checked against the device.
        ck(
            unsafe {
                sys::cuFuncSetAttribute(
                    f.0,
                    F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes as c_int,
                )
            },
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
        )
    }

    unsafe fn launch(&self, f: Self::Function, d: LaunchDims, args: ArgPtrs) -> ApiResult<()> {
        let (g, b, sh, st) = (d.grid, d.block, d.shared_memory, self.stream);
        let null = std::ptr::null_mut();
        // SAFETY: per the trait contract; our stream.
        let r = unsafe { sys::cuLaunchKernel(f.0, g, 1, 1, b, 1, 1, sh, st, args, null) };
        ck(r, "cuLaunchKernel")
    }
}

impl Drop for CudaApi {
    fn drop(&mut self) {
        if self.ctx.is_null() {
            return;
        }
        // SAFETY: the backend released everything made on the stream;
        // errors at teardown are ignored.
        unsafe {
            sys::cuCtxSetCurrent(self.ctx);
            if !self.stream.is_null() {
                sys::cuStreamDestroy_v2(self.stream);
            }
            sys::cuDevicePrimaryCtxRelease_v2(self.dev);
        }
    }
}
