//! The device arena: the recorded virtual address range, reserved with the
//! CUDA virtual memory management API at exactly the recorded address and
//! backed by one physical allocation.
//!
//! `cuMemAddressReserve` treats the address as a hint; the lengths tried and
//! their order are [`crate::backend::reservation`]'s (pointers inside the
//! snapshot cannot be relocated).

use cudarc::driver::sys::{self, CUdevice, CUdeviceptr, CUmemGenericAllocationHandle, CUresult};

use super::driver::{ck, describe};
use crate::backend::placeholder::{occupants, round_range};
use crate::backend::reservation::{reservation_lengths, reserve_at_hint};
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

impl DeviceArena {
    /// Reserve `[base, base+size)` rounded outward to the granularity, at
    /// exactly that address, back it with device memory and make it
    /// readable and writable from `dev`. `recorded` is the reservation the
    /// recorder made there (`VAllocSize`), asked for first.
    pub fn create(
        dev: CUdevice,
        base: u64,
        size: u64,
        recorded: Option<u64>,
    ) -> Result<Self, BackendError> {
        let gran = granularity(dev)?;
        let reserve_err = |reason: String| BackendError::Reserve { base, size, reason };
        let (start, len) = round_range(base, size, gran)
            .ok_or_else(|| reserve_err("the range overflows the address space".into()))?;
        let len_us = usize::try_from(len)
            .map_err(|_| reserve_err("the range does not fit this platform's size_t".into()))?;
        // The hint is honoured for some sizes only: the recorder's own
        // request first, then the arena's length, then larger ones.
        let lengths = reservation_lengths(len, recorded, gran);
        let landed = reserve_at_hint(
            start,
            &lengths,
            |vlen, hint| {
                let vlen = usize::try_from(vlen).map_err(|_| "larger than size_t".to_string())?;
                let mut got: CUdeviceptr = 0;
                // SAFETY: writes one device pointer; the hint is only a hint.
                let r = unsafe { sys::cuMemAddressReserve(&mut got, vlen, 0, hint, 0) };
                if r == CUresult::CUDA_SUCCESS {
                    Ok(got)
                } else {
                    Err(describe(r))
                }
            },
            // SAFETY: frees a misplaced reservation just made (its length
            // fit size_t when it was made).
            |got, vlen| unsafe {
                sys::cuMemAddressFree(got, vlen as usize);
            },
        );
        let reserved = match landed {
            Ok(vlen) => vlen as usize,
            Err(attempts) => {
                return Err(reserve_err(format!(
                    "the CUDA driver did not reserve the range at {start:#x} (granularity \
                     {gran:#x}; attempts: {}); the range is in use in this process or the \
                     driver: {}",
                    attempts.join(", "),
                    occupants(start, len)
                )))
            }
        };
        let mut arena = DeviceArena {
            start,
            len: len_us,
            reserved,
            handle: None,
            mapped: false,
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
