//! Pinned, multi-buffered host-to-device uploads shared by the GPU backends.
//!
//! The engine hands over the input snapshot in pieces as it decodes them,
//! either decoded straight into the current pinned buffer
//! ([`Staging::window`] + [`Staging::commit`]) or as bytes to copy in
//! ([`Staging::push`], which coalesces contiguous small pieces). A full
//! buffer is sent with an asynchronous copy on the replay stream and an
//! event recorded behind it; the next buffer is reused only once its event
//! has completed, so the DMA of one buffer overlaps filling the next.
//!
//! The device side is a [`DmaQueue`]: the GPU backend's over its device
//! API's stream ([`crate::backend::gpu::ApiQueue`]); the tests below
//! over host memory.

use std::time::{Duration, Instant};

use crate::backend::BackendError;

/// What [`Staging`] needs from a device runtime: pinned host buffers,
/// events, and asynchronous host-to-device copies on one stream.
pub trait DmaQueue {
    type Event: Copy;
    /// `len` bytes of pinned host memory.
    fn alloc_pinned(&self, len: usize) -> Result<*mut u8, BackendError>;
    /// # Safety
    /// `ptr` came from [`alloc_pinned`](Self::alloc_pinned) of this queue,
    /// no queued copy reads it any more, and it is not used afterwards.
    unsafe fn free_pinned(&self, ptr: *mut u8);
    fn create_event(&self) -> Result<Self::Event, BackendError>;
    /// # Safety
    /// `ev` came from [`create_event`](Self::create_event) and is not used
    /// afterwards.
    unsafe fn destroy_event(&self, ev: Self::Event);
    /// Queue a copy of `len` bytes from `src` to the device address `dst`.
    ///
    /// # Safety
    /// `src..src + len` is pinned memory of this queue that stays unchanged
    /// until an event recorded after this call has completed, and
    /// `dst..dst + len` is mapped device memory.
    unsafe fn copy_async(&self, dst: u64, src: *const u8, len: usize) -> Result<(), BackendError>;
    /// Record `ev` behind the copies queued so far.
    ///
    /// # Safety
    /// `ev` came from [`create_event`](Self::create_event) and was not
    /// destroyed.
    unsafe fn record(&self, ev: Self::Event) -> Result<(), BackendError>;
    /// Wait until `ev` has completed.
    ///
    /// # Safety
    /// As for [`record`](Self::record).
    unsafe fn wait_event(&self, ev: Self::Event) -> Result<(), BackendError>;
    /// Wait until every queued copy has completed.
    fn wait_all(&self) -> Result<(), BackendError>;
}

