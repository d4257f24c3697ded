//! Where the arena goes (issue 19): at its recorded address, or relocated.
//!
//! * [`Placement`]: `recorded` (the recorded address or a reservation error,
//!   exit 10), `relocate` (another address of the same size), `auto`
//!   (default: recorded when the range can be had, else relocated).
//! * [`place`] reserves the arena through the backend's own `reserve`: at
//!   the recorded base, else at the address asked for, else at the first
//!   free one of [`candidates`]. A relocated base keeps the recorded base's
//!   offset within a page ([`PAGE`]; a forced base must), and a chosen
//!   candidate within [`ALIGN`] (2 MiB: the allocation granularity of the
//!   GPU drivers, and a huge page), so every alignment the program could
//!   rely on still holds.
//! * [`scan::Rebaser`]: the pointer scan run on the decoded bytes during
//!   rehydration (the host runner scans each chunk right after decoding it,
//!   the engine scans each staging window before committing it), the
//!   rebasing of arguments and globals, and the back-translation of the
//!   output after the last launch.
//! * [`pointers`]: the stored pointers of an input snapshot, for
//!   `rrstore show --pointers`.
//! * Debugging switches, options the caller sets (`rrstore` fills them from
//!   `RRSTORE_NO_POINTER_REBASE` and `RRSTORE_DEBUG_OCCUPY`):
//!   `ReplayOptions::pointer_scan` off turns the stored-pointer rebasing off
//!   (arguments and globals are still rebased), `ReplayOptions::occupy`
//!   makes the replay's processes hold an address range first (tests use it
//!   to take the recorded range away; [`occupy`]).

pub mod globals;
pub mod occupy;
pub mod pointers;
pub mod scan;

use serde::Serialize;

use crate::backend::rehydrate::ArenaRequest;
use crate::backend::{Backend, BackendError};
pub use scan::Rebaser;

/// See [`occupy`].
pub const OCCUPY_ENV: &str = occupy::OCCUPY_ENV;

/// Alignment a chosen relocation base keeps from the recorded one: 2 MiB
/// (the CUDA/HIP allocation granularity, a huge page).
pub const ALIGN: u64 = 2 << 20;
/// Alignment every relocated base keeps: a page.
pub const PAGE: u64 = 4096;

/// `--placement`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    Recorded,
    Relocate,
    #[default]
    Auto,
}

impl Placement {
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Recorded => "recorded",
            Placement::Relocate => "relocate",
            Placement::Auto => "auto",
        }
    }
}

/// What placement a replay used (the report's `placement` object).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PlacementReport {
    /// `recorded` or `relocated`.
    pub mode: &'static str,
    /// Where the arena was (its base).
    pub address: u64,
    /// Where it was recorded.
    pub recorded_address: u64,
    /// Pointers stored in the arena that were rebased (last repetition).
    pub rebased_pointers: u64,
    pub rebased_args: u64,
    /// 8-byte words of the globals' data that were rebased.
    pub rebased_globals: u64,
    /// Arguments and stored words that were the address of a device global
    /// in the recording process, rebased to the replay's copy
    /// ([`globals`]; any placement).
    pub global_addresses: u64,
    /// Words of the output translated back to the recorded arena.
    pub back_translated: u64,
    /// Whether the stored-pointer scan ran (`ReplayOptions::pointer_scan`).
    pub scan: bool,
    /// Bytes of zeroed slack mapped after the arena (host backend:
    /// `backend::host::slack`; never part of the output).
    pub slack: u64,
    /// Why less slack was mapped than the recording's reservation asks
    /// (what lies in the range); `None` when all of it was.
    pub slack_short: Option<String>,
}

impl PlacementReport {
    /// One line for the history row and the human report.
    pub fn summary(&self) -> String {
        let slack = match &self.slack_short {
            Some(why) => format!(
                "; zeroed slack after the arena: {} bytes ({why})",
                self.slack
            ),
            None => String::new(),
        };
        self.summary_without_slack() + &slack
    }

    fn summary_without_slack(&self) -> String {
        let globals = if self.global_addresses > 0 {
            format!(
                "; {} global address(es) rebased to the replay's copy",
                self.global_addresses
            )
        } else {
            String::new()
        };
        if self.mode == "recorded" {
            format!("recorded {:#x}{globals}", self.address)
        } else {
            format!(
                "relocated {:#x} (recorded {:#x}; rebased {} stored pointer(s), {} argument(s), {} global word(s){})",
                self.address,
                self.recorded_address,
                self.rebased_pointers,
                self.rebased_args,
                self.rebased_globals,
                if self.scan { "" } else { "; stored-pointer rebasing off" }
            ) + &globals
        }
    }
}

