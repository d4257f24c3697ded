//! A relocated arena's footprint: the recorded bytes plus the zeroed slack
//! a backend maps after them (the host backend's `slack`, issue 44). It
//! owns what relocation does beyond the recorded bytes: how far from each
//! base pointers are rebased ([`span`]).
//!
//! Why the rebase range reaches past the recorded bytes: the recording's
//! arena was the whole footprint (LLVM's device memory block), so a value
//! in `[old, old + footprint)` is an address of the recording's arena even
//! where it lies past the snapshot's bytes: the one-past-the-end pointer
//! of the last buffer (`old + size`, an `end` pointer a kernel counts down
//! from), or an address the kernel computes into memory it reads as zeros.
//! Moved by the relocation delta, it lands in the replay's slack, which
//! holds the same zeros; left alone, it points where the replay has
//! nothing. The range is only as wide as the memory the replay has there
//! (a short slack narrows it), and never wider than the distance between
//! the two bases (the two ranges must not overlap, or the back-translation
//! could not tell a recorded address from a relocated one).
//!
//! The safeguards of the scan stay as they were ([`super::scan`]): only
//! 8-byte words at 8-aligned arena offsets, arguments and globals' words,
//! and the back-translation of every word in the new range after the last
//! launch. A wider range makes a random 64-bit word a little likelier to
//! look like a pointer (`span / 2^64` per word: about `3.6e-12` for a
//! 64 MiB footprint, docs/replay.md "Limits").

use crate::backend::host::slack::Slack;

/// Bytes from each base that a relocation rebases, for an arena of `size`
/// bytes moved by `distance` (the absolute difference of the bases), on a
/// backend whose memory reaches `footprint` bytes from the base
/// (`Relocation::slack_footprint`) and that mapped `slack` after the arena:
///
/// * no slack (a GPU backend, or none reported): `size`;
/// * the slack mapped in full: `footprint`;
/// * a short slack: `footprint` less what is missing, so every rebased
///   address lands in mapped memory;
///
/// at most `distance` (never below `size`: a forced base is refused
/// nearer than that, `check_target`).
pub fn span(size: u64, footprint: Option<u64>, slack: Option<&Slack>, distance: u64) -> u64 {
    let (Some(footprint), Some(slack)) = (footprint, slack) else {
        return size;
    };
    let missing = slack.wanted.saturating_sub(slack.mapped);
    footprint.saturating_sub(missing).min(distance).max(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn slack(wanted: u64, mapped: u64) -> Slack {
        Slack {
            wanted,
            mapped,
            short: None,
        }
    }

    #[test]
    fn the_span_is_the_memory_the_replay_has_past_the_base() {
        let far = 1 << 44;
        // No slack: the recorded bytes.
        assert_eq!(span(512, None, None, far), 512);
        assert_eq!(span(512, Some(64 * MIB), None, far), 512);
        // All of it mapped.
        let full = slack(64 * MIB - 4096, 64 * MIB - 4096);
        assert_eq!(span(512, Some(64 * MIB), Some(&full), far), 64 * MIB);
        // 32 MiB of it missing.
        let short = slack(64 * MIB - 4096, 32 * MIB - 4096);
        assert_eq!(span(512, Some(64 * MIB), Some(&short), far), 32 * MIB);
        // None of it: at least the recorded bytes.
        let none = slack(64 * MIB - 4096, 0);
        assert_eq!(span(512, Some(64 * MIB), Some(&none), far), 4096);
        assert_eq!(
            span(8192, Some(8192 + 4096), Some(&slack(4096, 0)), far),
            8192
        );
        // A base 1 MiB away: the two ranges must not overlap.
        assert_eq!(span(512, Some(64 * MIB), Some(&full), MIB), MIB);
        assert_eq!(span(512, Some(64 * MIB), Some(&full), 100), 512);
    }
}
