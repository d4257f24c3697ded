//! CUDA backend: replays cubin/fatbin/PTX images on an NVIDIA GPU through
//! the driver API (cudarc, `libcuda.so` loaded at run time).
//!
//! * [`driver`]: probing for the library, errors, device queries.
//! * [`vmm`]: the arena at the recorded address (VMM API).
//! * [`staging`]: the CUDA queue under the shared pinned, multi-buffered
//!   asynchronous uploads ([`crate::backend::staging`]).

pub mod driver;
pub mod staging;
pub mod vmm;

use std::ffi::{c_int, c_void, CString};
use std::time::Duration;

use cudarc::driver::sys::{
    self, CUcontext, CUdevice, CUevent, CUfunction, CUmodule, CUresult, CUstream,
};

use self::driver::{ck, describe, CudaDeviceInfo};
use self::staging::CudaQueue;
use self::vmm::DeviceArena;
use super::args::{dynamic_shared_opt_in, KernelParams, LaunchDims};
use super::device_env::{
    encode_for_symbol, hardware_parallelism, nvptx_constructors, refuse_rpc, DeviceEnv,
    DEVICE_ENV_SYMBOL, NVPTX_INIT_END, NVPTX_INIT_KERNEL, NVPTX_INIT_START, RPC_CLIENT_SYMBOLS,
};
use super::placeholder::Placeholder;
use super::staging::{ArenaUploads, UploadStats, Uploads};
use super::wait::{poll_until, Poll};
use super::{target, Backend, BackendError, LaunchParams};

/// Staging buffers: count x size of pinned host memory.
const STAGING_BUFFERS: usize = 3;
/// 64 MiB windows: the engine decodes each on all cores, so the per-window
/// cost of starting its threads stays small next to the copy.
const STAGING_BYTES: usize = 64 << 20;

pub struct CudaBackend {
    info: CudaDeviceInfo,
    driver_version: String,
    dev: CUdevice,
    ctx: CUcontext,
    stream: CUstream,
    start_ev: CUevent,
    stop_ev: CUevent,
    placeholder: Option<Placeholder>,
    /// The reservation the recorder made at the arena's address (`VAllocSize`).
    recorded_reservation: Option<u64>,
    // Fields below are released in Drop in reverse order of creation.
    arena: Option<DeviceArena>,
    uploads: Uploads<CudaQueue>,
    module: Option<CUmodule>,
    function: Option<CUfunction>,
    /// The kernel's static shared memory (`CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`).
    static_shared: u32,
    /// What `MAX_DYNAMIC_SHARED_SIZE_BYTES` was last set to for the kernel.
    shared_attr: Option<u32>,
    /// A launch timed out and may still run: teardown must not wait on it.
    wedged: bool,
}

