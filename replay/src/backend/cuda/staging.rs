//! The CUDA side of the shared pinned staging ([`crate::backend::staging`]):
//! `cuMemHostAlloc` buffers, events without timing, and
//! `cuMemcpyHtoDAsync` on the replay stream.

use std::ffi::c_void;

use cudarc::driver::sys::{self, CUevent, CUstream};

use super::driver::ck;
use crate::backend::staging::DmaQueue;
use crate::backend::BackendError;

/// Uploads on one CUDA stream (of the current context).
pub struct CudaQueue {
    pub stream: CUstream,
}

impl DmaQueue for CudaQueue {
    type Event = CUevent;

    fn alloc_pinned(&self, len: usize) -> Result<*mut u8, BackendError> {
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
            // SAFETY: per the trait contract, a buffer of ours no copy reads.
            unsafe { sys::cuMemFreeHost(ptr as *mut c_void) };
        }
    }

    fn create_event(&self) -> Result<CUevent, BackendError> {
        let mut ev: CUevent = std::ptr::null_mut();
        // SAFETY: writes one event handle.
        ck(
            unsafe {
                sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
            },
            "cuEventCreate",
        )?;
        Ok(ev)
    }

    unsafe fn destroy_event(&self, ev: CUevent) {
        if !ev.is_null() {
            // SAFETY: per the trait contract, an event of ours not used again.
            unsafe { sys::cuEventDestroy_v2(ev) };
        }
    }

    unsafe fn copy_async(&self, dst: u64, src: *const u8, len: usize) -> Result<(), BackendError> {
        // SAFETY: per the trait contract, `src` is pinned and stays unchanged
        // until a later event completes, and `dst` is mapped arena memory.
        ck(
            unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src as *const c_void, len, self.stream) },
            "cuMemcpyHtoDAsync",
        )
    }

    unsafe fn record(&self, ev: CUevent) -> Result<(), BackendError> {
        // SAFETY: per the trait contract, a live event of ours; our stream.
        ck(
            unsafe { sys::cuEventRecord(ev, self.stream) },
            "cuEventRecord",
        )
    }

    unsafe fn wait_event(&self, ev: CUevent) -> Result<(), BackendError> {
        // SAFETY: per the trait contract, a live event of ours.
        ck(unsafe { sys::cuEventSynchronize(ev) }, "cuEventSynchronize")
    }

    fn wait_all(&self) -> Result<(), BackendError> {
        // SAFETY: valid stream.
        ck(
            unsafe { sys::cuStreamSynchronize(self.stream) },
            "cuStreamSynchronize",
        )
    }
}
