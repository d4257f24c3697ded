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
//! * [`footprint`]: what a relocation does past the recorded bytes, where
//!   the backend maps zeroed slack after them (the host backend): the
//!   candidates are tried for the whole footprint first, and the rebase
//!   range reaches into the mapped footprint.
//! * [`pointers`]: the stored pointers of an input snapshot, for
//!   `rrstore show --pointers`.
//! * Debugging switches, options the caller sets (`rrstore` fills them from
//!   `RRSTORE_NO_POINTER_REBASE` and `RRSTORE_DEBUG_OCCUPY`):
//!   `ReplayOptions::pointer_scan` off turns the stored-pointer rebasing off
//!   (arguments and globals are still rebased), `ReplayOptions::occupy`
//!   makes the replay's processes hold an address range first (tests use it
//!   to take the recorded range away; [`occupy`]).

pub mod footprint;
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
/// [`candidates`] base: first the first one with room for the backend's
/// whole footprint (the arena and its zeroed slack:
/// `Relocation::slack_footprint`), else, when none has, the first one
/// with room for the arena (its slack then stops short, and the report
/// says where). A relocation rebases into the footprint where it is
/// mapped ([`footprint::span`]).
pub fn place(
    backend: &mut dyn Backend,
    mode: Placement,
    base: u64,
    size: u64,
    to: Option<u64>,
    image: &[u8],
) -> Result<Placed, BackendError> {
    let whole = backend.slack_footprint(size).filter(|&f| f > size);
    let relocated = |backend: &mut dyn Backend, new: u64| Placed {
        base: new,
        rebaser: (new != base).then(|| Rebaser {
            old_base: base,
            new_base: new,
            span: footprint::span(
                size,
                whole,
                backend.arena_slack().as_ref(),
                new.abs_diff(base),
            ),
        }),
    };
    // A GPU driver may hand back another address than the hint: a
    // relocation outcome, except under `recorded`.
    backend.allow_elsewhere(mode != Placement::Recorded);
    // The base the backend reports (`Backend::place`), or where it says
    // the driver put it.
    let at = |backend: &mut dyn Backend,
              asked: u64,
              whole_footprint: bool|
     -> Result<u64, BackendError> {
        let placed = backend.place(&ArenaRequest {
            base: asked,
            size,
            image,
            whole_footprint,
        })?;
        Ok(backend.placed_elsewhere().unwrap_or(placed.base))
    };
    let first_err = if mode == Placement::Relocate {
        None
    } else {
        match at(backend, base, false) {
            Ok(landed) => return Ok(relocated(backend, landed)),
            Err(e @ BackendError::Reserve { .. }) if mode == Placement::Auto => Some(e),
            Err(e) => return Err(e),
        }
    };
    if let Some(to) = to {
        check_target(base, size, to)?;
        let landed = at(backend, to, false)?;
        return Ok(relocated(backend, landed));
    }
    // Room for the whole footprint first (clear of the recorded one, so
    // that the two rebase ranges cannot overlap), then for the arena.
    let tries = whole
        .map(|f| candidates(base, f).into_iter().map(|c| (c, true)))
        .into_iter()
        .flatten()
        .chain(candidates(base, size).into_iter().map(|c| (c, false)));
    let mut last = first_err;
    for (c, whole_footprint) in tries {
        match at(backend, c, whole_footprint) {
            Ok(landed) => return Ok(relocated(backend, landed)),
            Err(e @ BackendError::Reserve { .. }) => {
                // The error of a try for the arena alone is the one to
                // report: it says why the arena itself found no room.
                if !whole_footprint || last.is_none() {
                    last = Some(e);
                }
            }
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
mod tests;
