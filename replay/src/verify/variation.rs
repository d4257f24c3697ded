//! Several replays' outputs of one recording against its recorded output,
//! streamed: which bytes vary between the replays themselves (the kernel
//! is nondeterministic there) and which differ from the recorded output
//! in every replay, identically (a stable difference: what the kernel now
//! computes). Both are reported as [`RangeReport`]s mapped to the
//! argument buffers, as `replay` and `diff` map a mismatch.
//!
//! A byte that agrees in every replay but shares its 64-byte block with a
//! varying one is not counted as stable (see [`BLOCK`]).
//!
//! The same pass collects the run's [`Profile`] (the varying blocks and
//! the stable bytes' values), which `check` compares across runs.
//!
//! The stable difference also gets a digest (blake3 of every stable
//! byte's offset and value), so that two checks can tell whether it
//! changed without keeping the outputs: `check` compares a run's digest
//! with its baseline's.

use std::io::Read;

use serde::Serialize;

use super::profile::{Profile, ProfileBuilder};
use super::ranges::{RangeReport, RangeTally};
use super::ArgPointer;

/// What several replays of one recording produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Variation {
    /// Replays compared (the first one and its confirmations).
    pub replays: u32,
    /// How many different outputs they produced (by hash).
    pub distinct_outputs: u32,
    /// Bytes on which the replays disagree among themselves.
    pub varying: Option<RangeReport>,
    /// Bytes on which every replay agrees and differs from the recorded
    /// output.
    pub stable: Option<RangeReport>,
    /// blake3 (hex) of the stable bytes' offsets and values; `None` when
    /// there are none.
    pub stable_digest: Option<String>,
    /// The same, kept for later comparisons (history `run_profiles`).
    #[serde(skip)]
    pub profile: Profile,
}

/// Bytes compared per piece.
const PIECE: usize = 1 << 20;

/// The block a varying byte spoils: a byte that agrees in every replay
/// and differs from the recording, in an aligned block of this many bytes
/// (a cache line) where some byte varies, is not counted as stable. It is
/// most likely part of a varying value, or of varying data, whose other
/// bytes happened to agree (the high bytes of an address, a flag with two
/// states) in these few replays, and would make the stable ranges
/// themselves vary between checks.
pub const BLOCK: usize = 64;

/// Compare `outputs` (each `size` bytes) with `recorded`, byte by byte,
/// in pieces; `pointers` map the ranges to argument buffers. `distinct`
/// is the number of different output hashes (known to the caller).
pub fn compare(
    recorded: &mut dyn Read,
    outputs: &mut [Box<dyn Read>],
    size: u64,
    pointers: &[ArgPointer],
    distinct: u32,
) -> std::io::Result<Variation> {
    let mut varying = RangeTally::new(pointers.to_vec());
    let mut stable = RangeTally::new(pointers.to_vec());
    let mut digest = blake3::Hasher::new();
    let mut any_stable = false;
    let mut profile = ProfileBuilder::new();
    let mut expected = vec![0u8; PIECE];
    let mut bufs: Vec<Vec<u8>> = outputs.iter().map(|_| vec![0u8; PIECE]).collect();
    let mut off = 0u64;
    while off < size {
        let n = PIECE.min((size - off) as usize);
        recorded.read_exact(&mut expected[..n])?;
        for (r, b) in outputs.iter_mut().zip(bufs.iter_mut()) {
            r.read_exact(&mut b[..n])?;
        }
        // PIECE is a multiple of BLOCK: blocks are aligned in the arena.
        for start in (0..n).step_by(BLOCK) {
            let end = (start + BLOCK).min(n);
            let varies = |j: usize| {
                let first = bufs.first().map_or(expected[j], |b| b[j]);
                bufs.iter().any(|b| b[j] != first)
            };
            let spoiled = (start..end).any(varies);
            if spoiled {
                profile.varied(off + start as u64, (end - start) as u64);
            }
            for j in start..end {
                let at = off + j as u64;
                if spoiled {
                    if varies(j) {
                        varying.mark(at);
                    }
                    continue;
                }
                let value = bufs.first().map_or(expected[j], |b| b[j]);
                if value != expected[j] {
                    stable.mark(at);
                    profile.stable(at, value);
                    digest.update(&at.to_le_bytes());
                    digest.update(&[value]);
                    any_stable = true;
                }
            }
        }
        off += n as u64;
    }
    Ok(Variation {
        replays: outputs.len() as u32,
        distinct_outputs: distinct,
        varying: varying.finish(),
        stable: stable.finish(),
        stable_digest: any_stable.then(|| digest.finalize().to_hex().to_string()),
        profile: profile.finish(),
    })
}

