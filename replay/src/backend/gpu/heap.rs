//! The device `malloc` heap LLVM's plugins give kernels, recreated.
//!
//! AMDGPU (LLVM's plugin with a device runtime that defines
//! `__omp_rtl_device_memory_pool`, e.g. LLVM 19): after writing the device
//! environment, the plugin allocates a pool of device memory
//! (`DeviceMemoryPoolSize`: 512 MiB unless `LIBOMPTARGET_HEAP_SIZE` says
//! otherwise), writes the zeroed allocation tracker
//! `__omp_rtl_device_memory_pool_tracker` and then `{ptr, size}` into
//! `__omp_rtl_device_memory_pool`; an image without the tracker gets
//! neither. The pool is freed at teardown, before the image is unloaded.
//! The pool came with LLVM 18 (llvm-project PR 69806) and went before
//! LLVM 22 (PR 163629, plugin and device runtime: `libLLVMOffload.so.22.1`
//! has no pool symbol name), so LLVM 22 images have nothing to set up.
//!
//! NVIDIA: LLVM's CUDA plugin sets up no pool (device `malloc` is the
//! driver's); when `LIBOMPTARGET_HEAP_SIZE` is set it sets the context's
//! `CU_LIMIT_MALLOC_HEAP_SIZE` to it at device initialization.

use super::api::DeviceApi;
use super::GpuBackend;
use crate::backend::BackendError;

/// The pool global: `struct { void *Ptr; uint64_t Size; }`.
pub const POOL_SYMBOL: &str = "__omp_rtl_device_memory_pool";
/// The allocation tracker: `struct { uint64_t NumAllocations,
/// AllocationTotal, AllocationMin, AllocationMax; }`.
pub const TRACKER_SYMBOL: &str = "__omp_rtl_device_memory_pool_tracker";
pub const POOL_BYTES: usize = 16;
pub const TRACKER_BYTES: usize = 32;
/// LLVM's AMDGPU `DeviceMemoryPoolSize` when `LIBOMPTARGET_HEAP_SIZE` is unset.
pub const DEFAULT_POOL_SIZE: u64 = 512 << 20;
/// The variable LLVM's plugins read the heap size from.
pub const HEAP_SIZE_VARIABLE: &str = "LIBOMPTARGET_HEAP_SIZE";

/// How a device's kernels get their `malloc` heap from LLVM's plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceHeap {
    /// The plugin allocates a pool and hands it to the device runtime (AMDGPU).
    Pool,
    /// The driver's own heap, whose size the plugin sets (CUDA).
    DriverLimit,
}

/// `LIBOMPTARGET_HEAP_SIZE` as LLVM reads it: decimal bytes; unset or not a
/// number means the plugin's default.
pub fn parse_heap_size(value: Option<&str>) -> Option<u64> {
    value.and_then(|v| v.trim().parse::<u64>().ok())
}

/// `LIBOMPTARGET_HEAP_SIZE` of this process.
pub fn heap_size_from_env() -> Option<u64> {
    parse_heap_size(std::env::var(HEAP_SIZE_VARIABLE).ok().as_deref())
}

/// The pool global's bytes: `{ptr, size}`, little-endian.
pub fn encode_pool(ptr: u64, size: u64) -> [u8; POOL_BYTES] {
    let mut b = [0; POOL_BYTES];
    b[..8].copy_from_slice(&ptr.to_le_bytes());
    b[8..].copy_from_slice(&size.to_le_bytes());
    b
}

/// The tracker as LLVM initializes it: `{0, 0, ~0U, 0}` (the minimum
/// starts at a 32-bit all-ones, widened).
pub fn initial_tracker() -> [u8; TRACKER_BYTES] {
    let mut b = [0; TRACKER_BYTES];
    b[16..24].copy_from_slice(&u64::from(u32::MAX).to_le_bytes());
    b
}

