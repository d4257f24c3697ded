//! The device API a GPU backend is written against: the few driver calls
//! [`GpuBackend`](super::GpuBackend) sequences into a replay. CUDA
//! ([`crate::backend::gpu::cuda::CudaApi`]) and HIP
//! ([`crate::backend::gpu::hip::HipApi`]) implement it over their driver
//! libraries; a new GPU backend (Level Zero, liboffload) implements it too
//! and gets the whole sequence (reservation order, staging, device state,
//! shared-memory opt-in, timeouts, teardown) for free. The unit tests of
//! the sequence implement it over host memory.
//!
//! One value is one opened device with one replay stream: every copy and
//! launch below is queued on that stream, in call order.

use std::ffi::{c_void, CStr};

use super::super::BackendError;
use super::args::LaunchDims;
use super::device_env::DeviceEnv;
use super::heap::DeviceHeap;
use super::staging::DmaQueue;
use super::target::DeviceTarget;
use super::wait::Poll;

/// A driver handle (module, function, event, allocation) that only a
/// [`DeviceApi`] implementation of this crate makes, so the safe methods
/// taking one are only ever handed live handles the same device made.
#[derive(Clone, Copy)]
pub struct Handle<T>(pub(crate) T);

/// What the device-API calls return.
pub type ApiResult<T> = Result<T, BackendError>;

/// The driver's `kernelParams`: one pointer per kernel argument.
pub type ArgPtrs = *mut *mut c_void;

/// Why a module did not load.
#[derive(Debug)]
pub enum LoadFailure {
    /// The image has no code for this device (the driver's "no binary for
    /// GPU"): reported as a target mismatch.
    WrongTarget,
    /// Anything else: the driver's error, as a sentence.
    Failed(String),
}

/// What one opened GPU offers the generic backend.
pub trait DeviceApi: Sized {
    /// Driver handles; `Copy` like the raw handles they are.
    type Module: Copy;
    type Function: Copy;
    type Event: Copy;
    /// A physical allocation backing the arena.
    type Memory;

    /// `cuda`, `hip`: the backend's name.
    const NAME: &'static str;
    /// Who reserves address space, for messages (`the CUDA driver`).
    const RUNTIME: &'static str;
    /// Whether the arena's range is held with a `PROT_NONE` placeholder from
    /// before the runtime initializes until the reservation (HIP), or only
    /// checked to be free in this process (CUDA: a placeholder would push
    /// the recorded address out of the driver's address heap).
    const HOLDS_PLACEHOLDER: bool;
    /// The largest pinned staging buffer (three are used; a small arena
    /// gets smaller ones).
    const STAGING_BYTES: usize = 64 << 20;
    /// How LLVM's plugin gives this device's kernels their `malloc` heap.
    const HEAP: DeviceHeap;

    /// Open device `device` (0 = the first) and create the replay stream.
    fn open(device: u32) -> ApiResult<Self>;
    /// One line: name, target, driver version (for the replay history).
    fn description(&self) -> String;
    /// The device's UUID as `rrstore devices` lists it (`GPU-...`), for
    /// the replay history's `device_uuid`; `None` when the driver gives
    /// none.
    fn uuid(&self) -> Option<String> {
        None
    }
    fn target(&self) -> DeviceTarget;
    /// Make this device current on the calling thread (CUDA's context).
    fn make_current(&self) -> ApiResult<()>;
    /// What LLVM's plugin writes to `__omp_rtl_device_environment` for this
    /// device (device number, number of devices, clock, parallelism).
    fn device_env(&self) -> ApiResult<DeviceEnv>;
    /// Size the driver's own device `malloc` heap (CUDA's
    /// `CU_LIMIT_MALLOC_HEAP_SIZE`); only called when [`Self::HEAP`] is
    /// [`DeviceHeap::DriverLimit`].
    fn set_heap_limit(&self, bytes: u64) -> ApiResult<()> {
        let _ = bytes;
        Ok(())
    }

    /// Set the per-thread device stack to `bytes` (`LIBOMPTARGET_STACK_SIZE`,
    /// as LLVM's plugins do at device initialization).
    fn set_stack_limit(&self, bytes: u64) -> ApiResult<()>;

    /// The physical allocation granularity (rounds the arena).
    fn granularity(&self) -> ApiResult<u64>;
    /// Reserve `len` bytes of device address space with `hint` as the
    /// address: where the driver put it, or the driver's error.
    fn reserve_va(&self, len: u64, hint: u64) -> Result<u64, String>;
    /// # Safety
    /// `at`/`len` is a reservation made by [`reserve_va`](Self::reserve_va)
    /// with nothing mapped in it.
    unsafe fn free_va(&self, at: u64, len: u64);
    /// `len` bytes of device memory to back the arena.
    fn create_memory(&self, len: u64) -> ApiResult<Self::Memory>;
    /// Map `mem` at `start` (inside our reservation) read-write for this device.
    fn map_memory(&self, start: u64, len: u64, mem: &Self::Memory) -> ApiResult<()>;
    /// # Safety
    /// `start`/`len` was mapped by [`map_memory`](Self::map_memory) and no
    /// queued work uses it.
    unsafe fn unmap_memory(&self, start: u64, len: u64);
    /// # Safety
    /// `mem` is not mapped any more.
    unsafe fn release_memory(&self, mem: Self::Memory);
    /// A device allocation outside the arena (the constructor table).
    fn alloc_device(&self, len: usize) -> ApiResult<u64>;
    /// # Safety
    /// `ptr` came from [`alloc_device`](Self::alloc_device) and no queued
    /// work uses it.
    unsafe fn free_device(&self, ptr: u64);

