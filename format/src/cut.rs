//! The FastCDC 2020 cut point, exactly as `fastcdc::v2020` computes it, with
//! runs of zero bytes crossed without hashing them byte by byte.
//!
//! Why: device arenas are often largely zero (unused heap, padding,
//! cleared buffers), and a zero run is the worst case of the gear loop: it
//! never cuts before the maximum chunk size, so every byte is hashed. The
//! gear hash forgets its state after 64 bytes (it shifts left two bits per
//! pair of bytes), so once 32 pairs of zeros went in, the hash is a fixed
//! point `full` (and `half` after the first byte of the next pair): from
//! then on, as long as the bytes stay zero, the states repeat and the cut
//! tests give the same answers. Where neither state passes the size
//! region's masks, the loop jumps to the first pair holding a non-zero
//! byte (or the region's end) with the hash still `full`: the same state
//! the byte-by-byte loop would be in there. The jump is taken only on the
//! fixed point, so the cut points are those of the crate whatever the data
//! (tested against it below and, through the scanner, against
//! [`crate::chunk::Chunker`]).

use fastcdc::v2020::{get_gear_with_seed, logarithm2, MASKS};

use crate::chunk::ChunkParams;
use crate::zeros::first_nonzero;

/// Cuts with one set of (validated) parameters; the crate's level-1
/// normalization and unseeded gear tables, as `fastcdc::v2020::FastCDC::new`.
pub struct Cutter {
    min: usize,
    avg: usize,
    max: usize,
    mask_s: u64,
    mask_l: u64,
    gear: Box<[u64; 256]>,
    gear_ls: Box<[u64; 256]>,
    /// The hash after 32 or more pairs of zero bytes (after the first byte
    /// of one more pair it is `(full << 2) + gear_ls[0]`).
    full: u64,
    /// Zero runs can be jumped in the small-mask / large-mask region.
    skip_s: bool,
    skip_l: bool,
}

impl Cutter {
    /// `p` must be validated ([`ChunkParams::validate`]).
    pub fn new(p: ChunkParams) -> Cutter {
        let bits = logarithm2(p.avg);
        let mask_s = MASKS[(bits + 1) as usize];
        let mask_l = MASKS[(bits - 1) as usize];
        let (gear, gear_ls) = get_gear_with_seed(0);
        let mut full = 0u64;
        for _ in 0..32 {
            full = (full << 2).wrapping_add(gear_ls[0]).wrapping_add(gear[0]);
        }
        let half = (full << 2).wrapping_add(gear_ls[0]);
        let passes = |m: u64| half & (m << 1) != 0 && full & m != 0;
        Cutter {
            min: p.min as usize,
            avg: p.avg as usize,
            max: p.max as usize,
            mask_s,
            mask_l,
            skip_s: passes(mask_s),
            skip_l: passes(mask_l),
            gear,
            gear_ls,
            full,
        }
    }

    /// Length of the first chunk of `data` (`data.len()` when it ends before
    /// a cut: exact when `data` holds at least `max` bytes or ends where the
    /// stream ends). The crate's `cut_gear`, plus the zero-run jump.
    pub fn first(&self, data: &[u8]) -> usize {
        let mut remaining = data.len();
        if remaining <= self.min {
            return remaining;
        }
        let mut center = self.avg;
        if remaining > self.max {
            remaining = self.max;
        } else if remaining < center {
            center = remaining;
        }
        let mut index = self.min / 2;
        let mut hash = 0u64;
        let regions = [
            (center / 2, self.mask_s, self.skip_s),
            (remaining / 2, self.mask_l, self.skip_l),
        ];
        for (end, mask, skip) in regions {
            let mask_ls = mask << 1;
            while index < end {
                let a = index * 2;
                hash = (hash << 2).wrapping_add(self.gear_ls[data[a] as usize]);
                if hash & mask_ls == 0 {
                    return a;
                }
                hash = hash.wrapping_add(self.gear[data[a + 1] as usize]);
                if hash & mask == 0 {
                    return a + 1;
                }
                index += 1;
                if skip && hash == self.full {
                    index = zero_pairs_end(data, index, end);
                }
            }
        }
        remaining
    }
}

