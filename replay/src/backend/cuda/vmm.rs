//! The device arena: the recorded virtual address range, reserved with the
//! CUDA virtual memory management API at exactly the recorded address and
//! backed by one physical allocation.
//!
//! `cuMemAddressReserve` treats the address as a hint; we check the driver
//! honoured it and give the range back otherwise (pointers inside the
//! snapshot cannot be relocated).

use cudarc::driver::sys::{self, CUdevice, CUdeviceptr, CUmemGenericAllocationHandle, CUresult};

use super::driver::{ck, describe};
use crate::backend::placeholder::{occupants, round_range};
use crate::backend::BackendError;

/// A reserved, mapped and accessible device range; released in reverse order
/// on drop.
pub struct DeviceArena {
    start: CUdeviceptr,
    /// Bytes backed with device memory and mapped.
    len: usize,
    /// Bytes of virtual address space reserved (>= len).
    reserved: usize,
    handle: Option<CUmemGenericAllocationHandle>,
    mapped: bool,
}

fn prop(dev: CUdevice) -> sys::CUmemAllocationProp {
    // SAFETY: all-zero is a valid CUmemAllocationProp (INVALID enum values,
    // null pointer, zero flags); the fields that matter are set below.
    let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.requestedHandleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
    p.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    p
}

/// Minimum allocation granularity of `dev` (2 MiB on current GPUs).
pub fn granularity(dev: CUdevice) -> Result<u64, BackendError> {
    let p = prop(dev);
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
    Ok(g.max(1) as u64)
}

/// Virtual reservation lengths to try for `len` bytes: exact, then rounded
/// up to 64 MiB, then to 1 GiB.
pub fn reservation_lengths(len: u64) -> Vec<u64> {
    let mut v = vec![len];
    for step in [64u64 << 20, 1 << 30] {
        if let Some(x) = len.checked_next_multiple_of(step) {
            if !v.contains(&x) {
                v.push(x);
            }
        }
    }
    v
}

impl DeviceArena {
    /// Reserve `[base, base+size)` rounded outward to the granularity, at
    /// exactly that address, back it with device memory and make it
    /// readable and writable from `dev`.
    pub fn create(dev: CUdevice, base: u64, size: u64) -> Result<Self, BackendError> {
        let gran = granularity(dev)?;
        let reserve_err = |reason: String| BackendError::Reserve { base, size, reason };
        let (start, len) = round_range(base, size, gran)
            .ok_or_else(|| reserve_err("the range overflows the address space".into()))?;
        let len_us = usize::try_from(len)
            .map_err(|_| reserve_err("the range does not fit this platform's size_t".into()))?;
        // The driver honours the address hint only for some reservation
        // sizes (on an H200 with driver 580, 8 and 16 MiB reservations were
        // placed elsewhere while 64 MiB and 1 GiB ones landed on the hint):
        // try the exact length, then larger virtual reservations; only
        // `len` bytes are ever backed with memory.
        let mut placed = Vec::new();
        let mut arena = None;
        for vlen in reservation_lengths(len) {
            let vlen_us = usize::try_from(vlen)
                .map_err(|_| reserve_err("the range does not fit this platform's size_t".into()))?;
            let mut got: CUdeviceptr = 0;
            // SAFETY: writes one device pointer; the hint is only a hint.
            let r = unsafe { sys::cuMemAddressReserve(&mut got, vlen_us, 0, start, 0) };
            if r != CUresult::CUDA_SUCCESS {
                placed.push(format!("{vlen:#x} bytes: {}", describe(r)));
                continue;
            }
            if got == start {
                arena = Some(DeviceArena {
                    start: got,
                    len: len_us,
                    reserved: vlen_us,
                    handle: None,
                    mapped: false,
                });
                break;
            }
            // SAFETY: frees the misplaced reservation just made.
            unsafe { sys::cuMemAddressFree(got, vlen_us) };
            placed.push(format!("{vlen:#x} bytes at {got:#x}"));
        }
        let Some(mut arena) = arena else {
            return Err(reserve_err(format!(
                "the CUDA driver did not reserve the range at {start:#x} (granularity {gran:#x}; \
                 attempts: {}); the range is in use in this process or the driver: {}",
                placed.join(", "),
                occupants(start, len)
            )));
        };
        let p = prop(dev);
        let mut h: CUmemGenericAllocationHandle = 0;
        // SAFETY: p is valid; writes one handle.
        let r = unsafe { sys::cuMemCreate(&mut h, len_us, &p, 0) };
        if r != CUresult::CUDA_SUCCESS {
            return Err(BackendError::Driver {
                op: "cuMemCreate".into(),
                reason: format!(
                    "cannot allocate {len} bytes of device memory for the arena: {}",
                    describe(r)
                ),
            });
        }
        arena.handle = Some(h);
        // SAFETY: the range is our reservation and h has exactly len bytes.
        ck(unsafe { sys::cuMemMap(start, len_us, 0, h, 0) }, "cuMemMap")?;
        arena.mapped = true;
        let mut desc: sys::CUmemAccessDesc = sys::CUmemAccessDesc {
            location: p.location,
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        desc.location.id = dev;
        // SAFETY: the range is mapped; one descriptor.
        ck(
            unsafe { sys::cuMemSetAccess(start, len_us, &desc, 1) },
            "cuMemSetAccess",
        )?;
        Ok(arena)
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    pub fn len(&self) -> u64 {
        self.len as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for DeviceArena {
    fn drop(&mut self) {
        // SAFETY: each call undoes exactly one successful step of `create`,
        // in reverse order; errors at teardown are ignored.
        unsafe {
            if self.mapped {
                sys::cuMemUnmap(self.start, self.len);
            }
            if let Some(h) = self.handle.take() {
                sys::cuMemRelease(h);
            }
            sys::cuMemAddressFree(self.start, self.reserved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::reservation_lengths;

    #[test]
    fn reservation_lengths_grow_without_duplicates() {
        assert_eq!(
            reservation_lengths(8 << 20),
            vec![8 << 20, 64 << 20, 1 << 30]
        );
        assert_eq!(reservation_lengths(1 << 30), vec![1 << 30]);
        assert_eq!(
            reservation_lengths((1 << 30) + (2 << 20)),
            vec![(1 << 30) + (2 << 20), (1 << 30) + (64 << 20), 2 << 30]
        );
    }
}
