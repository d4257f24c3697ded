//! Pinned, multi-buffered asynchronous uploads for the HIP backend (the same
//! scheme as the CUDA backend's staging: fill one pinned buffer while the
//! previous ones are copied by the DMA engine).

use std::ffi::c_void;
use std::sync::Arc;

use super::ffi::{
    HipApi, HipDevicePtr, HipEvent, HipStream, HIP_EVENT_DISABLE_TIMING, HIP_HOST_MALLOC_DEFAULT,
};
use crate::backend::BackendError;

struct Slot {
    ptr: *mut u8,
    event: HipEvent,
    in_flight: bool,
}

pub struct HipStaging {
    api: Arc<HipApi>,
    slots: Vec<Slot>,
    cap: usize,
    cur: usize,
    fill: usize,
    dst: u64,
    stream: HipStream,
}

impl HipStaging {
    pub fn new(
        api: Arc<HipApi>,
        stream: HipStream,
        count: usize,
        cap: usize,
    ) -> Result<Self, BackendError> {
        let mut st = HipStaging {
            api: api.clone(),
            slots: Vec::with_capacity(count),
            cap,
            cur: 0,
            fill: 0,
            dst: 0,
            stream,
        };
        for _ in 0..count {
            let mut p: *mut c_void = std::ptr::null_mut();
            // SAFETY: writes one pointer to `cap` pinned bytes.
            api.ck(
                unsafe { (api.hipHostMalloc)(&mut p, cap, HIP_HOST_MALLOC_DEFAULT) },
                "hipHostMalloc",
            )?;
            let mut ev: HipEvent = std::ptr::null_mut();
            // SAFETY: writes one event handle.
            let e = unsafe { (api.hipEventCreateWithFlags)(&mut ev, HIP_EVENT_DISABLE_TIMING) };
            st.slots.push(Slot {
                ptr: p as *mut u8,
                event: ev,
                in_flight: false,
            });
            api.ck(e, "hipEventCreateWithFlags")?;
        }
        Ok(st)
    }

    pub fn push(&mut self, mut dst: u64, mut data: &[u8]) -> Result<(), BackendError> {
        while !data.is_empty() {
            if self.fill > 0 && self.dst + self.fill as u64 != dst {
                self.flush()?;
            }
            if self.fill == 0 {
                self.dst = dst;
            }
            let n = data.len().min(self.cap - self.fill);
            let slot = &self.slots[self.cur];
            // SAFETY: the current slot is not in flight and holds `cap` bytes.
            let buf = unsafe { std::slice::from_raw_parts_mut(slot.ptr.add(self.fill), n) };
            buf.copy_from_slice(&data[..n]);
            self.fill += n;
            dst += n as u64;
            data = &data[n..];
            if self.fill == self.cap {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), BackendError> {
        if self.fill == 0 {
            return Ok(());
        }
        let api = self.api.clone();
        let slot = &mut self.slots[self.cur];
        // SAFETY: pinned source untouched until the slot's event completes;
        // destination inside the arena.
        unsafe {
            api.ck(
                (api.hipMemcpyHtoDAsync)(
                    self.dst as HipDevicePtr,
                    slot.ptr as *const c_void,
                    self.fill,
                    self.stream,
                ),
                "hipMemcpyHtoDAsync",
            )?;
            api.ck(
                (api.hipEventRecord)(slot.event, self.stream),
                "hipEventRecord",
            )?;
        }
        slot.in_flight = true;
        self.fill = 0;
        self.cur = (self.cur + 1) % self.slots.len();
        let next = &mut self.slots[self.cur];
        if next.in_flight {
            // SAFETY: valid event.
            api.ck(
                unsafe { (api.hipEventSynchronize)(next.event) },
                "hipEventSynchronize",
            )?;
            next.in_flight = false;
        }
        Ok(())
    }

    pub fn finish(&mut self) -> Result<(), BackendError> {
        self.flush()?;
        // SAFETY: valid stream.
        self.api.ck(
            unsafe { (self.api.hipStreamSynchronize)(self.stream) },
            "hipStreamSynchronize",
        )?;
        for s in &mut self.slots {
            s.in_flight = false;
        }
        Ok(())
    }
}

impl Drop for HipStaging {
    fn drop(&mut self) {
        // SAFETY: wait for pending copies, then free what `new` allocated.
        unsafe {
            (self.api.hipStreamSynchronize)(self.stream);
            for s in &self.slots {
                if !s.event.is_null() {
                    (self.api.hipEventDestroy)(s.event);
                }
                if !s.ptr.is_null() {
                    (self.api.hipHostFree)(s.ptr as *mut c_void);
                }
            }
        }
    }
}
