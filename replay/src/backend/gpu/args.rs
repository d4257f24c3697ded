//! Kernel argument packing and launch dimensions shared by the GPU backends.
//!
//! LLVM's offload plugins pass every kernel argument as one 8-byte value
//! (pointers into the arena, including the kernel launch environment pointer
//! LLVM's kernels take first, and scalars alike). The driver APIs
//! (`cuLaunchKernel`, `hipModuleLaunchKernel`) take `kernelParams`, an array
//! with one pointer per argument pointing at that argument's value.

use std::ffi::c_void;

use crate::backend::{BackendError, LaunchParams};

/// Owns the argument values and the pointer array handed to the driver.
/// The values live in a boxed slice, so the pointers stay valid while this
/// value lives (moving `KernelParams` does not move the slice).
pub struct KernelParams {
    values: Box<[u64]>,
    ptrs: Box<[*mut c_void]>,
}

impl KernelParams {
    pub fn new(args: &[u64]) -> Self {
        let mut values: Box<[u64]> = args.into();
        let ptrs = values
            .iter_mut()
            .map(|v| v as *mut u64 as *mut c_void)
            .collect();
        KernelParams { values, ptrs }
    }

    /// The `kernelParams` array, or null when the kernel takes no argument.
    pub fn as_driver_ptr(&mut self) -> *mut *mut c_void {
        if self.ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            self.ptrs.as_mut_ptr()
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// 1-D grid and block and dynamic shared memory in the widths the drivers take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    pub grid: u32,
    pub block: u32,
    pub shared_memory: u32,
}

impl LaunchDims {
    /// Grid = teams, block = threads, dynamic shared memory = SharedMemorySize.
    /// Zero or out-of-range values are an error naming the value.
    pub fn from_params(p: &LaunchParams) -> Result<Self, BackendError> {
        let dim = |what: &str, v: u64| -> Result<u32, BackendError> {
            match u32::try_from(v) {
                Ok(0) => Err(BackendError::LaunchConfig(format!(
                    "{what} is 0; override it with a positive value"
                ))),
                Ok(x) => Ok(x),
                Err(_) => Err(BackendError::LaunchConfig(format!(
                    "{what} {v} does not fit the driver's 32-bit launch dimension"
                ))),
            }
        };
        let shared_memory = u32::try_from(p.shared_memory).map_err(|_| {
            BackendError::LaunchConfig(format!(
                "dynamic shared memory of {} bytes does not fit a 32-bit size",
                p.shared_memory
            ))
        })?;
        Ok(LaunchDims {
            grid: dim("the number of teams", p.num_teams)?,
            block: dim("the number of threads", p.num_threads)?,
            shared_memory,
        })
    }
}

/// Shared memory (static + dynamic) a block may use without opting in
/// (48 KiB on every NVIDIA GPU since Volta); beyond it CUDA needs
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

/// The value to set `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` to
/// before launching with `dynamic` bytes of dynamic shared memory, or `None`
/// when the kernel's current setting (`set`: what we set last, `None` = the
/// driver's default) already allows it. The driver's default admits only
/// what fits next to the kernel's static shared memory in 48 KiB, and OpenMP
/// kernels always have static shared memory (the device runtime's state),
/// so the opt-in is needed whenever `static + dynamic` exceeds 48 KiB;
/// LLVM's CUDA plugin also opts in at exactly 48 KiB of dynamic memory.
/// `device_max` is the device's opt-in limit per block
/// (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`): asking for more
/// is an error saying so, not a launch failure.
pub fn dynamic_shared_opt_in(
    static_bytes: u32,
    dynamic: u32,
    set: Option<u32>,
    device_max: u32,
) -> Result<Option<u32>, BackendError> {
    let total = u64::from(static_bytes) + u64::from(dynamic);
    if total > u64::from(device_max.max(DEFAULT_SHARED_LIMIT)) {
        return Err(BackendError::LaunchConfig(format!(
            "the kernel needs {total} bytes of shared memory per block ({static_bytes} static \
             + {dynamic} dynamic) but the device allows at most {device_max}; replay on a \
             device with more shared memory per block"
        )));
    }
    if set.is_some_and(|s| s >= dynamic) {
        return Ok(None);
    }
    let needed = total > u64::from(DEFAULT_SHARED_LIMIT) || dynamic >= DEFAULT_SHARED_LIMIT;
    Ok(needed.then_some(dynamic))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pointer_points_at_its_value_bit_exactly() {
        let args = [0x7f00_0000_1000u64, u64::MAX, 42, 0x3f80_0000];
        let mut kp = KernelParams::new(&args);
        let p = kp.as_driver_ptr();
        assert!(!p.is_null());
        for (i, want) in args.iter().enumerate() {
            // SAFETY: p points at len() valid pointers, each at a live u64.
            let got = unsafe { *(*p.add(i) as *const u64) };
            assert_eq!(got, *want);
        }
        assert_eq!(kp.len(), 4);
    }

    #[test]
    fn pointers_survive_a_move_and_no_args_is_null() {
        let kp = KernelParams::new(&[7, 8]);
        let mut moved = kp;
        let p = moved.as_driver_ptr();
        // SAFETY: as above.
        assert_eq!(unsafe { *(*p.add(1) as *const u64) }, 8);
        let mut none = KernelParams::new(&[]);
        assert!(none.as_driver_ptr().is_null());
        assert!(none.is_empty());
    }

    #[test]
    fn shared_memory_opt_in_counts_static_memory_and_the_48k_boundary() {
        const K48: u32 = DEFAULT_SHARED_LIMIT;
        let h200 = 227 * 1024;
        // Exactly 48 KiB of dynamic memory: LLVM opts in, so do we (the
        // old rule, `dynamic > 48 KiB`, did not).
        assert_eq!(
            dynamic_shared_opt_in(0, K48, None, h200).unwrap(),
            Some(K48)
        );
        // Below 48 KiB dynamic, but with the runtime's static memory the
        // block needs more than the default.
        assert_eq!(
            dynamic_shared_opt_in(1024, K48 - 512, None, h200).unwrap(),
            Some(K48 - 512)
        );
        // Fits the default: no attribute call.
        assert_eq!(dynamic_shared_opt_in(1024, 4096, None, h200).unwrap(), None);
        assert_eq!(dynamic_shared_opt_in(0, 0, None, h200).unwrap(), None);
        // Already raised far enough by an earlier launch.
        assert_eq!(
            dynamic_shared_opt_in(1024, 60_000, Some(65_536), h200).unwrap(),
            None
        );
        assert_eq!(
            dynamic_shared_opt_in(1024, 70_000, Some(65_536), h200).unwrap(),
            Some(70_000)
        );
        // More than the device has: a sentence naming the sizes.
        let e = dynamic_shared_opt_in(8192, h200, None, h200)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("8192 static") && e.contains("at most 232448"),
            "{e}"
        );
    }

    #[test]
    fn launch_dims_are_checked() {
        let p = |t, n, s| LaunchParams {
            num_teams: t,
            num_threads: n,
            shared_memory: s,
            loop_trip_count: 0,
            timeout: None,
        };
        assert_eq!(
            LaunchDims::from_params(&p(108, 256, 65536)).unwrap(),
            LaunchDims {
                grid: 108,
                block: 256,
                shared_memory: 65536
            }
        );
        for bad in [p(0, 256, 0), p(1 << 33, 256, 0), p(1, 1, 1 << 40)] {
            match LaunchDims::from_params(&bad) {
                Err(e @ BackendError::LaunchConfig(_)) => {
                    // A library message names no CLI flag.
                    assert!(!e.to_string().contains("--"), "{e}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
