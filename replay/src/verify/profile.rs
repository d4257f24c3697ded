//! A differing run's profile: what `check` needs, later, to tell whether
//! a kernel whose output varies between replays changed, without keeping
//! its outputs.
//!
//! A profile holds the bytes that varied between the run's replays (as
//! [`BLOCK`]-aligned ranges) and the bytes that differed from the recorded
//! output alike in every replay, with their values. Two runs' outputs
//! then agree, as far as they can be known, when every byte that varied
//! in neither (nor in any earlier run of the recording: the learned mask)
//! has the same value in both. A digest of the stable bytes could not
//! do that: a byte that happens to agree in the few replays of one run
//! and varies in the next moves in or out of the digest, and low-entropy
//! garbage (a value that is zero in nine replays of ten) makes the verdict
//! flip between checks (docs/regress.md, "Kernels whose output varies").
//!
//! Invariants the comparison relies on: ranges are sorted, disjoint and
//! non-empty; a stable byte never lies in the profile's own varying
//! ranges; a stable byte's value differs from the recorded output's (so a
//! byte a profile does not list holds the recorded value, unless it
//! varied).
//!
//! Encoding (history table `run_profiles`, spec/STORE.md): a version
//! byte (1), then little-endian u64s: the number of varying ranges, each
//! range's start and end; a flag byte (1: stable bytes follow, 0: more
//! than [`STABLE_CAP`] differed, none kept); the number of stable runs,
//! each run's start, length and bytes. Decoding checks every length
//! against what is left: a profile read back is input like any other.

use std::ops::Range;

use super::variation::BLOCK;

/// Stable bytes kept at most: a run that differs from the recording in
/// more is compared by its output hash alone (a deterministic mismatch of
/// that size is not noise).
pub const STABLE_CAP: u64 = 1 << 20;

/// Varying ranges kept at most; more are coarsened (neighbours merged
/// across their gaps), which only masks more bytes.
pub const MAX_RANGES: usize = 1 << 16;

const VERSION: u8 = 1;

/// What a differing run's replays showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// Bytes that varied between the replays, block-aligned.
    pub varying: Vec<Range<u64>>,
    /// Runs of bytes that differed from the recorded output in every
    /// replay, alike: (offset, values). `None`: more than [`STABLE_CAP`].
    pub stable: Option<Vec<(u64, Vec<u8>)>>,
}

/// A profile read back from the store that does not decode.
#[derive(Debug, thiserror::Error)]
#[error("a run profile is damaged at byte {offset}: {what}")]
pub struct ProfileError {
    pub offset: usize,
    pub what: &'static str,
}

impl Profile {
    /// The encoded form (module documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![VERSION];
        let put = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(&v.to_le_bytes());
        put(&mut out, self.varying.len() as u64);
        for r in &self.varying {
            put(&mut out, r.start);
            put(&mut out, r.end);
        }
        match &self.stable {
            None => out.push(0),
            Some(runs) => {
                out.push(1);
                put(&mut out, runs.len() as u64);
                for (at, bytes) in runs {
                    put(&mut out, *at);
                    put(&mut out, bytes.len() as u64);
                    out.extend_from_slice(bytes);
                }
            }
        }
        out
    }

    /// Decode `bytes`, checking every count and range.
    pub fn decode(bytes: &[u8]) -> Result<Profile, ProfileError> {
        let mut r = Reader { bytes, pos: 0 };
        if r.byte()? != VERSION {
            return Err(r.err("unknown version"));
        }
        let n = r.count(16)?;
        let mut varying = Vec::with_capacity(n);
        for _ in 0..n {
            let (start, end) = (r.u64()?, r.u64()?);
            if start >= end || varying.last().is_some_and(|p: &Range<u64>| p.end > start) {
                return Err(r.err("varying ranges out of order"));
            }
            varying.push(start..end);
        }
        let stable = match r.byte()? {
            0 => None,
            1 => {
                let n = r.count(16)?;
                let mut runs = Vec::with_capacity(n);
                let mut end = 0u64;
                for _ in 0..n {
                    let at = r.u64()?;
                    let len = r.count(1)?;
                    if len == 0 || at < end {
                        return Err(r.err("stable runs out of order"));
                    }
                    end = at.saturating_add(len as u64);
                    runs.push((at, r.take(len)?.to_vec()));
                }
                Some(runs)
            }
            _ => return Err(r.err("unknown stable flag")),
        };
        if r.pos != bytes.len() {
            return Err(r.err("trailing bytes"));
        }
        Ok(Profile { varying, stable })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn err(&self, what: &'static str) -> ProfileError {
        ProfileError {
            offset: self.pos,
            what,
        }
    }
    fn take(&mut self, n: usize) -> Result<&[u8], ProfileError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| self.err("truncated"))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn byte(&mut self) -> Result<u8, ProfileError> {
        Ok(self.take(1)?[0])
    }
    fn u64(&mut self) -> Result<u64, ProfileError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }
    /// A count of items of at least `each` bytes: no more than what is left
    /// could hold (a forged count allocates nothing).
    fn count(&mut self, each: usize) -> Result<usize, ProfileError> {
        let n = self.u64()?;
        let left = (self.bytes.len() - self.pos) / each;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= left)
            .ok_or_else(|| self.err("count larger than the profile"))
    }
}

