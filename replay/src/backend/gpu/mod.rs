//! The GPU wing: everything the GPU backends (CUDA, HIP) use and nothing
//! else does, and the generic GPU backend, one replay sequence over any
//! [`DeviceApi`] (this file).
//!
//! Every GPU replay runs the same steps, whatever the driver: hold or check
//! the recorded range before the runtime initializes, reserve the arena at
//! the recorded address (the recorder's `VAllocSize` first, then the
//! fallbacks of [`reservation`]) and map memory there,
//! upload the input through pinned, multi-buffered staging
//! ([`staging`]), load the image, set up the device state
//! LLVM's plugin creates (`setup.rs`: environment, device memory pool,
//! RPC refusal, constructors), write the globals asynchronously on the replay stream,
//! launch (opting in to more than 48 KiB of shared memory where the device
//! needs it), poll for the end without blocking past `--timeout`,
//! download, and tear down in reverse order (nothing that would wait on a
//! kernel that timed out).
//!
//! The generic backend:
//!
//! * [`api`]: the device-API trait CUDA and HIP implement (a new GPU
//!   backend implements it too).
//! * [`arena`]: the reservation and its mapping.
//! * `setup.rs`: device environment and constructors.
//! * [`heap`]: the device `malloc` heap (AMDGPU pool, CUDA heap limit).
//! * [`statics`]: device statics between repetitions (the image reloaded).
//! * `backend.rs`: the [`Backend`](crate::backend::Backend) implementation.
//!
//! What it is built from:
//!
//! * [`args`]: kernel argument packing and launch dimensions.
//! * [`target`]: image target versus device target.
//! * [`staging`]: pinned, multi-buffered uploads.
//! * [`device_env`]: the device state LLVM's plugins set up.
//! * [`placeholder`]: holding the arena's range before the runtime starts.
//! * [`reservation`]: which reservations to ask the driver for, in order.
//! * [`wait`]: waiting for a launch without blocking past `--timeout`.
//! * [`rpc_client`], `elf_read.rs`: what the image's ELF says (host RPC
//!   use, sections, symbols).
//!
//! The drivers and where they run:
//!
//! * [`cuda`], [`hip`]: the two [`DeviceApi`]s.
//! * [`child`]: a GPU backend run in a child process (the parent's
//!   [`child::ChildBackend`]), and which driver a kind opens there.
//! * [`driver_guard`]: no fork after a driver initialisation.

pub mod api;
pub mod arena;
mod backend;
pub mod heap;
mod setup;
pub mod statics;

pub mod args;
pub mod device_env;
pub(crate) mod elf_read;
pub mod placeholder;
pub mod reservation;
pub mod rpc_client;
pub mod staging;
pub mod target;
pub mod wait;

pub mod child;
pub mod cuda;
pub mod driver_guard;
pub mod hip;

#[cfg(test)]
mod tests;

use std::ffi::CString;
use std::sync::Arc;

pub use self::api::{ApiQueue, ApiResult, ArgPtrs, DeviceApi, Handle, LoadFailure};
use self::arena::DeviceArena;
use self::device_env::DeviceEnv;
use self::heap::DeviceHeap;
use self::placeholder::Placeholder;
use self::staging::{UploadStats, Uploads};
use crate::backend::BackendError;

/// Staging buffers: count x at most [`DeviceApi::STAGING_BYTES`] of pinned
/// host memory (64 MiB by default: the engine decodes each window on all
/// cores, so the per-window cost of starting its threads stays small next
/// to the copy).
const STAGING_BUFFERS: usize = 3;

/// The variable LLVM's plugins read the device stack size from (decimal
/// bytes, as `LIBOMPTARGET_HEAP_SIZE`).
pub const STACK_SIZE_VARIABLE: &str = "LIBOMPTARGET_STACK_SIZE";

