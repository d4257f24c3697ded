//! [`Backend`] for [`GpuBackend`]: the engine's calls, each a short
//! sequence of device-API calls; and the teardown.

use std::time::Duration;

use rrstore_format::image::detect;

use super::api::{ApiQueue, DeviceApi, LoadFailure};
use super::arena::DeviceArena;
use super::{GpuBackend, STAGING_BUFFERS};
use crate::backend::gpu::args::{dynamic_shared_opt_in, KernelParams, LaunchDims};
use crate::backend::gpu::placeholder::Placeholder;
use crate::backend::gpu::staging::ArenaUploads;
use crate::backend::gpu::target;
use crate::backend::gpu::wait::poll_until;
use crate::backend::{Backend, BackendError, LaunchParams, Relocation, Reporting};

impl<D: DeviceApi> Backend for GpuBackend<D> {
    fn name(&self) -> &'static str {
        D::NAME
    }

    fn device_description(&self) -> String {
        self.api.description()
    }

    // Relocation: a driver that ignores the address hint places the arena
    // elsewhere; the engine then rebases what points into it.
    fn reserve(&mut self, base: u64, size: u64) -> Result<(), BackendError> {
        self.api.make_current()?;
        if let Some(mut p) = self.placeholder.take() {
            p.release();
        }
        // The range must be free in this process (the host backend checks
        // the same in its `reserve`): fails with the occupant's name, which
        // `placement::place` turns into a relocation under `auto`.
        Placeholder::new(base, size)?.release();
        let arena = self.arena.insert(DeviceArena::create(
            &self.api,
            base,
            size,
            self.recorded_reservation,
            self.allow_elsewhere,
        )?);
        let placed = arena.base();
        self.placed_elsewhere = (placed != base).then_some(placed);
        self.uploads.bind(ArenaUploads::new(
            ApiQueue(self.api.clone()),
            placed,
            size,
            STAGING_BUFFERS,
            D::STAGING_BYTES,
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
        self.image = Some((image.to_vec(), kernel.to_string()));
        self.written.clear();
        self.launched = false;
        self.stateful = None;
        self.load_and_set_up(image, kernel)
    }

    fn write_global(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError> {
        self.reset_device_state()?;
        self.written.insert(name.to_string());
        self.write_global_now(name, data)
    }

    fn global_address(&mut self, name: &str) -> Result<Option<u64>, BackendError> {
        self.api.make_current()?;
        let m = Self::loaded(self.module, "global_address")?;
        match self.lookup_global(m, name)? {
            Some((ptr, _)) => Ok(Some(ptr)),
            None => Err(BackendError::MissingGlobal { name: name.into() }),
        }
    }

    fn launch(&mut self, args: &[u64], params: &LaunchParams) -> Result<Duration, BackendError> {
        self.reset_device_state()?;
        self.launched = true;
        self.launch_now(args, params)
    }

    fn download(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        self.api.make_current()?;
        let src = self.uploads.address(offset, dst.len(), "download")?;
        self.uploads.settle()?;
        if dst.is_empty() {
            return Ok(());
        }
        self.api.copy_dtoh(dst, src)
    }
}

impl<D: DeviceApi> Reporting for GpuBackend<D> {
    fn device_uuid(&self) -> Option<String> {
        self.api.uuid()
    }

    fn upload_stats(&self) -> Option<crate::backend::gpu::staging::UploadStats> {
        Some(self.uploads.last_stats()).filter(|u| u.bytes > 0)
    }
}

impl<D: DeviceApi> Relocation for GpuBackend<D> {
    fn allow_elsewhere(&mut self, allow: bool) {
        self.allow_elsewhere = allow;
    }

    fn placed_elsewhere(&self) -> Option<u64> {
        self.placed_elsewhere
    }
}

impl<D: DeviceApi> GpuBackend<D> {
    /// Load `image` (replacing the module loaded before), look up `kernel`
    /// and set up the device state LLVM's plugin creates at load.
    pub(super) fn load_and_set_up(
        &mut self,
        image: &[u8],
        kernel: &str,
    ) -> Result<(), BackendError> {
        self.api.make_current()?;
        let image_target = detect(&image[..image.len().min(4096)]);
        target::check(&image_target, &self.api.target())?;
        if let Some(m) = self.module.take() {
            self.function = None;
            // SAFETY: loaded by us; no launch is in flight (each waits).
            unsafe { self.api.unload_module(m) };
        }
        let m = self.api.load_module(image).map_err(|e| match e {
            LoadFailure::WrongTarget => BackendError::TargetMismatch {
                image: image_target.describe(),
                device: self.api.target().describe(),
            },
            LoadFailure::Failed(reason) => BackendError::Image(reason),
        })?;
        self.module = Some(m);
        let f = self
            .lookup_function(m, kernel)?
            .ok_or_else(|| BackendError::MissingKernel(kernel.into()))?;
        self.function = Some(f);
        self.static_shared = self.api.static_shared(f)?;
        self.shared_attr = None;
        self.setup_device_state(m, image)
    }

    fn write_global_now(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError> {
        self.api.make_current()?;
        let m = Self::loaded(self.module, "write_global")?;
        let (ptr, bytes) = self
            .lookup_global(m, name)?
            .ok_or_else(|| BackendError::MissingGlobal { name: name.into() })?;
        if bytes as u64 != data.len() as u64 {
            return Err(BackendError::GlobalSize {
                name: name.into(),
                recorded: data.len() as u64,
                actual: bytes as u64,
            });
        }
        // Asynchronous, on the replay stream, from pinned memory: ordered
        // before the launch (a synchronous copy would run on the legacy or
        // null stream, which the non-blocking replay stream does not wait for).
        self.uploads.write_device(ptr, data)
    }

    fn launch_now(
        &mut self,
        args: &[u64],
        params: &LaunchParams,
    ) -> Result<Duration, BackendError> {
        self.api.make_current()?;
        let f = Self::loaded(self.function, "launch")?;
        let (start, stop) = Self::loaded(self.timing, "launch")?;
        let mut dims = LaunchDims::from_params(params)?;
        // LLVM launches with at least LIBOMPTARGET_SHARED_MEMORY_SIZE, which
        // the environment told the device runtime it has.
        dims.shared_memory = dims.shared_memory.max(self.vars.shared_memory_size);
        self.uploads.settle()?;
        if let Some(device_max) = self.api.shared_opt_in_limit()? {
            if let Some(v) = dynamic_shared_opt_in(
                self.static_shared,
                dims.shared_memory,
                self.shared_attr,
                device_max,
            )? {
                self.api.set_max_dynamic_shared(f, v)?;
                self.shared_attr = Some(v);
            }
        }
        let mut kp = KernelParams::new(args);
        // SAFETY: our events; kernelParams points at one live u64 per
        // argument for the duration of the call (the driver copies them).
        unsafe {
            self.api.record_event(start)?;
            self.api.launch(f, dims, kp.as_driver_ptr())?;
            self.api.record_event(stop)?;
        }
        // Polled, never a blocking synchronize: that would wait past
        // --timeout on a kernel that never ends.
        let api = &self.api;
        let Some(r) = poll_until(params.timeout, || api.query_event(stop)) else {
            // A running kernel cannot be killed: leave the device alone
            // (Drop skips every call that would wait) and let process exit
            // reclaim it.
            self.wedged = true;
            return Err(BackendError::TimedOut(params.timeout.unwrap_or_default()));
        };
        r.map_err(BackendError::DeviceFault)?;
        let ms = self.api.elapsed_ms(start, stop)?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }
}

impl<D: DeviceApi> Drop for GpuBackend<D> {
    fn drop(&mut self) {
        if self.wedged {
            // Freeing memory a running kernel uses, or destroying its
            // stream, would wait for it (or fault it); the driver reclaims
            // everything at process exit.
            std::mem::forget(self.uploads.take());
            std::mem::forget(self.arena.take());
            std::mem::forget(self.api.clone());
            return;
        }
        // Teardown in reverse order of creation; errors are ignored
        // (nothing useful can be done with them here).
        let _ = self.api.make_current();
        let _ = self.api.sync();
        drop(self.uploads.take());
        // LLVM frees the pool before it unloads the images.
        let _ = self.free_memory_pool();
        self.function = None;
        if let Some(m) = self.module.take() {
            // SAFETY: ours; the stream was synchronized.
            unsafe { self.api.unload_module(m) };
        }
        self.arena = None;
        if let Some((start, stop)) = self.timing.take() {
            // SAFETY: ours, not used again.
            unsafe {
                self.api.destroy_event(stop);
                self.api.destroy_event(start);
            }
        }
    }
}
