//! The pointer scan and its inverse, over bytes of the arena.
//!
//! A stored pointer is an 8-byte little-endian word at an arena offset that
//! is a multiple of 8 (the recorders' arenas start 16-byte aligned, so these
//! are the address-aligned words) whose value lies in the recorded arena's
//! rebase range `[old_base, old_base + span)`: the recorded bytes, or the
//! arena's footprint where the replay maps zeroed slack after them
//! ([`super::footprint`]). [`Rebaser::rebase`] adds the relocation
//! delta to each such word in place and returns their offsets (the exact
//! rebased list: 8 bytes per rebased word, so at worst as large as the
//! arena, when every word is a pointer; typically a few entries).
//! [`Rebaser::back_translate`] does the inverse after the kernel: every
//! word whose value lies in the new range `[new_base, new_base + span)`
//! (the rebased words the kernel left alone and any pointer it wrote)
//! gets its recorded value back, so the output compares with the recorded
//! one byte for byte.

/// Slices at least this long are scanned on several threads.
const PARALLEL_MIN: usize = 4 << 20;

/// The two arenas of a relocated replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rebaser {
    pub old_base: u64,
    pub new_base: u64,
    /// Bytes from each base that move: the arena's size, or its footprint
    /// where the slack after it is mapped ([`super::footprint::span`]).
    pub span: u64,
}

impl Rebaser {
    /// `value` moved from the recorded arena into the new one, if it points
    /// into the recorded arena.
    pub fn forward(&self, value: u64) -> Option<u64> {
        let off = value.wrapping_sub(self.old_base);
        (off < self.span).then(|| self.new_base.wrapping_add(off))
    }

    /// `value` moved from the new arena back into the recorded one, if it
    /// points into the new arena.
    pub fn backward(&self, value: u64) -> Option<u64> {
        let off = value.wrapping_sub(self.new_base);
        (off < self.span).then(|| self.old_base.wrapping_add(off))
    }

    /// Rebase the stored pointers of `bytes`, the arena bytes from arena
    /// offset `offset` (a multiple of 8); words that do not fit whole in
    /// `bytes` are left alone (see [`Rebaser::rebase_word_at`]). Returns the
    /// arena offsets of the rebased words, in increasing order.
    pub fn rebase(&self, bytes: &mut [u8], offset: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let m = Move::new(self.old_base, self.new_base, self.span);
        map_words(m, bytes, offset, &mut out);
        out
    }

    /// Rebase the one word at arena offset `at` (a multiple of 8) that
    /// straddles two separately decoded pieces, given the arena bytes from
    /// `offset` (the caller's view covering the whole word). Returns whether
    /// it was rebased.
    pub fn rebase_word_at(&self, bytes: &mut [u8], offset: u64, at: u64) -> bool {
        let Some(i) = at.checked_sub(offset).and_then(|i| usize::try_from(i).ok()) else {
            return false;
        };
        let Some(w) = bytes.get_mut(i..i.saturating_add(8)) else {
            return false;
        };
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        match self.forward(u64::from_le_bytes(b)) {
            Some(v) => {
                w.copy_from_slice(&v.to_le_bytes());
                true
            }
            None => false,
        }
    }

    /// Translate back every word of `bytes` (arena bytes from `offset`, a
    /// multiple of 8) that points into the new arena; returns how many.
    pub fn back_translate(&self, bytes: &mut [u8], offset: u64) -> u64 {
        let mut out = Vec::new();
        let m = Move::new(self.new_base, self.old_base, self.span);
        map_words(m, bytes, offset, &mut out);
        out.len() as u64
    }
}

/// Words in `[from, from + size)` move by `to - from`.
#[derive(Clone, Copy)]
struct Move {
    from: u64,
    size: u64,
    delta: u64,
}

impl Move {
    fn new(from: u64, to: u64, size: u64) -> Move {
        Move {
            from,
            size,
            delta: to.wrapping_sub(from),
        }
    }

    #[inline(always)]
    fn hits(self, v: u64) -> bool {
        v.wrapping_sub(self.from) < self.size
    }
}

/// Words per block tested at once: almost every block holds no pointer,
/// and the branch-free test of a whole block vectorizes.
const BLOCK_WORDS: usize = 64;

fn word(w: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(w);
    u64::from_le_bytes(b)
}