impl Variation {
    /// Human-readable lines: the summary with the stable digest (which
    /// the history keeps, `check` reads it back), then the ranges.
    pub fn describe(&self, base: Option<u64>) -> Vec<String> {
        let bytes = |r: &Option<RangeReport>| r.as_ref().map_or(0, |r| r.differing_bytes);
        let mut out = vec![format!(
            "nondeterministic: {} distinct outputs in {} replays; {} byte(s) vary between replays, {} byte(s) differ from the recorded output in every replay{}",
            self.distinct_outputs,
            self.replays,
            bytes(&self.varying),
            bytes(&self.stable),
            self.stable_digest
                .as_ref()
                .map(|d| format!(" (stable digest {})", &d[..16]))
                .unwrap_or_default()
        )];
        if let Some(v) = &self.varying {
            out.push("varying between replays:".into());
            out.extend(v.describe(base).into_iter().map(|l| format!("  {l}")));
        }
        if let Some(s) = &self.stable {
            out.push("differing in every replay:".into());
            out.extend(s.describe(base).into_iter().map(|l| format!("  {l}")));
        }
        out
    }

    /// The stable digest's first 16 hex digits as [`describe`](Self::describe)
    /// writes it in a history row's detail (`check` compares them), or
    /// `Some("")` for a nondeterministic row without a stable difference;
    /// `None` when `detail` is not a nondeterministic row's.
    pub fn stable_digest_in(detail: &str) -> Option<String> {
        let line = detail
            .lines()
            .find(|l| l.starts_with("nondeterministic: "))?;
        Some(match line.split_once("(stable digest ") {
            Some((_, rest)) => rest.trim_end_matches(')').to_string(),
            None => String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed(v: &[u8]) -> Box<dyn Read> {
        Box::new(std::io::Cursor::new(v.to_vec()))
    }

    /// Offsets where the replays disagree are varying, those where they
    /// agree but differ from the recording are stable, and the digest
    /// survives a round trip through the description.
    #[test]
    fn varying_and_stable_bytes_are_told_apart() {
        let recorded = vec![0u8; 3000];
        let mut a = recorded.clone();
        let mut b = recorded.clone();
        a[100] = 1;
        b[100] = 2; // varies
        a[2000] = 9;
        b[2000] = 9; // stable
        a[120] = 7;
        b[120] = 7; // agrees, but in a block with a varying byte: not stable
        a[2100] = 5;
        b[2100] = 5; // another block: stable
        let ptrs = [ArgPointer {
            index: 1,
            offset: 0,
        }];
        let v = compare(
            &mut std::io::Cursor::new(recorded),
            &mut [boxed(&a), boxed(&b)],
            3000,
            &ptrs,
            2,
        )
        .unwrap();
        let vr = v.varying.as_ref().unwrap();
        assert_eq!((vr.first_offset, vr.differing_bytes), (100, 1));
        let sr = v.stable.as_ref().unwrap();
        assert_eq!((sr.first_offset, sr.differing_bytes), (2000, 2));
        assert_eq!(sr.largest[0].arg.unwrap().index, 1);
        let text = v.describe(None).join("\n");
        let d = Variation::stable_digest_in(&text).unwrap();
        assert_eq!(d, v.stable_digest.unwrap()[..16]);
        assert_eq!(Variation::stable_digest_in("mismatch"), None);
    }
}