    /// `len` bytes of pinned host memory.
    fn alloc_pinned(&self, len: usize) -> ApiResult<*mut u8>;
    /// # Safety
    /// As [`DmaQueue::free_pinned`].
    unsafe fn free_pinned(&self, ptr: *mut u8);
    /// An event; `timing` ones can measure elapsed time.
    fn create_event(&self, timing: bool) -> ApiResult<Self::Event>;
    /// # Safety
    /// `ev` is ours and not used afterwards.
    unsafe fn destroy_event(&self, ev: Self::Event);
    /// # Safety
    /// As [`DmaQueue::copy_async`].
    unsafe fn copy_htod_async(&self, dst: u64, src: *const u8, len: usize) -> ApiResult<()>;
    /// Synchronous copy of device memory into `dst` (behind the stream's work).
    fn copy_dtoh(&self, dst: &mut [u8], src: u64) -> ApiResult<()>;
    /// # Safety
    /// `ev` is ours and not destroyed.
    unsafe fn record_event(&self, ev: Self::Event) -> ApiResult<()>;
    /// # Safety
    /// As [`record_event`](Self::record_event).
    unsafe fn wait_event(&self, ev: Self::Event) -> ApiResult<()>;
    /// Whether the work before `ev` is done, and the driver's error if it
    /// failed (a device fault), as a sentence. Never blocks.
    fn query_event(&self, ev: Self::Event) -> Poll<Result<(), String>>;
    /// Milliseconds between two completed timing events.
    fn elapsed_ms(&self, start: Self::Event, stop: Self::Event) -> ApiResult<f32>;
    /// Wait for everything queued on the stream; a failure is the driver's
    /// error, as a sentence.
    fn sync(&self) -> Result<(), String>;

    fn load_module(&self, image: &[u8]) -> Result<Self::Module, LoadFailure>;
    /// # Safety
    /// `m` is ours and nothing queued uses it.
    unsafe fn unload_module(&self, m: Self::Module);
    /// The kernel `name`, `None` when the module has none.
    fn function(&self, m: Self::Module, name: &CStr) -> ApiResult<Option<Self::Function>>;
    /// Device address and size of the global `name`, `None` when absent.
    fn global(&self, m: Self::Module, name: &CStr) -> ApiResult<Option<(u64, usize)>>;
    /// The kernel's static shared memory in bytes.
    fn static_shared(&self, f: Self::Function) -> ApiResult<u32>;
    /// The device's opt-in shared memory limit per block, when kernels must
    /// opt in to more than 48 KiB (CUDA); `None` when there is no opt-in.
    fn shared_opt_in_limit(&self) -> ApiResult<Option<u32>>;
    /// Let `f` use up to `bytes` of dynamic shared memory.
    fn set_max_dynamic_shared(&self, f: Self::Function, bytes: u32) -> ApiResult<()>;
    /// Queue `f` on the stream: a 1-D grid of `d.grid` blocks of `d.block`
    /// threads with `d.shared_memory` bytes of dynamic shared memory.
    ///
    /// # Safety
    /// `args` is null or points at one pointer per kernel argument, each
    /// at a live 8-byte value, for the duration of the call.
    unsafe fn launch(&self, f: Self::Function, d: LaunchDims, args: ArgPtrs) -> ApiResult<()>;
}

/// The staging's queue over a device API's stream.
pub struct ApiQueue<D>(pub std::sync::Arc<D>);

impl<D: DeviceApi> DmaQueue for ApiQueue<D> {
    type Event = D::Event;

    fn alloc_pinned(&self, len: usize) -> ApiResult<*mut u8> {
        self.0.alloc_pinned(len)
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        // SAFETY: the caller keeps DmaQueue's contract, which is ours.
        unsafe { self.0.free_pinned(ptr) }
    }

    fn create_event(&self) -> ApiResult<D::Event> {
        self.0.create_event(false)
    }

    unsafe fn destroy_event(&self, ev: D::Event) {
        // SAFETY: as above.
        unsafe { self.0.destroy_event(ev) }
    }

    unsafe fn copy_async(&self, dst: u64, src: *const u8, len: usize) -> ApiResult<()> {
        // SAFETY: as above.
        unsafe { self.0.copy_htod_async(dst, src, len) }
    }

    unsafe fn record(&self, ev: D::Event) -> ApiResult<()> {
        // SAFETY: as above.
        unsafe { self.0.record_event(ev) }
    }

    unsafe fn wait_event(&self, ev: D::Event) -> ApiResult<()> {
        // SAFETY: as above.
        unsafe { self.0.wait_event(ev) }
    }

    fn wait_all(&self) -> ApiResult<()> {
        self.0.sync().map_err(|reason| BackendError::Driver {
            op: format!("{} stream synchronize", D::NAME),
            reason,
        })
    }
}
