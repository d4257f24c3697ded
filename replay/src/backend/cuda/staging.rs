//! Pinned staging for uploads: the engine hands over the snapshot in pieces
//! (as it decompresses them); pieces are copied into one of several pinned
//! host buffers and sent with `cuMemcpyHtoDAsync` on the replay stream, so
//! the DMA of one buffer overlaps filling the next (and the engine's
//! decompression of the following pieces). Contiguous small pieces are
//! coalesced into one copy.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use cudarc::driver::sys::{self, CUevent, CUstream};

use super::driver::ck;
use crate::backend::BackendError;

struct Slot {
    ptr: *mut u8,
    event: CUevent,
    in_flight: bool,
}

/// Bytes and wall time of the last completed upload round (first piece to
/// all copies complete).
#[derive(Clone, Copy, Debug, Default)]
pub struct UploadStats {
    pub bytes: u64,
    pub elapsed: Duration,
    /// Time spent inside the backend (copying into staging, waiting for a
    /// free buffer, the final wait); the rest is the caller producing data.
    pub busy: Duration,
}

pub struct Staging {
    slots: Vec<Slot>,
    cap: usize,
    cur: usize,
    fill: usize,
    /// Device address the current slot's bytes go to.
    dst: u64,
    stream: CUstream,
    round_bytes: u64,
    round_start: Option<Instant>,
    round_busy: Duration,
    last: UploadStats,
}

/// Copy with several threads when the piece is large: a single core cannot
/// keep up with a PCIe 5 DMA engine.
fn fast_copy(dst: &mut [u8], src: &[u8]) {
    const PAR_MIN: usize = 4 << 20;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8);
    if src.len() < PAR_MIN || threads < 2 {
        dst.copy_from_slice(src);
        return;
    }
    let piece = src.len().div_ceil(threads).next_multiple_of(4096);
    std::thread::scope(|s| {
        for (d, c) in dst.chunks_mut(piece).zip(src.chunks(piece)) {
            s.spawn(move || d.copy_from_slice(c));
        }
    });
}

impl Staging {
    /// `count` pinned buffers of `cap` bytes each, used on `stream`.
    pub fn new(stream: CUstream, count: usize, cap: usize) -> Result<Self, BackendError> {
        let mut st = Staging {
            slots: Vec::with_capacity(count),
            cap,
            cur: 0,
            fill: 0,
            dst: 0,
            stream,
            round_bytes: 0,
            round_start: None,
            round_busy: Duration::ZERO,
            last: UploadStats::default(),
        };
        for _ in 0..count {
            let mut p: *mut c_void = std::ptr::null_mut();
            // SAFETY: writes one pointer to `cap` pinned bytes.
            ck(
                unsafe { sys::cuMemHostAlloc(&mut p, cap, 0) },
                "cuMemHostAlloc",
            )?;
            let mut ev: CUevent = std::ptr::null_mut();
            // SAFETY: writes one event handle.
            let r = unsafe {
                sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
            };
            st.slots.push(Slot {
                ptr: p as *mut u8,
                event: ev,
                in_flight: false,
            });
            ck(r, "cuEventCreate")?;
        }
        Ok(st)
    }

    /// Queue `data` for the device address `dst`.
    pub fn push(&mut self, dst: u64, data: &[u8]) -> Result<(), BackendError> {
        let t0 = Instant::now();
        if self.round_start.is_none() {
            self.round_start = Some(t0);
        }
        let r = self.push_inner(dst, data);
        self.round_busy += t0.elapsed();
        r
    }