impl CudaBackend {
    /// Open CUDA device `ordinal`. `arena` is the recorded range; CUDA does
    /// not hold it beforehand: the driver sets up its virtual address heap
    /// at context creation around the mappings that exist then and honours
    /// `cuMemAddressReserve` hints only inside that heap, so a PROT_NONE
    /// placeholder (as the HIP backend uses) would push the recorded
    /// address out of reach (observed on an H200 with driver 580). The
    /// range is only checked to be free in this process.
    pub fn new(ordinal: usize, arena: Option<(u64, u64)>) -> Result<Self, BackendError> {
        if let Some((base, size)) = arena {
            // Fails with the occupant's name when the range is taken here.
            Placeholder::new(base, size)?.release();
        }
        let placeholder = None;
        driver::init()?;
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
        let mut b = CudaBackend {
            info,
            driver_version,
            dev,
            ctx: std::ptr::null_mut(),
            stream: std::ptr::null_mut(),
            start_ev: std::ptr::null_mut(),
            stop_ev: std::ptr::null_mut(),
            placeholder,
            recorded_reservation: None,
            arena: None,
            uploads: Uploads::default(),
            module: None,
            function: None,
            static_shared: 0,
            shared_attr: None,
            wedged: false,
        };
        // SAFETY: valid device; writes one context handle.
        ck(
            unsafe { sys::cuDevicePrimaryCtxRetain(&mut b.ctx, dev) },
            "cuDevicePrimaryCtxRetain",
        )?;
        // SAFETY: the context was just retained.
        ck(unsafe { sys::cuCtxSetCurrent(b.ctx) }, "cuCtxSetCurrent")?;
        // SAFETY: each writes one handle in the current context.
        unsafe {
            ck(
                sys::cuStreamCreate(
                    &mut b.stream,
                    sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                ),
                "cuStreamCreate",
            )?;
            ck(
                sys::cuEventCreate(&mut b.start_ev, sys::CUevent_flags::CU_EVENT_DEFAULT as u32),
                "cuEventCreate",
            )?;
            ck(
                sys::cuEventCreate(&mut b.stop_ev, sys::CUevent_flags::CU_EVENT_DEFAULT as u32),
                "cuEventCreate",
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

    pub fn info(&self) -> &CudaDeviceInfo {
        &self.info
    }

    /// Bytes and time of the last upload round (first piece to all copies done).
    pub fn upload_stats(&self) -> UploadStats {
        self.uploads.last_stats()
    }

    fn current(&self) -> Result<(), BackendError> {
        // SAFETY: ctx is the retained primary context.
        ck(unsafe { sys::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    /// Device address and size of the global `name` of module `m`, or
    /// `None` when the image has none.
    fn global(&self, m: CUmodule, name: &str) -> Result<Option<(u64, usize)>, BackendError> {
        let Ok(cname) = CString::new(name) else {
            return Ok(None);
        };
        let (mut ptr, mut bytes) = (0u64, 0usize);
        // SAFETY: valid module and NUL-terminated name; writes two values.
        let r = unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, m, cname.as_ptr()) };
        match r {
            CUresult::CUDA_SUCCESS => Ok(Some((ptr, bytes))),
            CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
            _ => ck(r, "cuModuleGetGlobal").map(|()| None),
        }
    }

    /// What LLVM's CUDA plugin sets up after loading an image, in its
    /// order: the device environment, the refusal of images that need the
    /// host RPC server, then the image's constructors. On the replay
    /// stream, so before the recorded globals and the launch.
    fn setup_device_state(&mut self, m: CUmodule, image: &[u8]) -> Result<(), BackendError> {
        if let Some((ptr, size)) = self.global(m, DEVICE_ENV_SYMBOL)? {
            use sys::CUdevice_attribute as A;
            let a = |x| driver::attribute(self.dev, x);
            let env = DeviceEnv {
                num_devices: driver::device_count()? as u32,
                device_num: self.info.ordinal as u32,
                // omp_get_wtime on NVIDIA reads the nanosecond global timer.
                clock_frequency: 1_000_000_000,
                hardware_parallelism: hardware_parallelism(
                    a(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
                    a(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
                    a(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
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
        self.run_constructors(m, image)
    }

    /// Run the image's constructors as LLVM's CUDA plugin does: a device
    /// table of the `__init_array_object_*` function pointers (by priority)
    /// between `__init_array_start` and `__init_array_end`, then
    /// `nvptx$device$init` on one thread. Nothing when the image has no
    /// such kernel.
    fn run_constructors(&mut self, m: CUmodule, image: &[u8]) -> Result<(), BackendError> {
        let name = CString::new(NVPTX_INIT_KERNEL)
            .map_err(|_| BackendError::MissingKernel(NVPTX_INIT_KERNEL.into()))?;
        let mut init: CUfunction = std::ptr::null_mut();
        // SAFETY: valid module and NUL-terminated name.
        if unsafe { sys::cuModuleGetFunction(&mut init, m, name.as_ptr()) }
            != CUresult::CUDA_SUCCESS
        {
            return Ok(());
        }
        let mut table = Vec::new();
        for ctor in nvptx_constructors(image)? {
            let Some((ptr, 8)) = self.global(m, &ctor)? else {
                return Err(BackendError::Image(format!(
                    "constructor pointer `{ctor}` is not an 8-byte global of the image"
                )));
            };
            let mut f = [0u8; 8];
            // SAFETY: ptr is an 8-byte global of the loaded module.
            ck(
                unsafe { sys::cuMemcpyDtoH_v2(f.as_mut_ptr() as *mut c_void, ptr, 8) },
                "cuMemcpyDtoH (constructor pointer)",
            )?;
            table.extend_from_slice(&f);
        }
        let mut buf: u64 = 0;
        if !table.is_empty() {
            // SAFETY: writes one device pointer to `table.len()` bytes
            // (outside the arena: the driver never allocates inside a
            // reservation).
            ck(
                unsafe { sys::cuMemAlloc_v2(&mut buf, table.len()) },
                "cuMemAlloc (constructor table)",
            )?;
        }
        let r = self.launch_constructors(m, init, buf, &table);
        if buf != 0 {
            // SAFETY: our allocation; the stream was synchronized (or the
            // launch failed before using it).
            unsafe { sys::cuMemFree_v2(buf) };
        }
        r
    }

    fn launch_constructors(
        &mut self,
        m: CUmodule,
        init: CUfunction,
        buf: u64,
        table: &[u8],
    ) -> Result<(), BackendError> {
        self.uploads.write_device(buf, table)?;
        for (name, at) in [
            (NVPTX_INIT_START, buf),
            (NVPTX_INIT_END, buf + table.len() as u64),
        ] {
            if let Some((ptr, 8)) = self.global(m, name)? {
                self.uploads.write_device(ptr, &at.to_le_bytes())?;
            }
        }
        // SAFETY: a kernel without arguments, one thread, on our stream
        // behind the table's copies; then the stream is waited for.
        unsafe {
            ck(
                sys::cuLaunchKernel(
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
                ),
                "cuLaunchKernel (nvptx$device$init)",
            )?;
            let r = sys::cuStreamSynchronize(self.stream);
            if r != CUresult::CUDA_SUCCESS {
                return Err(BackendError::DeviceFault(format!(
                    "the image's constructors ({NVPTX_INIT_KERNEL}) failed: {}",
                    describe(r)
                )));
            }
        }
        Ok(())
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn device_description(&self) -> String {
        format!(
            "{} (sm_{}{}, {} MiB), CUDA driver {}",
            self.info.name,
            self.info.compute_capability.0,
            self.info.compute_capability.1,
            self.info.memory_bytes >> 20,
            self.driver_version
        )
    }

    fn reserve(&mut self, base: u64, size: u64) -> Result<(), BackendError> {
        self.current()?;
        if let Some(mut p) = self.placeholder.take() {
            p.release();
        }
        self.arena = Some(DeviceArena::create(
            self.dev,
            base,
            size,
            self.recorded_reservation,
        )?);
        let queue = CudaQueue {
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
        self.current()?;
        let image_target = rrstore_format::image::detect(&image[..image.len().min(4096)]);
        target::check(&image_target, &self.info.target())?;
        // PTX is text the driver reads up to a NUL; cubin/fatbin are read by size.
        let owned;
        let bytes: &[u8] = if matches!(image_target, rrstore_format::image::ImageTarget::Ptx { .. })
            && image.last() != Some(&0)
        {
            owned = [image, &[0u8]].concat();
            &owned
        } else {
            image
        };
        if let Some(m) = self.module.take() {
            self.function = None;
            // SAFETY: m was loaded by us and no launch is in flight.
            unsafe { sys::cuModuleUnload(m) };
        }
        let mut m: CUmodule = std::ptr::null_mut();
        // SAFETY: `bytes` is a complete image (ELF, fatbin, or NUL-terminated PTX).
        let r = unsafe { sys::cuModuleLoadData(&mut m, bytes.as_ptr() as *const c_void) };
        match r {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU => {
                return Err(BackendError::TargetMismatch {
                    image: image_target.describe(),
                    device: self.info.target().describe(),
                })
            }
            _ => {
                return Err(BackendError::Image(format!(
                    "cuModuleLoadData: {}",
                    describe(r)
                )))
            }
        }
        self.module = Some(m);
        let name = CString::new(kernel).map_err(|_| BackendError::MissingKernel(kernel.into()))?;
        let mut f: CUfunction = std::ptr::null_mut();
        // SAFETY: valid module and NUL-terminated name.
        let r = unsafe { sys::cuModuleGetFunction(&mut f, m, name.as_ptr()) };
        match r {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_NOT_FOUND => {
                return Err(BackendError::MissingKernel(kernel.into()))
            }
            _ => ck(r, "cuModuleGetFunction")?,
        }
        self.function = Some(f);
        let mut static_shared: c_int = 0;
        // SAFETY: valid function; writes one int.
        ck(
            unsafe {
                sys::cuFuncGetAttribute(
                    &mut static_shared,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                    f,
                )
            },
            "cuFuncGetAttribute(SHARED_SIZE_BYTES)",
        )?;
        self.static_shared = static_shared.max(0) as u32;
        self.shared_attr = None;
        self.setup_device_state(m, image)
    }

    fn write_global(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError> {
        self.current()?;
        let m = self.module.ok_or_else(|| BackendError::Driver {
            op: "write_global".into(),
            reason: "no image loaded yet (load_image must come first)".into(),
        })?;
        let cname =
            CString::new(name).map_err(|_| BackendError::MissingGlobal { name: name.into() })?;
        let mut ptr = 0u64;
        let mut bytes = 0usize;
        // SAFETY: valid module and NUL-terminated name; writes two values.
        let r = unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, m, cname.as_ptr()) };
        match r {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_NOT_FOUND => {
                return Err(BackendError::MissingGlobal { name: name.into() })
            }
            _ => ck(r, "cuModuleGetGlobal")?,
        }
        if bytes as u64 != data.len() as u64 {
            return Err(BackendError::GlobalSize {
                name: name.into(),
                recorded: data.len() as u64,
                actual: bytes as u64,
            });
        }
        // Asynchronous, on the replay stream, from pinned memory: ordered
        // before the launch (a cuMemcpyHtoD would run on the legacy stream,
        // which the non-blocking replay stream does not wait for).
        self.uploads.write_device(ptr, data)
    }

    fn launch(&mut self, args: &[u64], params: &LaunchParams) -> Result<Duration, BackendError> {
        self.current()?;
        let f = self.function.ok_or_else(|| BackendError::Driver {
            op: "launch".into(),
            reason: "no kernel loaded yet (load_image must come first)".into(),
        })?;
        let dims = LaunchDims::from_params(params)?;
        self.uploads.settle()?;
        let device_max = driver::attribute(
            self.dev,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?;
        if let Some(v) = dynamic_shared_opt_in(
            self.static_shared,
            dims.shared_memory,
            self.shared_attr,
            device_max.max(0) as u32,
        )? {
            // SAFETY: valid function; the value was checked against the device.
            ck(
                unsafe {
                    sys::cuFuncSetAttribute(
                        f,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        v as c_int,
                    )
                },
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            )?;
            self.shared_attr = Some(v);
        }
        let mut kp = KernelParams::new(args);
        // SAFETY: valid events/stream/function; kernelParams points at one
        // live u64 per argument for the duration of the call (the driver
        // copies the values at launch).
        unsafe {
            ck(
                sys::cuEventRecord(self.start_ev, self.stream),
                "cuEventRecord",
            )?;
            let r = sys::cuLaunchKernel(
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
            ck(r, "cuLaunchKernel")?;
            ck(
                sys::cuEventRecord(self.stop_ev, self.stream),
                "cuEventRecord",
            )?;
            let stop = self.stop_ev;
            let r = poll_until(params.timeout, || match sys::cuEventQuery(stop) {
                CUresult::CUDA_ERROR_NOT_READY => Poll::Pending,
                r => Poll::Done(r),
            });
            let Some(r) = r else {
                // A running kernel cannot be killed: leave the context
                // alone (Drop skips every call that would wait) and let
                // process exit reclaim it.
                self.wedged = true;
                return Err(BackendError::TimedOut(params.timeout.unwrap_or_default()));
            };
            if r != CUresult::CUDA_SUCCESS {
                return Err(BackendError::DeviceFault(describe(r)));
            }
        }
        let mut ms = 0f32;
        // SAFETY: both events completed.
        ck(
            unsafe { sys::cuEventElapsedTime(&mut ms, self.start_ev, self.stop_ev) },
            "cuEventElapsedTime",
        )?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    fn download(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        self.current()?;
        let src = self.uploads.address(offset, dst.len(), "download")?;
        self.uploads.settle()?;
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: src..src+len is inside the mapped arena; dst is writable.
        ck(
            unsafe { sys::cuMemcpyDtoH_v2(dst.as_mut_ptr() as *mut c_void, src, dst.len()) },
            "cuMemcpyDtoH",
        )
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if self.ctx.is_null() {
            return;
        }
        if self.wedged {
            // Freeing memory a running kernel uses would wait for it (or
            // fault it); the driver reclaims everything at process exit.
            std::mem::forget(self.uploads.take());
            std::mem::forget(self.arena.take());
            return;
        }
        // SAFETY: teardown in reverse order of creation, in our context;
        // errors are ignored (nothing useful can be done with them here).
        unsafe {
            sys::cuCtxSetCurrent(self.ctx);
            sys::cuStreamSynchronize(self.stream);
            drop(self.uploads.take());
            self.function = None;
            if let Some(m) = self.module.take() {
                sys::cuModuleUnload(m);
            }
            self.arena = None;
            for ev in [self.stop_ev, self.start_ev] {
                if !ev.is_null() {
                    sys::cuEventDestroy_v2(ev);
                }
            }
            if !self.stream.is_null() {
                sys::cuStreamDestroy_v2(self.stream);
            }
            sys::cuDevicePrimaryCtxRelease_v2(self.dev);
        }
    }
}