/// The variables LLVM's plugins read that change what a kernel sees, read
/// as they read them.
#[derive(Clone, Copy, Debug, Default)]
struct PluginVariables {
    /// `LIBOMPTARGET_HEAP_SIZE` (unset: the plugin's default).
    heap_size: Option<u64>,
    /// `LIBOMPTARGET_STACK_SIZE` (unset: the driver's default): LLVM's
    /// plugins set the device's per-thread stack to it at device
    /// initialization (`GenericDeviceTy::init`, before the heap).
    stack_size: Option<u64>,
    /// `LIBOMPTARGET_SHARED_MEMORY_SIZE` (0 unless set): written to the
    /// environment's `DynamicMemSize`, and every launch gets at least this
    /// much dynamic shared memory, as LLVM launches with the larger of it
    /// and the kernel's own.
    shared_memory_size: u32,
}

impl PluginVariables {
    fn from_env() -> Self {
        PluginVariables {
            heap_size: self::heap::heap_size_from_env(),
            stack_size: self::heap::parse_heap_size(
                std::env::var(STACK_SIZE_VARIABLE).ok().as_deref(),
            ),
            shared_memory_size: DeviceEnv::default().with_llvm_variables().dynamic_mem_size,
        }
    }
}

/// A replay on one GPU through the device API `D`.
pub struct GpuBackend<D: DeviceApi> {
    api: Arc<D>,
    /// The ordinal opened: the environment's `DeviceNum`.
    device: u32,
    /// LLVM's variables, read at open.
    vars: PluginVariables,
    /// The AMDGPU device memory pool handed to the loaded image.
    pool: Option<u64>,
    /// The launch's start and stop events.
    timing: Option<(D::Event, D::Event)>,
    placeholder: Option<Placeholder>,
    /// The reservation the recorder made at the arena's address (`VAllocSize`).
    recorded_reservation: Option<u64>,
    // Fields below are released in Drop in reverse order of creation.
    arena: Option<DeviceArena<D>>,
    uploads: Uploads<ApiQueue<D>>,
    module: Option<D::Module>,
    function: Option<D::Function>,
    /// The kernel's static shared memory.
    static_shared: u32,
    /// What the kernel's dynamic shared memory limit was last set to.
    shared_attr: Option<u32>,
    /// A launch timed out and may still run: teardown must not wait on it.
    wedged: bool,
    /// The image and kernel loaded, kept to reload them between
    /// repetitions ([`statics`]).
    image: Option<(Vec<u8>, String)>,
    /// Globals written since the image was loaded (the recorded ones).
    written: std::collections::BTreeSet<String>,
    /// A launch ran since the image was (re)loaded.
    launched: bool,
    /// Whether the image has statics no recorded global rewrites, once
    /// known (after the first launch); `None` before.
    stateful: Option<bool>,
    /// The replay may relocate: keep a reservation the driver placed
    /// elsewhere ([`crate::backend::Relocation::allow_elsewhere`]).
    allow_elsewhere: bool,
    /// Where the arena went when the driver placed it elsewhere.
    placed_elsewhere: Option<u64>,
}

impl<D: DeviceApi> GpuBackend<D> {
    /// Open GPU `device` (0 = the first). `arena` is the recorded range,
    /// when known: it must be free in this process, and is held until the
    /// reservation where the device API asks for that
    /// ([`DeviceApi::HOLDS_PLACEHOLDER`]).
    pub fn open(device: u32, arena: Option<(u64, u64)>) -> Result<Self, BackendError> {
        Self::open_with(device, arena, PluginVariables::from_env())
    }