/// The first pair index in `[from, end)` whose two bytes are not both zero
/// (`end` if there is none).
fn zero_pairs_end(data: &[u8], from: usize, end: usize) -> usize {
    match first_nonzero(&data[from * 2..end * 2]) {
        Some(p) => from + p / 2,
        None => end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rrstore_tests::noise;

    fn crate_first(data: &[u8], p: ChunkParams) -> usize {
        fastcdc::v2020::FastCDC::new(data, p.min, p.avg, p.max)
            .next()
            .map_or(data.len(), |c| c.length)
    }

    fn all_cuts(c: &Cutter, data: &[u8]) -> Vec<usize> {
        let mut at = 0;
        let mut out = Vec::new();
        while at < data.len() {
            at += c.first(&data[at..]);
            out.push(at);
        }
        out
    }

    fn crate_cuts(data: &[u8], p: ChunkParams) -> Vec<usize> {
        fastcdc::v2020::FastCDC::new(data, p.min, p.avg, p.max)
            .map(|c| c.offset + c.length)
            .collect()
    }

    /// Zero runs of every length and position around the size regions'
    /// edges, between noise: the same cuts as the crate.
    #[test]
    fn same_cuts_as_the_crate_around_zero_runs() {
        let params = [
            ChunkParams::default(),
            ChunkParams {
                min: 64,
                avg: 256,
                max: 1024,
            },
            ChunkParams {
                min: 1024,
                avg: 4096,
                max: 16384,
            },
        ];
        for p in params {
            let c = Cutter::new(p);
            let base = noise(4 * p.max as usize, 7);
            let (min, avg, max) = (p.min as usize, p.avg as usize, p.max as usize);
            let points = [
                0,
                1,
                63,
                64,
                65,
                127,
                128,
                129,
                min - 1,
                min,
                min + 1,
                avg - 3,
                avg,
                avg + 1,
                max - 2,
                max,
                max + 5,
            ];
            for &start in &points {
                for &len in &[1, 2, 63, 64, 65, 66, 200, avg, max, 2 * max, 3 * max] {
                    let mut d = base.clone();
                    let end = (start + len).min(d.len());
                    d[start..end].fill(0);
                    assert_eq!(
                        all_cuts(&c, &d),
                        crate_cuts(&d, p),
                        "{p:?} zeros {start}..{end}"
                    );
                    for cut in [end, end + 1, max, max + 1] {
                        let t = &d[..cut.min(d.len())];
                        assert_eq!(
                            c.first(t),
                            crate_first(t, p),
                            "{p:?} zeros {start}..{end} len {cut}"
                        );
                    }
                }
            }
            let zeros = vec![0u8; 3 * max + 17];
            assert_eq!(all_cuts(&c, &zeros), crate_cuts(&zeros, p));
            let mut sparse = vec![0u8; 8 * max];
            for i in (0..sparse.len()).step_by(997) {
                sparse[i] = (i % 251) as u8 + 1;
            }
            assert_eq!(all_cuts(&c, &sparse), crate_cuts(&sparse, p));
            assert_eq!(all_cuts(&c, &base), crate_cuts(&base, p));
            assert_eq!(c.first(&[]), 0);
        }
    }

    /// The jump is taken: a long zero run is crossed (a test that would
    /// pass without the jump would not prove the fast path exists).
    #[test]
    fn zero_runs_are_jumped_with_the_default_parameters() {
        let c = Cutter::new(ChunkParams::default());
        assert!(c.skip_s && c.skip_l, "the default masks allow the jump");
        assert_eq!(zero_pairs_end(&[0, 0, 0, 0, 0, 1, 0, 0], 0, 4), 2);
        assert_eq!(zero_pairs_end(&[0, 0, 0, 0], 1, 2), 2);
    }
}
