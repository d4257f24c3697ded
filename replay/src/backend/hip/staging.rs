//! The HIP side of the shared pinned staging ([`crate::backend::staging`]):
//! `hipHostMalloc` buffers, events without timing, and `hipMemcpyHtoDAsync`
//! on the replay stream.

use std::ffi::c_void;
use std::sync::Arc;

use super::ffi::{
    HipApi, HipDevicePtr, HipEvent, HipStream, HIP_EVENT_DISABLE_TIMING, HIP_HOST_MALLOC_DEFAULT,
};
use crate::backend::staging::DmaQueue;
use crate::backend::BackendError;

/// Uploads on one HIP stream.
pub struct HipQueue {
    pub api: Arc<HipApi>,
    pub stream: HipStream,
}

impl DmaQueue for HipQueue {
    type Event = HipEvent;

    fn alloc_pinned(&self, len: usize) -> Result<*mut u8, BackendError> {
        let api = &self.api;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one pointer to `len` pinned bytes.
        api.ck(
            unsafe { (api.hipHostMalloc)(&mut p, len, HIP_HOST_MALLOC_DEFAULT) },
            "hipHostMalloc",
        )?;
        Ok(p as *mut u8)
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        if !ptr.is_null() {
            // SAFETY: per the trait contract, a buffer of ours no copy reads.
            unsafe { (self.api.hipHostFree)(ptr as *mut c_void) };
        }
    }

    fn create_event(&self) -> Result<HipEvent, BackendError> {
        let api = &self.api;
        let mut ev: HipEvent = std::ptr::null_mut();
        // SAFETY: writes one event handle.
        api.ck(
            unsafe { (api.hipEventCreateWithFlags)(&mut ev, HIP_EVENT_DISABLE_TIMING) },
            "hipEventCreateWithFlags",
        )?;
        Ok(ev)
    }

    unsafe fn destroy_event(&self, ev: HipEvent) {
        if !ev.is_null() {
            // SAFETY: per the trait contract, an event of ours not used again.
            unsafe { (self.api.hipEventDestroy)(ev) };
        }
    }

    unsafe fn copy_async(&self, dst: u64, src: *const u8, len: usize) -> Result<(), BackendError> {
        // SAFETY: per the trait contract, `src` is pinned and stays unchanged
        // until a later event completes, and `dst` is mapped arena memory.
        self.api.ck(
            unsafe {
                (self.api.hipMemcpyHtoDAsync)(
                    dst as HipDevicePtr,
                    src as *const c_void,
                    len,
                    self.stream,
                )
            },
            "hipMemcpyHtoDAsync",
        )
    }

    unsafe fn record(&self, ev: HipEvent) -> Result<(), BackendError> {
        // SAFETY: per the trait contract, a live event of ours; our stream.
        self.api.ck(
            unsafe { (self.api.hipEventRecord)(ev, self.stream) },
            "hipEventRecord",
        )
    }

    unsafe fn wait_event(&self, ev: HipEvent) -> Result<(), BackendError> {
        // SAFETY: per the trait contract, a live event of ours.
        self.api.ck(
            unsafe { (self.api.hipEventSynchronize)(ev) },
            "hipEventSynchronize",
        )
    }

    fn wait_all(&self) -> Result<(), BackendError> {
        // SAFETY: valid stream.
        self.api.ck(
            unsafe { (self.api.hipStreamSynchronize)(self.stream) },
            "hipStreamSynchronize",
        )
    }
}