    /// [`Self::open`] with LLVM's variables already read.
    fn open_with(
        device: u32,
        arena: Option<(u64, u64)>,
        vars: PluginVariables,
    ) -> Result<Self, BackendError> {
        // Held only where the runtime must not take it (HIP) and only when
        // it is free: a range mapped here is not an error yet. Like the
        // host backend, the check belongs to the placement step
        // (`Backend::reserve`, which `placement::place` drives): under
        // `--placement auto|relocate` it relocates instead (exit 10 only
        // under `recorded`, from `reserve`).
        let placeholder = match arena {
            Some((base, size)) if D::HOLDS_PLACEHOLDER => Placeholder::new(base, size).ok(),
            _ => None,
        };
        let api = Arc::new(D::open(device)?);
        // LLVM's plugins size the device stack at device initialization,
        // only when the variable is set (CUDA: cuCtxSetLimit(
        // CU_LIMIT_STACK_SIZE); HIP: hipDeviceSetLimit(hipLimitStackSize)).
        if let Some(bytes) = vars.stack_size {
            api.set_stack_limit(bytes)?;
        }
        // LLVM's CUDA plugin sizes the driver's heap at device
        // initialization, only when the variable is set.
        if let (DeviceHeap::DriverLimit, Some(bytes)) = (D::HEAP, vars.heap_size) {
            api.set_heap_limit(bytes)?;
        }
        let start = api.create_event(true)?;
        let stop = match api.create_event(true) {
            Ok(e) => e,
            Err(e) => {
                // SAFETY: just created, never recorded.
                unsafe { api.destroy_event(start) };
                return Err(e);
            }
        };
        Ok(GpuBackend {
            api,
            device,
            vars,
            pool: None,
            timing: Some((start, stop)),
            placeholder,
            recorded_reservation: None,
            arena: None,
            uploads: Uploads::default(),
            module: None,
            function: None,
            static_shared: 0,
            shared_attr: None,
            wedged: false,
            image: None,
            written: Default::default(),
            launched: false,
            stateful: None,
            allow_elsewhere: false,
            placed_elsewhere: None,
        })
    }

    /// The reservation the recorder made at the arena's address
    /// (`VAllocSize`, when the recording has it): asked for first.
    pub fn with_recorded_reservation(mut self, reserved: Option<u64>) -> Self {
        self.recorded_reservation = reserved;
        self
    }

    /// The opened device.
    pub fn device(&self) -> &D {
        &self.api
    }

    /// Bytes and time of the last upload round (first piece to all copies done).
    pub fn upload_stats(&self) -> UploadStats {
        self.uploads.last_stats()
    }

    /// The kernel `name` of `m` (`None`: absent, or a name no C string
    /// can spell).
    fn lookup_function(
        &self,
        m: D::Module,
        name: &str,
    ) -> Result<Option<D::Function>, BackendError> {
        match CString::new(name) {
            Ok(c) => self.api.function(m, &c),
            Err(_) => Ok(None),
        }
    }

    /// Address and size of the global `name` of `m`, as [`Self::lookup_function`].
    fn lookup_global(
        &self,
        m: D::Module,
        name: &str,
    ) -> Result<Option<(u64, usize)>, BackendError> {
        match CString::new(name) {
            Ok(c) => self.api.global(m, &c),
            Err(_) => Ok(None),
        }
    }

    /// Before the next repetition's globals or launch: reload the image
    /// when a launch ran since it was loaded and it has device statics no
    /// recorded global rewrites ([`statics`]), so every launch starts from
    /// the state the recorded one saw.
    fn reset_device_state(&mut self) -> Result<(), BackendError> {
        if !std::mem::take(&mut self.launched) {
            return Ok(());
        }
        let Some((image, kernel)) = self.image.take() else {
            return Ok(());
        };
        let stateful = *self.stateful.get_or_insert_with(|| {
            self::statics::unrecorded_statics(&image, &self.written)
                .is_none_or(|names| !names.is_empty())
        });
        let r = if stateful {
            self.load_and_set_up(&image, &kernel)
        } else {
            Ok(())
        };
        self.image = Some((image, kernel));
        r
    }

    fn loaded<T>(v: Option<T>, op: &str) -> Result<T, BackendError> {
        v.ok_or_else(|| BackendError::Internal {
            backend: "gpu".into(),
            what: format!("{op} before the image was loaded"),
        })
    }
}