/// Collects a profile as the outputs stream by (see
/// [`crate::verify::variation::compare`]).
#[derive(Default)]
pub(crate) struct ProfileBuilder {
    varying: Vec<Range<u64>>,
    stable: Option<Vec<(u64, Vec<u8>)>>,
    stable_bytes: u64,
}

impl ProfileBuilder {
    pub(crate) fn new() -> ProfileBuilder {
        ProfileBuilder {
            stable: Some(Vec::new()),
            ..ProfileBuilder::default()
        }
    }

    /// The block at `at` (`len` bytes) varied.
    pub(crate) fn varied(&mut self, at: u64, len: u64) {
        match self.varying.last_mut() {
            Some(r) if r.end == at => r.end = at + len,
            _ => self.varying.push(at..at + len),
        }
        if self.varying.len() > 2 * MAX_RANGES {
            self.varying = coarsen(std::mem::take(&mut self.varying), MAX_RANGES);
        }
    }

    /// The byte at `at` differed from the recording as `value`, alike in
    /// every replay.
    pub(crate) fn stable(&mut self, at: u64, value: u8) {
        self.stable_bytes += 1;
        if self.stable_bytes > STABLE_CAP {
            self.stable = None;
        }
        let Some(runs) = self.stable.as_mut() else {
            return;
        };
        match runs.last_mut() {
            Some((start, bytes)) if *start + bytes.len() as u64 == at => bytes.push(value),
            _ => runs.push((at, vec![value])),
        }
    }

    pub(crate) fn finish(self) -> Profile {
        Profile {
            varying: coarsen(self.varying, MAX_RANGES),
            stable: self.stable,
        }
    }
}

/// Merge neighbouring ranges across the smallest gaps until at most `max`
/// remain (each merge only masks more).
fn coarsen(mut ranges: Vec<Range<u64>>, max: usize) -> Vec<Range<u64>> {
    let mut gap = BLOCK as u64;
    while ranges.len() > max {
        let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match out.last_mut() {
                Some(p) if r.start - p.end <= gap => p.end = r.end,
                _ => out.push(r),
            }
        }
        ranges = out;
        gap = gap.saturating_mul(2);
    }
    ranges
}