    fn push_inner(&mut self, dst: u64, mut data: &[u8]) -> Result<(), BackendError> {
        let mut dst = dst;
        while !data.is_empty() {
            if self.fill > 0 && self.dst + self.fill as u64 != dst {
                self.flush()?;
            }
            if self.fill == 0 {
                self.dst = dst;
            }
            let n = data.len().min(self.cap - self.fill);
            let slot = &self.slots[self.cur];
            // SAFETY: the slot holds `cap` pinned bytes and is not in flight
            // (flush waited for it before making it current).
            let buf = unsafe { std::slice::from_raw_parts_mut(slot.ptr.add(self.fill), n) };
            fast_copy(buf, &data[..n]);
            self.fill += n;
            self.round_bytes += n as u64;
            dst += n as u64;
            data = &data[n..];
            if self.fill == self.cap {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Send the current slot and make the next one current, waiting until
    /// its previous copy has finished.
    fn flush(&mut self) -> Result<(), BackendError> {
        if self.fill == 0 {
            return Ok(());
        }
        let slot = &mut self.slots[self.cur];
        // SAFETY: the source is `fill` pinned bytes that stay untouched until
        // the slot's event completes; the destination is inside the arena.
        ck(
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    self.dst,
                    slot.ptr as *const c_void,
                    self.fill,
                    self.stream,
                )
            },
            "cuMemcpyHtoDAsync",
        )?;
        // SAFETY: valid event and stream.
        ck(
            unsafe { sys::cuEventRecord(slot.event, self.stream) },
            "cuEventRecord",
        )?;
        slot.in_flight = true;
        self.fill = 0;
        self.cur = (self.cur + 1) % self.slots.len();
        let next = &mut self.slots[self.cur];
        if next.in_flight {
            // SAFETY: valid event.
            ck(
                unsafe { sys::cuEventSynchronize(next.event) },
                "cuEventSynchronize",
            )?;
            next.in_flight = false;
        }
        Ok(())
    }

    /// The current buffer, at most `max_len` bytes of it, for the caller to
    /// fill and hand over with [`commit`](Self::commit) (no copy through
    /// [`push`](Self::push)'s path). Pending pushed bytes are sent first.
    pub fn window(&mut self, max_len: usize) -> Result<&mut [u8], BackendError> {
        let t0 = Instant::now();
        if self.round_start.is_none() {
            self.round_start = Some(t0);
        }
        let r = self.flush();
        self.round_busy += t0.elapsed();
        r?;
        let slot = &self.slots[self.cur];
        // SAFETY: the slot holds `cap` pinned bytes and is not in flight
        // (flush waited for it before making it current); the borrow of
        // `self` keeps it from being sent until `commit`.
        Ok(unsafe { std::slice::from_raw_parts_mut(slot.ptr, self.cap.min(max_len)) })
    }

    /// Send the first `len` bytes of the current buffer (filled through
    /// [`window`](Self::window)) to the device address `dst`.
    pub fn commit(&mut self, dst: u64, len: usize) -> Result<(), BackendError> {
        let t0 = Instant::now();
        if len > self.cap {
            return Err(BackendError::Driver {
                op: "staging commit".into(),
                reason: format!("{len} bytes exceed the {}-byte staging buffer", self.cap),
            });
        }
        self.dst = dst;
        self.fill = len;
        self.round_bytes += len as u64;
        let r = self.flush();
        self.round_busy += t0.elapsed();
        r
    }

    /// Send what is pending and wait for every copy; closes the round.
    pub fn finish(&mut self) -> Result<(), BackendError> {
        let t0 = Instant::now();
        self.flush()?;
        // SAFETY: valid stream.
        ck(
            unsafe { sys::cuStreamSynchronize(self.stream) },
            "cuStreamSynchronize",
        )?;
        for s in &mut self.slots {
            s.in_flight = false;
        }
        if let Some(t_start) = self.round_start.take() {
            self.last = UploadStats {
                bytes: self.round_bytes,
                elapsed: t_start.elapsed(),
                busy: self.round_busy + t0.elapsed(),
            };
            if std::env::var_os("RRSTORE_GPU_STATS").is_some() && self.round_bytes > 0 {
                let s = self.last.elapsed.as_secs_f64();
                eprintln!(
                    "rrstore-gpu: rehydrated {} bytes in {:.6} s ({:.2} GB/s); backend busy {:.6} s, \
                     caller producing data {:.6} s",
                    self.round_bytes,
                    s,
                    self.round_bytes as f64 / s.max(1e-9) / 1e9,
                    self.last.busy.as_secs_f64(),
                    (self.last.elapsed.saturating_sub(self.last.busy)).as_secs_f64()
                );
            }
        }
        self.round_bytes = 0;
        self.round_busy = Duration::ZERO;
        Ok(())
    }

    pub fn last_stats(&self) -> UploadStats {
        self.last
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // SAFETY: wait for pending copies, then free what `new` allocated.
        unsafe {
            sys::cuStreamSynchronize(self.stream);
            for s in &self.slots {
                if !s.event.is_null() {
                    sys::cuEventDestroy_v2(s.event);
                }
                if !s.ptr.is_null() {
                    sys::cuMemFreeHost(s.ptr as *mut c_void);
                }
            }
        }
    }
}