fn check_size(name: &str, actual: usize, want: usize) -> Result<(), BackendError> {
    if actual == want {
        return Ok(());
    }
    Err(BackendError::Image(format!(
        "its {name} has {actual} bytes where LLVM's device runtime has {want}; \
         the device memory pool cannot be set up for it"
    )))
}

impl<D: DeviceApi> GpuBackend<D> {
    /// LLVM's `setupDeviceMemoryPool` for an image with both pool symbols:
    /// a pool replacing the last image's, the tracker, then `{ptr, size}`,
    /// on the replay stream.
    pub(super) fn setup_memory_pool(&mut self, m: D::Module) -> Result<(), BackendError> {
        if D::HEAP != DeviceHeap::Pool {
            return Ok(());
        }
        let Some((pool_at, pool_len)) = self.lookup_global(m, POOL_SYMBOL)? else {
            return Ok(());
        };
        let Some((tracker_at, tracker_len)) = self.lookup_global(m, TRACKER_SYMBOL)? else {
            return Ok(());
        };
        check_size(POOL_SYMBOL, pool_len, POOL_BYTES)?;
        check_size(TRACKER_SYMBOL, tracker_len, TRACKER_BYTES)?;
        self.free_memory_pool()?;
        let size = self.vars.heap_size.unwrap_or(DEFAULT_POOL_SIZE);
        // As LLVM: a pool that cannot be allocated is left empty (device
        // malloc traps, as it does under LLVM) rather than failing kernels
        // that never call it.
        let ptr = usize::try_from(size)
            .ok()
            .filter(|&len| len > 0)
            .and_then(|len| self.api.alloc_device(len).ok());
        self.pool = ptr;
        let (ptr, size) = ptr.map_or((0, 0), |p| (p, size));
        self.uploads.write_device(tracker_at, &initial_tracker())?;
        self.uploads.write_device(pool_at, &encode_pool(ptr, size))
    }

    /// Free the pool once nothing queued can use it.
    pub(super) fn free_memory_pool(&mut self) -> Result<(), BackendError> {
        let Some(ptr) = self.pool.take() else {
            return Ok(());
        };
        let synced = self.api.sync();
        // SAFETY: ours; the stream is synchronized (a kernel that timed
        // out never gets here: the backend is wedged and skips teardown).
        unsafe { self.api.free_device(ptr) };
        synced.map_err(|reason| BackendError::Driver {
            op: format!("{} stream synchronize", D::NAME),
            reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::gpu::device_env::elf_symbol_size;

    const LLVM19_GFX90A: &[u8] =
        include_bytes!("../../../../tests/fixtures/gpu/llvm19-devicertl-gfx90a.o");

    #[test]
    fn the_pool_layouts_are_those_of_a_real_device_runtime() {
        assert_eq!(
            elf_symbol_size(LLVM19_GFX90A, POOL_SYMBOL),
            Some(POOL_BYTES as u64)
        );
        assert_eq!(
            elf_symbol_size(LLVM19_GFX90A, TRACKER_SYMBOL),
            Some(TRACKER_BYTES as u64)
        );
        let pool = encode_pool(0x7000_0000_1000, DEFAULT_POOL_SIZE);
        assert_eq!(pool[..8], 0x7000_0000_1000u64.to_le_bytes());
        assert_eq!(pool[8..], (512u64 << 20).to_le_bytes());
        let t = initial_tracker();
        assert_eq!(t[16..24], 0xffff_ffffu64.to_le_bytes());
        assert!(t[..16].iter().chain(&t[24..]).all(|&b| b == 0));
    }

    #[test]
    fn the_heap_size_variable_is_read_like_llvm_reads_it() {
        assert_eq!(parse_heap_size(None), None);
        assert_eq!(parse_heap_size(Some("1048576")), Some(1 << 20));
        assert_eq!(parse_heap_size(Some(" 4096\n")), Some(4096));
        assert_eq!(parse_heap_size(Some("lots")), None);
        assert_eq!(parse_heap_size(Some("-1")), None);
    }
}
