//! What LLVM's plugins set up after loading an image, in their order: the
//! device environment (`__omp_rtl_device_environment`, laid out by the
//! symbol's size), the AMDGPU device memory pool (`heap.rs`), the refusal
//! of images whose code uses the host RPC client, then the image's constructors;
//! all on the replay stream, so before the recorded globals and the launch.

use super::api::DeviceApi;
use super::GpuBackend;
use crate::backend::gpu::args::LaunchDims;
use crate::backend::gpu::device_env::{
    encode_for_symbol, nvptx_constructors, refuse_rpc, AMDGPU_INIT_KERNEL, DEVICE_ENV_SYMBOL,
    NVPTX_INIT_END, NVPTX_INIT_KERNEL, NVPTX_INIT_START, RPC_CLIENT_SYMBOLS,
};
use crate::backend::gpu::rpc_client::{client_use, ClientUse};
use crate::backend::BackendError;

impl<D: DeviceApi> GpuBackend<D> {
    pub(super) fn setup_device_state(
        &mut self,
        m: D::Module,
        image: &[u8],
    ) -> Result<(), BackendError> {
        if let Some((ptr, size)) = self.lookup_global(m, DEVICE_ENV_SYMBOL)? {
            let mut env = self.api.device_env()?.with_llvm_variables();
            // The ordinal this replay opened, whatever the API reports.
            env.device_num = self.device;
            env.dynamic_mem_size = self.vars.shared_memory_size;
            let bytes = encode_for_symbol(&env, size as u64)?;
            self.uploads.write_device(ptr, &bytes)?;
        }
        self.setup_memory_pool(m)?;
        // LLVM 20+ defines the client in every image (an -O0 one keeps it
        // unused): refused only when the image's code can reach it.
        for symbol in RPC_CLIENT_SYMBOLS {
            if self.lookup_global(m, symbol)?.is_some() {
                match client_use(image, symbol) {
                    ClientUse::Unused => {}
                    ClientUse::Used(how) => return Err(refuse_rpc(symbol, &how)),
                    ClientUse::Unknown(why) => {
                        let e = format!("{why}, so its use of the client cannot be ruled out");
                        return Err(refuse_rpc(symbol, &e));
                    }
                }
            }
        }
        if let Some(init) = self.lookup_function(m, NVPTX_INIT_KERNEL)? {
            self.run_nvptx_constructors(m, init, image)?;
        }
        if let Some(init) = self.lookup_function(m, AMDGPU_INIT_KERNEL)? {
            self.run_init_kernel(init, AMDGPU_INIT_KERNEL)?;
        }
        Ok(())
    }

    /// LLVM's CUDA plugin: a device table of the `__init_array_object_*`
    /// function pointers (by priority) between `__init_array_start` and
    /// `__init_array_end` (nvlink has no `.init_array`), then
    /// `nvptx$device$init` on one thread.
    fn run_nvptx_constructors(
        &mut self,
        m: D::Module,
        init: D::Function,
        image: &[u8],
    ) -> Result<(), BackendError> {
        let mut table = Vec::new();
        for ctor in nvptx_constructors(image)? {
            let Some((ptr, 8)) = self.lookup_global(m, &ctor)? else {
                return Err(BackendError::Image(format!(
                    "constructor pointer `{ctor}` is not an 8-byte global of the image"
                )));
            };
            let mut f = [0u8; 8];
            self.api.copy_dtoh(&mut f, ptr)?;
            table.extend_from_slice(&f);
        }
        // Outside the arena: the driver never allocates inside a reservation.
        let buf = if table.is_empty() {
            0
        } else {
            self.api.alloc_device(table.len())?
        };
        let r = self.fill_table_and_run(m, init, buf, &table);
        if buf != 0 {
            // SAFETY: our allocation; the stream was synchronized (or the
            // launch failed before using it).
            unsafe { self.api.free_device(buf) };
        }
        r
    }

    fn fill_table_and_run(
        &mut self,
        m: D::Module,
        init: D::Function,
        buf: u64,
        table: &[u8],
    ) -> Result<(), BackendError> {
        self.uploads.write_device(buf, table)?;
        for (name, at) in [
            (NVPTX_INIT_START, buf),
            (NVPTX_INIT_END, buf + table.len() as u64),
        ] {
            if let Some((ptr, 8)) = self.lookup_global(m, name)? {
                self.uploads.write_device(ptr, &at.to_le_bytes())?;
            }
        }
        self.run_init_kernel(init, NVPTX_INIT_KERNEL)
    }

    /// One thread of a kernel without arguments, waited for: a constructor
    /// that faults is reported as such, before anything else runs.
    fn run_init_kernel(&mut self, init: D::Function, name: &str) -> Result<(), BackendError> {
        let one = LaunchDims {
            grid: 1,
            block: 1,
            shared_memory: 0,
        };
        // SAFETY: a kernel without arguments (null params).
        unsafe { self.api.launch(init, one, std::ptr::null_mut()) }?;
        self.api.sync().map_err(|reason| {
            BackendError::DeviceFault(format!(
                "the image's constructors ({name}) failed: {reason}"
            ))
        })
    }
}