/// The union of sorted range lists, sorted and merged.
pub fn union<'a>(lists: impl IntoIterator<Item = &'a [Range<u64>]>) -> Vec<Range<u64>> {
    let mut all: Vec<Range<u64>> = lists.into_iter().flatten().cloned().collect();
    all.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(all.len());
    for r in all {
        match out.last_mut() {
            Some(p) if r.start <= p.end => p.end = p.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// Whether two runs' outputs differ on a byte outside `mask` (sorted,
/// merged ranges that varied in either run or any earlier one), from
/// their stable bytes; `None` when either kept none (over the cap).
/// A byte one lists and the other does not differs: the other holds the
/// recorded value there, which the listed one is not.
pub fn differs_outside(a: &Profile, b: &Profile, mask: &[Range<u64>]) -> Option<bool> {
    let (sa, sb) = (a.stable.as_ref()?, b.stable.as_ref()?);
    let bytes = |runs: &[(u64, Vec<u8>)]| -> Vec<(u64, u8)> {
        runs.iter()
            .flat_map(|(at, v)| v.iter().enumerate().map(move |(i, &x)| (at + i as u64, x)))
            .filter(|(at, _)| !masked(mask, *at))
            .collect()
    };
    Some(bytes(sa) != bytes(sb))
}

/// Whether `at` lies in one of `mask`'s sorted ranges.
fn masked(mask: &[Range<u64>], at: u64) -> bool {
    let i = mask.partition_point(|r| r.end <= at);
    mask.get(i).is_some_and(|r| r.contains(&at))
}

// Byte ranges, one of them in a list: what the profiles hold.
#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn profile(varying: &[Range<u64>], stable: &[(u64, &[u8])]) -> Profile {
        Profile {
            varying: varying.to_vec(),
            stable: Some(stable.iter().map(|(a, v)| (*a, v.to_vec())).collect()),
        }
    }

    #[test]
    fn a_profile_round_trips() {
        let p = profile(&[0..64, 128..256], &[(300, &[1, 2, 3]), (400, &[9])]);
        assert_eq!(Profile::decode(&p.encode()).unwrap(), p);
        let over = Profile {
            varying: vec![],
            stable: None,
        };
        assert_eq!(Profile::decode(&over.encode()).unwrap(), over);
    }

    /// Every truncation and every single-byte change of a real profile is
    /// an error or a valid profile, never a panic or a huge allocation.
    #[test]
    fn damaged_profiles_are_errors() {
        let good = profile(&[64..128], &[(10, &[7, 7]), (200, &[1])]).encode();
        for n in 0..good.len() {
            let e = Profile::decode(&good[..n]).unwrap_err();
            assert!(e.offset <= n, "{e}");
        }
        for i in 0..good.len() {
            for x in [0u8, 1, 0x7f, 0xff] {
                let mut bad = good.clone();
                bad[i] = x;
                let _ = Profile::decode(&bad);
            }
        }
        let mut forged = vec![VERSION];
        forged.extend_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(
            Profile::decode(&forged).unwrap_err().what,
            "count larger than the profile"
        );
        let unordered = profile(&[128..192, 0..64], &[]).encode();
        assert!(Profile::decode(&unordered).is_err());
    }

    /// Bytes masked in either run are no evidence; a byte one run lists
    /// and the other does not is a difference.
    #[test]
    fn only_unmasked_stable_bytes_are_compared() {
        let a = profile(&[], &[(10, &[1, 2]), (100, &[5])]);
        let same = profile(&[64..128], &[(10, &[1, 2])]);
        let mask = union([&a.varying[..], &same.varying[..]]);
        assert_eq!(differs_outside(&a, &same, &mask), Some(false));
        assert_eq!(differs_outside(&a, &same, &[]), Some(true));
        let other = profile(&[], &[(10, &[1, 3]), (100, &[5])]);
        assert_eq!(differs_outside(&a, &other, &[]), Some(true));
        assert_eq!(differs_outside(&a, &other, &[0..64]), Some(false));
        let verified = profile(&[], &[]);
        assert_eq!(differs_outside(&a, &verified, &[0..128]), Some(false));
        let over = Profile {
            varying: vec![],
            stable: None,
        };
        assert_eq!(differs_outside(&a, &over, &[]), None);
    }

    #[test]
    fn too_many_ranges_are_coarsened_and_stable_bytes_capped() {
        let mut b = ProfileBuilder::new();
        for i in 0..(3 * MAX_RANGES as u64) {
            b.varied(i * 256, 64);
        }
        for i in 0..=STABLE_CAP {
            b.stable(1 << 40 | (i * 2), 1);
        }
        let p = b.finish();
        assert!(p.varying.len() <= MAX_RANGES);
        assert_eq!(p.varying[0].start, 0);
        assert!(p.varying.last().unwrap().end >= (3 * MAX_RANGES as u64 - 1) * 256 + 64);
        assert!(p.stable.is_none());
        assert_eq!(union([&[0..10, 20..30][..], &[5..25][..]]), vec![0..30]);
    }
}
