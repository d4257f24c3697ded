//! Holding the recorded arena's address range in this process before a GPU
//! runtime initializes, so the runtime cannot place its own mappings there.
//!
//! A [`Placeholder`] is an anonymous `PROT_NONE` mapping created with
//! `MAP_FIXED_NOREPLACE` ([`crate::backend::fixed_range`]) over the page-rounded range (it never replaces an
//! existing mapping). The backend releases it right before asking the driver
//! to reserve the same range (`cuMemAddressReserve`/`hipMemAddressReserve`).

use crate::backend::fixed_range::map_noreplace;
pub use crate::backend::fixed_range::occupant_report;
use crate::backend::BackendError;

/// Round `[base, base+size)` outward to multiples of `granularity` (a power of
/// two or any positive value). A zero-sized range still covers one granule.
/// Returns `(start, len)`; `None` on overflow or a zero granularity.
pub fn round_range(base: u64, size: u64, granularity: u64) -> Option<(u64, u64)> {
    if granularity == 0 {
        return None;
    }
    let start = base - base % granularity;
    let end = base.checked_add(size.max(1))?;
    let end = end.checked_add(granularity - 1)? / granularity * granularity;
    Some((start, end - start))
}

/// A `PROT_NONE` reservation of a page-rounded range; unmapped on drop or by
/// [`Placeholder::release`].
pub struct Placeholder {
    start: u64,
    len: u64,
    mapped: bool,
}

impl Placeholder {
    /// Map `PROT_NONE` over `[base, base+size)` rounded to pages; fails with
    /// [`BackendError::Reserve`] naming what occupies the range.
    pub fn new(base: u64, size: u64) -> Result<Self, BackendError> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        let (start, len) = round_range(base, size, page).ok_or(BackendError::Reserve {
            base,
            size,
            reason: "the range overflows the 64-bit address space".into(),
        })?;
        map_noreplace(start, len, libc::PROT_NONE).map_err(|reason| BackendError::Reserve {
            base,
            size,
            reason,
        })?;
        Ok(Placeholder {
            start,
            len,
            mapped: true,
        })
    }

    /// Unmap now (right before the driver reservation).
    pub fn release(&mut self) {
        if self.mapped {
            // SAFETY: start/len is exactly the mapping created in `new`.
            unsafe { libc::munmap(self.start as *mut libc::c_void, self.len as usize) };
            self.mapped = false;
        }
    }
}

impl Drop for Placeholder {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_outward_to_granularity() {
        let g = 2 << 20;
        assert_eq!(
            round_range(0x7f00_0000_0000, 4096, g),
            Some((0x7f00_0000_0000, g))
        );
        assert_eq!(
            round_range(0x7f00_0010_0000, g, g),
            Some((0x7f00_0000_0000, 2 * g))
        );
        assert_eq!(round_range(g * 3, 0, g), Some((g * 3, g)));
        assert_eq!(round_range(g * 3 + 1, g - 1, g), Some((g * 3, g)));
        assert_eq!(round_range(u64::MAX - 10, 100, g), None);
        assert_eq!(round_range(1, 1, 0), None);
    }

    #[test]
    fn placeholder_refuses_an_occupied_range_and_names_the_occupant() {
        // Our own stack is certainly mapped.
        let local = 0u64;
        let addr = &local as *const u64 as u64;
        let err = Placeholder::new(addr, 8).err().expect("stack is mapped");
        let msg = err.to_string();
        assert!(msg.contains("occupied by"), "{msg}");
        assert!(matches!(err, BackendError::Reserve { .. }));
    }

    #[test]
    fn placeholder_holds_a_free_range_until_released() {
        let base = 0x5a5a_0000_0000u64;
        let mut p = Placeholder::new(base, 1 << 20).unwrap();
        // A second placeholder over the same range must fail while held.
        assert!(Placeholder::new(base, 4096).is_err());
        p.release();
        let again = Placeholder::new(base, 4096).unwrap();
        drop(again);
    }
}