/// Relocation bases tried in turn for an arena recorded at `base`, `size`
/// bytes: far from the ranges the recorders' processes use (`mmap` areas
/// near the top of the 47-bit user space, the heap near the bottom) and from
/// the recorded range itself, each with `base`'s offset within [`ALIGN`].
pub fn candidates(base: u64, size: u64) -> Vec<u64> {
    let low = base % ALIGN;
    (0..8u64)
        .map(|k| 0x2000_0000_0000u64 + k * 0x0800_0000_0000 + low)
        .filter(|&c| {
            c.checked_add(size)
                .is_some_and(|end| end <= 0x7000_0000_0000)
        })
        .filter(|&c| c + size <= base || base.saturating_add(size) <= c)
        .collect()
}

/// Where [`place`] put the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    pub base: u64,
    /// Set when relocated.
    pub rebaser: Option<Rebaser>,
}

/// Reserve the arena recorded at `base`, `size` bytes, as `mode` says; a
/// relocated arena goes to `to` when given, else to the first free
/// [`candidates`] base.
pub fn place(
    backend: &mut dyn Backend,
    mode: Placement,
    base: u64,
    size: u64,
    to: Option<u64>,
    image: &[u8],
) -> Result<Placed, BackendError> {
    let relocated = |new: u64| Placed {
        base: new,
        rebaser: (new != base).then_some(Rebaser {
            old_base: base,
            new_base: new,
            size,
        }),
    };
    // A GPU driver may hand back another address than the hint: a
    // relocation outcome, except under `recorded`.
    backend.allow_elsewhere(mode != Placement::Recorded);
    // The base the backend reports (`Backend::place`), or where it says
    // the driver put it.
    let at = |backend: &mut dyn Backend, asked: u64| -> Result<u64, BackendError> {
        let placed = backend.place(&ArenaRequest {
            base: asked,
            size,
            image,
        })?;
        Ok(backend.placed_elsewhere().unwrap_or(placed.base))
    };
    let first_err = if mode == Placement::Relocate {
        None
    } else {
        match at(backend, base) {
            Ok(landed) => return Ok(relocated(landed)),
            Err(e @ BackendError::Reserve { .. }) if mode == Placement::Auto => Some(e),
            Err(e) => return Err(e),
        }
    };
    if let Some(to) = to {
        check_target(base, size, to)?;
        let landed = at(backend, to)?;
        return Ok(relocated(landed));
    }
    let mut last = first_err;
    for c in candidates(base, size) {
        match at(backend, c) {
            Ok(landed) => return Ok(relocated(landed)),
            Err(e @ BackendError::Reserve { .. }) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(BackendError::Reserve {
        base,
        size,
        reason: "no relocation address is free for an arena of this size".into(),
    }))
}

/// A forced relocation base must keep the recorded alignment and must not
/// overlap the recorded range (back-translation could not tell the two
/// arenas apart).
fn check_target(base: u64, size: u64, to: u64) -> Result<(), BackendError> {
    let err = |reason: String| BackendError::Reserve {
        base: to,
        size,
        reason,
    };
    if to % PAGE != base % PAGE {
        return Err(err(format!(
            "a relocated arena keeps the recorded base's offset {:#x} within a {PAGE}-byte page (alignment the program may rely on); use {:#x} instead",
            base % PAGE,
            to - to % PAGE + base % PAGE
        )));
    }
    if to != base && to < base.saturating_add(size) && base < to.saturating_add(size) {
        return Err(err(format!(
            "it overlaps the recorded range {base:#x}..{:#x}; choose an address at least {size:#x} bytes away",
            base.saturating_add(size)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Relocation, Reporting};

    #[test]
    fn candidates_keep_the_offset_and_stay_clear_of_the_recorded_range() {
        let base = 0x7f1a_fde0_0010;
        let c = candidates(base, 1 << 30);
        assert!(!c.is_empty());
        for a in &c {
            assert_eq!(a % ALIGN, base % ALIGN);
            assert!(a + (1 << 30) <= base);
        }
        // A recorded range among the candidates is skipped.
        let c = candidates(0x2000_0000_0010, 4096);
        assert!(c.iter().all(|&a| a != 0x2000_0000_0010));
    }

    #[test]
    fn a_forced_base_must_keep_the_alignment_and_not_overlap() {
        let base = 0x7f1a_fde0_0010;
        assert!(check_target(base, 4096, 0x3000_0000_0010).is_ok());
        let e = check_target(base, 4096, 0x3000_0000_0000).unwrap_err();
        assert!(e.to_string().contains("offset 0x10"), "{e}");
        assert!(e.to_string().contains("use 0x300000000010"), "{e}");
        let e = check_target(base, 1 << 20, base + 0x1_0000).unwrap_err();
        assert!(e.to_string().contains("overlaps"), "{e}");
    }

    /// A device whose reservations at the bases in `taken` fail (and that
    /// records what it was asked for), like a runner whose range is held;
    /// with `driver_picks`, a device that puts a reservation it is allowed
    /// to place elsewhere there instead (a GPU driver ignoring the hint).
    #[derive(Default)]
    struct Device {
        taken: Vec<u64>,
        asked: Vec<u64>,
        driver_picks: Option<u64>,
        allowed: bool,
        elsewhere: Option<u64>,
    }

    impl Backend for Device {
        fn name(&self) -> &'static str {
            "test"
        }
        fn device_description(&self) -> String {
            String::new()
        }
        fn reserve(&mut self, base: u64, size: u64) -> Result<(), BackendError> {
            self.asked.push(base);
            if let (Some(at), true) = (self.driver_picks, self.allowed) {
                self.elsewhere = (at != base).then_some(at);
                return Ok(());
            }
            if self.taken.contains(&base) || self.driver_picks.is_some() {
                return Err(BackendError::Reserve {
                    base,
                    size,
                    reason: "the range is occupied".into(),
                });
            }
            Ok(())
        }
        fn upload(&mut self, _: u64, _: &[u8]) -> Result<(), BackendError> {
            Ok(())
        }
        fn load_image(&mut self, _: &[u8], _: &str) -> Result<(), BackendError> {
            Ok(())
        }
        fn write_global(&mut self, _: &str, _: &[u8]) -> Result<(), BackendError> {
            Ok(())
        }
        fn launch(
            &mut self,
            _: &[u64],
            _: &crate::backend::LaunchParams,
        ) -> Result<std::time::Duration, BackendError> {
            Ok(std::time::Duration::ZERO)
        }
        fn download(&mut self, _: u64, _: &mut [u8]) -> Result<(), BackendError> {
            Ok(())
        }
    }

    impl Reporting for Device {}

    impl Relocation for Device {
        fn allow_elsewhere(&mut self, allow: bool) {
            self.allowed = allow;
        }

        fn placed_elsewhere(&self) -> Option<u64> {
            self.elsewhere
        }
    }

    #[test]
    fn a_driver_that_places_the_arena_elsewhere_relocates_it_unless_recorded() {
        let base = 0x7f1a_fde0_0010;
        let at = 0x7e00_0020_0010;
        let mut d = Device {
            driver_picks: Some(at),
            ..Device::default()
        };
        let p = place(&mut d, Placement::Auto, base, 4096, None, &[]).unwrap();
        assert_eq!(p.base, at);
        assert_eq!(p.rebaser.map(|r| r.new_base), Some(at));
        let e = place(&mut d, Placement::Recorded, base, 4096, None, &[]).unwrap_err();
        assert!(matches!(e, BackendError::Reserve { .. }));
    }

    #[test]
    fn auto_falls_back_to_the_first_free_candidate_and_recorded_does_not() {
        let base = 0x7f1a_fde0_0010;
        let size = 1 << 20;
        let first = candidates(base, size)[0];
        // The recorded range and the first candidate are taken.
        let mut d = Device {
            taken: vec![base, first],
            ..Device::default()
        };
        let p = place(&mut d, Placement::Auto, base, size, None, &[]).unwrap();
        let second = candidates(base, size)[1];
        assert_eq!(d.asked, vec![base, first, second]);
        assert_eq!(p.base, second);
        assert_eq!(
            p.rebaser,
            Some(Rebaser {
                old_base: base,
                new_base: second,
                size
            })
        );
        let e = place(&mut d, Placement::Recorded, base, size, None, &[]).unwrap_err();
        assert!(matches!(e, BackendError::Reserve { base: b, .. } if b == base));
        // Free: auto keeps the recorded address, relocate never tries it.
        let mut d = Device::default();
        let p = place(&mut d, Placement::Auto, base, size, None, &[]).unwrap();
        assert_eq!((p.base, p.rebaser), (base, None));
        let to = 0x3000_0000_0010;
        let p = place(&mut d, Placement::Relocate, base, size, Some(to), &[]).unwrap();
        assert_eq!(p.base, to);
        assert_eq!(d.asked, vec![base, to]);
    }

    #[test]
    fn summary_names_the_placement() {
        let r = PlacementReport {
            mode: "relocated",
            address: 0x3000_0000_0010,
            recorded_address: 0x7f00_0000_0010,
            rebased_pointers: 3,
            rebased_args: 1,
            scan: true,
            ..Default::default()
        };
        assert!(r.summary().starts_with("relocated 0x300000000010"));
        assert!(r.summary().contains("3 stored pointer(s)"));
    }
}