/// The statistics line of an upload round, when the process' settings ask
/// for them ([`crate::settings::ProcessSettings::gpu_stats`]; the parent
/// prints its GPU child's).
pub fn print_stats(u: &UploadStats) {
    if !crate::settings::gpu_stats() || u.bytes == 0 {
        return;
    }
    let s = u.elapsed.as_secs_f64();
    eprintln!(
        "rrstore-gpu: rehydrated {} bytes in {:.6} s ({:.2} GB/s); backend busy {:.6} s, \
         caller producing data {:.6} s",
        u.bytes,
        s,
        u.bytes as f64 / s.max(1e-9) / 1e9,
        u.busy.as_secs_f64(),
        (u.elapsed.saturating_sub(u.busy)).as_secs_f64()
    );
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

struct Slot<E> {
    ptr: *mut u8,
    event: E,
    in_flight: bool,
}

/// `count` pinned buffers of `cap` bytes each, sent through one queue.
pub struct Staging<Q: DmaQueue> {
    queue: Q,
    slots: Vec<Slot<Q::Event>>,
    cap: usize,
    cur: usize,
    fill: usize,
    /// Device address the current slot's bytes go to.
    dst: u64,
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

impl<Q: DmaQueue> Staging<Q> {
    pub fn new(queue: Q, count: usize, cap: usize) -> Result<Self, BackendError> {
        let mut st = Staging {
            queue,
            slots: Vec::with_capacity(count),
            cap,
            cur: 0,
            fill: 0,
            dst: 0,
            round_bytes: 0,
            round_start: None,
            round_busy: Duration::ZERO,
            last: UploadStats::default(),
        };
        for _ in 0..count.max(1) {
            let ptr = st.queue.alloc_pinned(cap)?;
            let event = match st.queue.create_event() {
                Ok(e) => e,
                Err(e) => {
                    // SAFETY: just allocated, never queued.
                    unsafe { st.queue.free_pinned(ptr) };
                    return Err(e);
                }
            };
            st.slots.push(Slot {
                ptr,
                event,
                in_flight: false,
            });
        }
        Ok(st)
    }

    pub fn queue(&self) -> &Q {
        &self.queue
    }

    fn start_round(&mut self) -> Instant {
        let t0 = Instant::now();
        if self.round_start.is_none() {
            self.round_start = Some(t0);
        }
        t0
    }

    /// Queue `data` for the device address `dst`.
    pub fn push(&mut self, dst: u64, data: &[u8]) -> Result<(), BackendError> {
        let t0 = self.start_round();
        self.round_bytes += data.len() as u64;
        let r = self.push_inner(dst, data);
        self.round_busy += t0.elapsed();
        r
    }

    /// Queue `data` for `dst` and send it at once: every byte is on the
    /// stream (copied from pinned memory) when this returns, so whatever is
    /// queued next on the stream, the launch, runs after it. Not counted as
    /// input (the upload statistics stay the snapshot's).
    pub fn send(&mut self, dst: u64, data: &[u8]) -> Result<(), BackendError> {
        self.push_inner(dst, data)?;
        self.flush()
    }

    fn push_inner(&mut self, mut dst: u64, mut data: &[u8]) -> Result<(), BackendError> {
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
        // SAFETY: the source is `fill` pinned bytes of this queue that stay
        // untouched until the slot's event (recorded next) completes; the
        // destination was checked against the arena by the backend.
        unsafe { self.queue.copy_async(self.dst, slot.ptr, self.fill)? };
        // SAFETY: the slot's event lives as long as `self`.
        unsafe { self.queue.record(slot.event)? };
        slot.in_flight = true;
        self.fill = 0;
        self.cur = (self.cur + 1) % self.slots.len();
        let next = &mut self.slots[self.cur];
        if next.in_flight {
            // SAFETY: the slot's event lives as long as `self`.
            unsafe { self.queue.wait_event(next.event)? };
            next.in_flight = false;
        }
        Ok(())
    }

    /// The current buffer, at most `max_len` bytes of it, for the caller to
    /// fill and hand over with [`commit`](Self::commit) (no copy through
    /// [`push`](Self::push)'s path). Pending pushed bytes are sent first.
    pub fn window(&mut self, max_len: usize) -> Result<&mut [u8], BackendError> {
        let t0 = self.start_round();
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
            return Err(BackendError::Internal {
                backend: "gpu".into(),
                what: format!(
                    "staging commit of {len} bytes exceeds the {}-byte staging buffer",
                    self.cap
                ),
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
        self.queue.wait_all()?;
        for s in &mut self.slots {
            s.in_flight = false;
        }
        if let Some(t_start) = self.round_start.take() {
            self.last = UploadStats {
                bytes: self.round_bytes,
                elapsed: t_start.elapsed(),
                busy: self.round_busy + t0.elapsed(),
            };
            print_stats(&self.last);
        }
        self.round_bytes = 0;
        self.round_busy = Duration::ZERO;
        Ok(())
    }

    pub fn last_stats(&self) -> UploadStats {
        self.last
    }
}

impl<Q: DmaQueue> Drop for Staging<Q> {
    fn drop(&mut self) {
        // Nothing useful can be done with an error here; the frees below
        // must not race a copy still reading a buffer, so wait first.
        let _ = self.queue.wait_all();
        for s in &self.slots {
            // SAFETY: every copy has completed; each pointer and event came
            // from this queue and is dropped with `self`.
            unsafe {
                self.queue.destroy_event(s.event);
                self.queue.free_pinned(s.ptr);
            }
        }
    }
}

/// An uploader bound to one reserved arena: checks every piece against the
/// arena and completes the input when the piece reaching its end arrives.
/// The part of `upload`, `staging_window` and `commit_staging` both GPU
/// backends share.
pub struct ArenaUploads<Q: DmaQueue> {
    pub base: u64,
    pub size: u64,
    pub staging: Staging<Q>,
}

impl<Q: DmaQueue> ArenaUploads<Q> {
    /// Uploads into the arena `base..base + size` through `count` buffers
    /// of at most `max_buffer` bytes: no larger than the arena needs (a
    /// small snapshot does not pin hundreds of MiB), at least 1 MiB.
    pub fn new(
        queue: Q,
        base: u64,
        size: u64,
        count: usize,
        max_buffer: usize,
    ) -> Result<Self, BackendError> {
        let cap = usize::try_from(size.next_power_of_two())
            .unwrap_or(max_buffer)
            .clamp(1 << 20, max_buffer.max(1 << 20));
        Ok(ArenaUploads {
            base,
            size,
            staging: Staging::new(queue, count, cap)?,
        })
    }

    /// The device address of `len` bytes at arena `offset`, checked.
    pub fn address(&self, offset: u64, len: usize, what: &str) -> Result<u64, BackendError> {
        arena_address(self.base, self.size, offset, len, what)
    }

    pub fn upload(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        let dst = self.address(offset, data.len(), "upload")?;
        self.staging.push(dst, data)?;
        self.complete_at(offset + data.len() as u64)
    }

    pub fn window(&mut self, max_len: usize) -> Result<&mut [u8], BackendError> {
        self.staging.window(max_len)
    }

    pub fn commit(&mut self, offset: u64, len: usize) -> Result<(), BackendError> {
        let dst = self.address(offset, len, "upload")?;
        self.staging.commit(dst, len)?;
        self.complete_at(offset + len as u64)
    }

    /// The piece that reaches the end of the arena completes the input:
    /// wait for the copies so the engine's rehydration time is the truth.
    fn complete_at(&mut self, end: u64) -> Result<(), BackendError> {
        if end == self.size {
            self.staging.finish()?;
        }
        Ok(())
    }
}

/// A GPU backend's uploads: unbound until `reserve` binds them to the
/// arena, after which every `Backend` upload method is one call here.
pub struct Uploads<Q: DmaQueue>(Option<ArenaUploads<Q>>);

impl<Q: DmaQueue> Default for Uploads<Q> {
    fn default() -> Self {
        Uploads(None)
    }
}

impl<Q: DmaQueue> Uploads<Q> {
    pub fn bind(&mut self, uploads: ArenaUploads<Q>) {
        self.0 = Some(uploads);
    }

    /// Unbind (the staging buffers are freed when the result is dropped).
    pub fn take(&mut self) -> Option<ArenaUploads<Q>> {
        self.0.take()
    }

    fn bound(&self, what: &str) -> Result<&ArenaUploads<Q>, BackendError> {
        self.0.as_ref().ok_or_else(|| not_reserved(what))
    }

    fn bound_mut(&mut self, what: &str) -> Result<&mut ArenaUploads<Q>, BackendError> {
        self.0.as_mut().ok_or_else(|| not_reserved(what))
    }

    /// The device address of `len` bytes at arena `offset`, checked.
    pub fn address(&self, offset: u64, len: usize, what: &str) -> Result<u64, BackendError> {
        self.bound(what)?.address(offset, len, what)
    }

    pub fn upload(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        self.bound_mut("upload")?.upload(offset, data)
    }

    /// A staging window once bound, `None` before.
    pub fn window(&mut self, max_len: usize) -> Result<Option<&mut [u8]>, BackendError> {
        match self.0.as_mut() {
            Some(u) => u.window(max_len).map(Some),
            None => Ok(None),
        }
    }

    pub fn commit(&mut self, offset: u64, len: usize) -> Result<(), BackendError> {
        self.bound_mut("upload")?.commit(offset, len)
    }

    /// Write `data` to device memory outside the arena (an image global at
    /// `dst`) with asynchronous copies from the pinned buffers on the replay
    /// stream, as LLVM's plugins do: ordered after the uploads and before
    /// the launch queued next on that stream. A synchronous copy from
    /// pageable memory would go through the legacy stream, which a
    /// non-blocking replay stream does not wait for, and may return before
    /// the bytes have arrived.
    pub fn write_device(&mut self, dst: u64, data: &[u8]) -> Result<(), BackendError> {
        if data.is_empty() {
            return Ok(());
        }
        self.bound_mut("global write")?.staging.send(dst, data)
    }

    /// Complete pending uploads (before a launch, a global write or a
    /// download).
    pub fn settle(&mut self) -> Result<(), BackendError> {
        match self.0.as_mut() {
            Some(u) => u.staging.finish(),
            None => Ok(()),
        }
    }

    pub fn last_stats(&self) -> UploadStats {
        self.0
            .as_ref()
            .map(|u| u.staging.last_stats())
            .unwrap_or_default()
    }
}

fn not_reserved(what: &str) -> BackendError {
    BackendError::Internal {
        backend: "gpu".into(),
        what: format!("{what} before the arena was reserved"),
    }
}

/// `base + offset` when `offset..offset + len` lies inside an arena of
/// `size` bytes.
pub fn arena_address(
    base: u64,
    size: u64,
    offset: u64,
    len: usize,
    what: &str,
) -> Result<u64, BackendError> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= size => Ok(base + offset),
        _ => Err(BackendError::Internal {
            backend: "gpu".into(),
            what: format!(
                "{what}: {len} bytes at arena offset {offset:#x} run past the arena's {size} bytes"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// A "device" in host memory: copies land when the queue is waited on,
    /// as asynchronous DMA would; events complete in order.
    #[derive(Default)]
    struct HostQueue {
        device: RefCell<Vec<u8>>,
        base: u64,
        pending: RefCell<Vec<(u64, Vec<u8>)>>,
        log: RefCell<Vec<String>>,
        buffers: RefCell<Vec<Vec<u8>>>,
    }

    impl HostQueue {
        fn land(&self) {
            for (dst, bytes) in self.pending.borrow_mut().drain(..) {
                let at = (dst - self.base) as usize;
                self.device.borrow_mut()[at..at + bytes.len()].copy_from_slice(&bytes);
            }
        }
    }

    impl DmaQueue for &HostQueue {
        type Event = usize;
        fn alloc_pinned(&self, len: usize) -> Result<*mut u8, BackendError> {
            let mut b = self.buffers.borrow_mut();
            b.push(vec![0; len]);
            Ok(b.last_mut()
                .map(|v| v.as_mut_ptr())
                .unwrap_or(std::ptr::null_mut()))
        }
        unsafe fn free_pinned(&self, _: *mut u8) {
            self.log.borrow_mut().push("free".into());
        }
        fn create_event(&self) -> Result<usize, BackendError> {
            Ok(self.log.borrow().len())
        }
        unsafe fn destroy_event(&self, _: usize) {}
        unsafe fn copy_async(
            &self,
            dst: u64,
            src: *const u8,
            len: usize,
        ) -> Result<(), BackendError> {
            // SAFETY: the staging buffer holds `len` bytes at `src`.
            let bytes = unsafe { std::slice::from_raw_parts(src, len) }.to_vec();
            self.log.borrow_mut().push(format!("copy {dst:#x} {len}"));
            self.pending.borrow_mut().push((dst, bytes));
            Ok(())
        }
        unsafe fn record(&self, _: usize) -> Result<(), BackendError> {
            Ok(())
        }
        unsafe fn wait_event(&self, _: usize) -> Result<(), BackendError> {
            self.land();
            Ok(())
        }
        fn wait_all(&self) -> Result<(), BackendError> {
            self.land();
            Ok(())
        }
    }

    fn queue(size: usize) -> HostQueue {
        HostQueue {
            device: RefCell::new(vec![0; size]),
            base: 0x7000_0000_0000,
            ..HostQueue::default()
        }
    }

    #[test]
    fn pushed_pieces_are_coalesced_and_land_in_place() {
        let q = queue(10_000);
        let input: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut up = ArenaUploads {
            base: q.base,
            size: 10_000,
            staging: Staging::new(&q, 3, 4096).unwrap(),
        };
        assert_eq!(
            ArenaUploads::new(&q, q.base, 10_000, 1, 64 << 20)
                .unwrap()
                .staging
                .cap,
            1 << 20,
            "small arenas get small buffers"
        );
        for piece in input.chunks(1000) {
            let off = piece.as_ptr() as usize - input.as_ptr() as usize;
            up.upload(off as u64, piece).unwrap();
        }
        assert!(*q.device.borrow() == input);
        // 10 pieces of 1000 bytes went out as 4096 + 4096 + 1808.
        let copies: Vec<String> = q
            .log
            .borrow()
            .iter()
            .filter(|l| l.starts_with("copy"))
            .cloned()
            .collect();
        assert_eq!(
            copies,
            [
                "copy 0x700000000000 4096",
                "copy 0x700000001000 4096",
                "copy 0x700000002000 1808"
            ]
        );
        assert_eq!(up.staging.last_stats().bytes, 10_000);
    }

    #[test]
    fn windows_are_filled_in_place_and_complete_the_input() {
        let q = queue(9_000);
        let input: Vec<u8> = (0..9_000u32).map(|i| (i % 253) as u8).collect();
        let mut up = ArenaUploads {
            base: q.base,
            size: 9_000,
            staging: Staging::new(&q, 2, 4096).unwrap(),
        };
        let mut off = 0usize;
        while off < input.len() {
            let w = up.window(input.len() - off).unwrap();
            let n = w.len();
            w.copy_from_slice(&input[off..off + n]);
            up.commit(off as u64, n).unwrap();
            off += n;
        }
        assert!(*q.device.borrow() == input);
        assert!(up.commit(8_000, 2_000).is_err(), "past the arena's end");
        assert!(up.staging.commit(0, 5_000).is_err(), "larger than a buffer");
    }

    #[test]
    fn buffers_are_freed_after_the_last_copy() {
        let q = queue(100);
        {
            let mut s = Staging::new(&q, 3, 64).unwrap();
            s.push(q.base, &[1; 100]).unwrap();
            s.finish().unwrap();
        }
        let log = q.log.borrow();
        let frees = log.iter().filter(|l| *l == "free").count();
        assert_eq!(frees, 3);
        assert_eq!(&q.device.borrow()[..], &[1; 100][..]);
    }

    #[test]
    fn unbound_uploads_say_the_arena_was_not_reserved() {
        let q = queue(64);
        let mut u: Uploads<&HostQueue> = Uploads::default();
        assert!(u.window(64).unwrap().is_none());
        let e = u.upload(0, &[1; 8]).unwrap_err().to_string();
        assert!(e.contains("before the arena was reserved"), "{e}");
        assert!(u.address(0, 8, "download").is_err());
        u.settle().unwrap();
        u.bind(ArenaUploads::new(&q, q.base, 64, 2, 1 << 20).unwrap());
        u.upload(0, &[1; 64]).unwrap();
        assert_eq!(&q.device.borrow()[..], &[1; 64][..]);
        assert_eq!(u.last_stats().bytes, 64);
        assert_eq!(u.address(8, 8, "download").unwrap(), q.base + 8);
    }

    #[test]
    fn globals_go_on_the_replay_queue_before_the_launch_and_are_not_input() {
        // Device memory: a 1 MiB arena, then a 3 MiB global (larger than a
        // staging buffer) further on, as an image's `__device__` array.
        let q = queue(8 << 20);
        let global_at = q.base + (4 << 20);
        let global: Vec<u8> = (0..3u32 << 20).map(|i| (i % 239) as u8).collect();
        let mut u: Uploads<&HostQueue> = Uploads::default();
        u.bind(ArenaUploads::new(&q, q.base, 1 << 20, 3, 1 << 20).unwrap());
        u.upload(0, &[7; 1 << 20]).unwrap();
        u.write_device(global_at, &global).unwrap();
        // Every byte was handed to the queue (the stream) before
        // write_device returned: a launch queued next runs after them.
        let queued: usize = q
            .log
            .borrow()
            .iter()
            .filter_map(|l| l.strip_prefix("copy "))
            .filter_map(|l| {
                let (dst, len) = l.split_once(' ')?;
                let dst = u64::from_str_radix(dst.trim_start_matches("0x"), 16).ok()?;
                (dst >= global_at).then(|| len.parse::<usize>().ok())?
            })
            .sum();
        assert_eq!(queued, global.len());
        u.settle().unwrap();
        let dev = q.device.borrow();
        assert!(dev[(4 << 20)..(7 << 20)] == global[..]);
        assert!(dev[..1 << 20].iter().all(|&b| b == 7));
        assert_eq!(u.last_stats().bytes, 1 << 20, "globals are not input");
        drop(dev);
        let mut unbound: Uploads<&HostQueue> = Uploads::default();
        assert!(unbound.write_device(global_at, &[1]).is_err());
        unbound.write_device(global_at, &[]).unwrap();
    }

    #[test]
    fn arena_addresses_are_checked() {
        assert_eq!(arena_address(0x1000, 64, 8, 56, "x").unwrap(), 0x1008);
        assert!(arena_address(0x1000, 64, 8, 57, "x").is_err());
        assert!(arena_address(0x1000, 64, u64::MAX, 1, "x").is_err());
    }
}
