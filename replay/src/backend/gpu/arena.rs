//! The device arena: the recorded virtual address range, reserved at
//! exactly the recorded address (lengths and order from
//! [`crate::backend::gpu::reservation`]) and backed by one physical allocation.

use std::sync::Arc;

use super::api::DeviceApi;
use crate::backend::gpu::placeholder::{occupant_report, round_range};
use crate::backend::gpu::reservation::{reservation_lengths, reserve_placed};
use crate::backend::BackendError;

/// A reserved, mapped and accessible device range; released in reverse
/// order on drop.
pub struct DeviceArena<D: DeviceApi> {
    api: Arc<D>,
    start: u64,
    /// Bytes backed with device memory and mapped.
    len: u64,
    /// Bytes of address space reserved (>= len).
    reserved: u64,
    /// The arena's base: the recorded one, or where the driver placed the
    /// reservation (relocated; same offset within the granularity).
    base: u64,
    memory: Option<D::Memory>,
    mapped: bool,
}

impl<D: DeviceApi> DeviceArena<D> {
    /// Reserve `[base, base+size)` rounded outward to the granularity, at
    /// exactly that address, back it with device memory and make it
    /// readable and writable. `recorded` is the reservation the recorder
    /// made there (`VAllocSize`), asked for first: drivers honour the hint
    /// for some sizes only. With `elsewhere` (a replay that may relocate),
    /// a reservation the driver placed elsewhere is kept when none lands
    /// on the address ([`reserve_placed`]); [`base`](Self::base) says where.
    pub fn create(
        api: &Arc<D>,
        base: u64,
        size: u64,
        recorded: Option<u64>,
        elsewhere: bool,
    ) -> Result<Self, BackendError> {
        let gran = api.granularity()?.max(1);
        let reserve_err = |reason: String| BackendError::Reserve { base, size, reason };
        let (start, len) = round_range(base, size, gran)
            .ok_or_else(|| reserve_err("the range overflows the address space".into()))?;
        if usize::try_from(len).is_err() {
            return Err(reserve_err(
                "the range does not fit this platform's size_t".into(),
            ));
        }
        let lengths = reservation_lengths(len, recorded, gran);
        let landed = reserve_placed(
            start,
            &lengths,
            elsewhere,
            |vlen, hint| api.reserve_va(vlen, hint),
            // SAFETY: a misplaced reservation just made, nothing mapped in it.
            |got, vlen| unsafe { api.free_va(got, vlen) },
        );
        let (reserved, at) = landed.map_err(|attempts| {
            reserve_err(format!(
                "{} did not reserve the range at {start:#x} (granularity {gran:#x}; attempts: \
                 {}); the range is in use in this process or the driver: {}",
                D::RUNTIME,
                attempts.join(", "),
                occupant_report(start, len)
            ))
        })?;
        let mut arena = DeviceArena {
            api: api.clone(),
            start: at,
            len,
            reserved,
            base: at + (base - start),
            memory: None,
            mapped: false,
        };
        let mem = api.create_memory(len)?;
        let mem = arena.memory.insert(mem);
        api.map_memory(at, len, mem)?;
        arena.mapped = true;
        Ok(arena)
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    /// Where the arena's first byte is.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Bytes of address space the driver reserved.
    pub fn reserved(&self) -> u64 {
        self.reserved
    }
}

impl<D: DeviceApi> Drop for DeviceArena<D> {
    fn drop(&mut self) {
        // SAFETY: each call undoes one successful step of `create`, in
        // reverse order; the backend synchronized the stream first.
        unsafe {
            if self.mapped {
                self.api.unmap_memory(self.start, self.len);
            }
            if let Some(m) = self.memory.take() {
                self.api.release_memory(m);
            }
            self.api.free_va(self.start, self.reserved);
        }
    }
}