/// Apply `m` to every whole aligned word of `bytes` (arena bytes from
/// `offset`), on several threads when it is large, pushing the offsets of
/// the words it moved.
fn map_words(m: Move, bytes: &mut [u8], offset: u64, out: &mut Vec<u64>) {
    // Words are aligned to the arena's start; a slice starting mid-word
    // skips to the next one.
    let skip = ((8 - offset % 8) % 8) as usize;
    let Some(body) = bytes.get_mut(skip..) else {
        return;
    };
    let offset = offset + skip as u64;
    let threads = if body.len() >= PARALLEL_MIN {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(16))
    } else {
        1
    };
    if threads < 2 {
        map_serial(m, body, offset, out);
        return;
    }
    let per = (body.len() / threads).div_ceil(8) * 8;
    let parts: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = body
            .chunks_mut(per)
            .enumerate()
            .map(|(k, part)| {
                let at = offset + (k * per) as u64;
                s.spawn(move || {
                    let mut v = Vec::new();
                    map_serial(m, part, at, &mut v);
                    v
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for p in parts {
        out.extend(p);
    }
}

fn map_serial(m: Move, body: &mut [u8], offset: u64, out: &mut Vec<u64>) {
    for (b, block) in body.chunks_mut(BLOCK_WORDS * 8).enumerate() {
        let any = block
            .chunks_exact(8)
            .fold(false, |acc, w| acc | m.hits(word(w)));
        if !any {
            continue;
        }
        let at = offset + (b * BLOCK_WORDS * 8) as u64;
        for (k, w) in block.chunks_exact_mut(8).enumerate() {
            let v = word(w);
            if m.hits(v) {
                w.copy_from_slice(&v.wrapping_add(m.delta).to_le_bytes());
                out.push(at + 8 * k as u64);
            }
        }
    }
}

/// Rebase the argument values that point into the recorded arena; returns
/// the arguments to launch with and how many were rebased.
pub fn rebase_args(r: &Rebaser, args: &[u64]) -> (Vec<u64>, u64) {
    let mut n = 0;
    let out = args
        .iter()
        .map(|&a| match r.forward(a) {
            Some(v) => {
                n += 1;
                v
            }
            None => a,
        })
        .collect();
    (out, n)
}

/// Rebase the 8-aligned words of a global's recorded bytes that point into
/// the recorded arena (a declare-target pointer variable, a table of
/// pointers); returns how many.
pub fn rebase_global(r: &Rebaser, data: &mut [u8]) -> u64 {
    let mut n = 0;
    for w in data.chunks_exact_mut(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        if let Some(v) = r.forward(u64::from_le_bytes(b)) {
            w.copy_from_slice(&v.to_le_bytes());
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: u64 = 0x7f1a_fde0_0010;
    const NEW: u64 = 0x3000_0000_0010;

    fn words(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn rebases_words_inside_the_recorded_arena_only() {
        let r = Rebaser {
            old_base: OLD,
            new_base: NEW,
            span: 0x1000,
        };
        let mut b = words(&[
            OLD,
            OLD + 0xff8,
            OLD + 0x1000,
            OLD - 1,
            42,
            u64::MAX,
            OLD + 8,
        ]);
        let list = r.rebase(&mut b, 0);
        assert_eq!(list, vec![0, 8, 48]);
        assert_eq!(
            b,
            words(&[
                NEW,
                NEW + 0xff8,
                OLD + 0x1000,
                OLD - 1,
                42,
                u64::MAX,
                NEW + 8
            ])
        );
    }

    #[test]
    fn unaligned_words_and_partial_tails_are_left_alone() {
        let r = Rebaser {
            old_base: OLD,
            new_base: NEW,
            span: 0x1000,
        };
        // A pointer at arena offset 4 is not an aligned word.
        let mut b = vec![0u8; 4];
        b.extend(OLD.to_le_bytes());
        b.extend([0u8; 4]);
        let before = b.clone();
        assert!(r.rebase(&mut b, 0).is_empty());
        assert_eq!(b, before);
        // A slice from arena offset 4: its first whole word is at 8.
        let mut b = vec![0u8; 4];
        b.extend(OLD.to_le_bytes());
        b.extend(OLD.to_le_bytes()[..3].iter());
        assert_eq!(r.rebase(&mut b, 4), vec![8]);
        assert_eq!(&b[4..12], &NEW.to_le_bytes());
    }

    #[test]
    fn a_straddling_word_is_rebased_once_it_is_whole() {
        let r = Rebaser {
            old_base: OLD,
            new_base: NEW,
            span: 0x1000,
        };
        let mut b = words(&[7, OLD + 0x20]);
        // Two pieces split mid-word: neither rebases the word alone.
        assert!(r.rebase(&mut b[..11], 0).is_empty());
        assert!(r.rebase(&mut b[11..], 11).is_empty());
        assert!(r.rebase_word_at(&mut b, 0, 8));
        assert_eq!(b, words(&[7, NEW + 0x20]));
        assert!(!r.rebase_word_at(&mut b, 0, 16));
    }

    #[test]
    fn back_translation_restores_the_recorded_form_exactly() {
        let r = Rebaser {
            old_base: OLD,
            new_base: NEW,
            span: 0x1000,
        };
        let input = words(&[OLD + 0x40, 1, OLD + 0x80, 0x4008_0000_0000_0000]);
        let mut arena = input.clone();
        assert_eq!(r.rebase(&mut arena, 0).len(), 2);
        // The "kernel" stores a new pointer into the relocated arena.
        arena[8..16].copy_from_slice(&(NEW + 0x10).to_le_bytes());
        assert_eq!(r.back_translate(&mut arena, 0), 3);
        assert_eq!(
            arena,
            words(&[OLD + 0x40, OLD + 0x10, OLD + 0x80, 0x4008_0000_0000_0000])
        );
    }

    #[test]
    fn a_value_that_only_looks_like_a_pointer_is_rebased_and_restored() {
        // A double whose bits fall in the recorded range cannot be told
        // from a pointer: it is rebased (the kernel sees another value)
        // and translated back, so an untouched one still verifies.
        let r = Rebaser {
            old_base: 0x4000_0000_0000_0000,
            new_base: 0x3000_0000_0000,
            span: 1 << 20,
        };
        let two = 2.0f64.to_bits();
        assert_eq!(two, 0x4000_0000_0000_0000);
        let mut b = words(&[two]);
        assert_eq!(r.rebase(&mut b, 0), vec![0]);
        assert_ne!(b, words(&[two]));
        assert_eq!(r.back_translate(&mut b, 0), 1);
        assert_eq!(b, words(&[two]));
    }

    #[test]
    fn large_slices_scan_on_threads_like_one() {
        let r = Rebaser {
            old_base: OLD,
            new_base: NEW,
            span: 9 << 20,
        };
        let n = (9 << 20) / 8;
        let v: Vec<u64> = (0..n as u64)
            .map(|i| if i % 1000 == 3 { OLD + i * 8 } else { i })
            .collect();
        let mut b = words(&v);
        let list = r.rebase(&mut b, 0);
        let want: Vec<u64> = (0..n as u64)
            .filter(|i| i % 1000 == 3)
            .map(|i| i * 8)
            .collect();
        assert_eq!(list, want);
        assert_eq!(r.back_translate(&mut b, 0), want.len() as u64);
        assert_eq!(b, words(&v));
    }

    #[test]
    fn args_and_globals() {
        let r = Rebaser {
            old_base: OLD,
            new_base: NEW,
            span: 0x100,
        };
        let (a, n) = rebase_args(&r, &[u64::MAX, OLD, 16384, OLD + 0x80]);
        assert_eq!((a, n), (vec![u64::MAX, NEW, 16384, NEW + 0x80], 2));
        let mut g = words(&[OLD + 8, 3]);
        g.extend([1, 2, 3]);
        assert_eq!(rebase_global(&r, &mut g), 1);
        assert_eq!(&g[..8], &(NEW + 8).to_le_bytes());
    }
}

/// Throughput of the scan: a measurement, not a check (it asserts nothing
/// about time), so the suite skips it; `bench/relocation_scan.sh` runs it
/// in a release build (BENCHMARKS.md "Relocation").
#[cfg(test)]
#[test]
#[ignore = "a throughput measurement: bench/relocation_scan.sh runs it (release build)"]
fn scan_throughput() {
    let r = Rebaser {
        old_base: 0x7f1a_fde0_0010,
        new_base: 0x3000_0000_0010,
        span: 64 << 20,
    };
    let mut piece: Vec<u8> = (0..64 << 10).map(|i| (i * 7) as u8).collect();
    let t = std::time::Instant::now();
    let mut n = 0;
    for k in 0..1024u64 {
        n += r.rebase(&mut piece, k * 65536).len();
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "scan of 64 MiB in 64 KiB pieces (in cache): {:.2} GB/s ({n} hits)",
        (64u64 << 20) as f64 / s / 1e9
    );
}
