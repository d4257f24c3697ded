//! Byte-exact comparison of two arenas (the replayed one with the recorded
//! output in `replay`, any two in `diff`), as differing ranges counted so
//! that the summary and the listed ranges agree: each range carries both
//! its span and the number of differing bytes in it, and the report says
//! how many ranges and bytes are not listed.
//!
//! Differing bytes less than [`MERGE_GAP`] apart are one range (a changed
//! float usually differs in a few of its bytes, not all), so a range's span
//! can be larger than its differing bytes. Memory stays bounded: only the
//! [`LISTED`] widest ranges are kept.

use serde::Serialize;

use crate::verify::{owning_arg, ArgPointer};

/// Differing bytes at most this far apart belong to the same range.
pub const MERGE_GAP: u64 = 16;

/// How many of the widest ranges are listed.
pub const LISTED: usize = 5;

/// A run of differing bytes `[offset, offset + span)`; the equal bytes in
/// it are gaps shorter than [`MERGE_GAP`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Range {
    pub offset: u64,
    pub span: u64,
    pub differing_bytes: u64,
    /// The argument buffer it falls in, if any argument points at or below it.
    pub arg: Option<ArgPointer>,
}

/// What differs. `differing_bytes` = sum of `largest[].differing_bytes` +
/// `unlisted_differing_bytes`; `ranges` = `largest.len()` + `unlisted_ranges`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RangeReport {
    pub differing_bytes: u64,
    pub first_offset: u64,
    pub ranges: u64,
    /// Differing bytes closer than this are merged into one range.
    pub merge_gap: u64,
    /// The widest ranges, widest first.
    pub largest: Vec<Range>,
    pub unlisted_ranges: u64,
    pub unlisted_differing_bytes: u64,
}

impl RangeReport {
    /// Human-readable lines: summary, then one line per listed range.
    pub fn describe(&self, base: Option<u64>) -> Vec<String> {
        let listed: u64 = self.largest.iter().map(|r| r.differing_bytes).sum();
        let mut out = vec![format!(
            "{} bytes differ in {} range(s); first difference at arena+{:#x}",
            self.differing_bytes, self.ranges, self.first_offset
        )];
        out.push(format!(
            "(differing bytes less than {} bytes apart are merged into one range, whose span includes the equal bytes between them)",
            self.merge_gap
        ));
        out.push(if self.unlisted_ranges == 0 {
            format!("all {} range(s):", self.largest.len())
        } else {
            format!(
                "the {} widest range(s), holding {} of the {} differing bytes (the other {} range(s) hold {}):",
                self.largest.len(),
                listed,
                self.differing_bytes,
                self.unlisted_ranges,
                self.unlisted_differing_bytes
            )
        });
        for r in &self.largest {
            let addr = base
                .map(|b| format!(" ({:#x})", b.wrapping_add(r.offset)))
                .unwrap_or_default();
            let arg = match r.arg {
                Some(a) => format!(
                    ", in the buffer of argument {} (arena+{:#x}) at +{:#x}",
                    a.index,
                    a.offset,
                    r.offset - a.offset
                ),
                None => ", below every argument pointer".into(),
            };
            out.push(format!(
                "  arena+{:#x}{addr}: {} differing byte(s) in {} byte(s){arg}",
                r.offset, r.differing_bytes, r.span
            ));
        }
        out
    }
}

/// Streaming tally: feed matching pieces in order, then [`finish`](Self::finish).
pub struct RangeTally {
    pointers: Vec<ArgPointer>,
    pos: u64,
    differing: u64,
    first: Option<u64>,
    ranges: u64,
    /// The open range: start, end (one past its last differing byte) and
    /// its differing bytes.
    current: Option<(u64, u64, u64)>,
    largest: Vec<(u64, u64, u64)>,
}

impl RangeTally {
    pub fn new(pointers: Vec<ArgPointer>) -> RangeTally {
        RangeTally {
            pointers,
            pos: 0,
            differing: 0,
            first: None,
            ranges: 0,
            current: None,
            largest: Vec::new(),
        }
    }

    /// Compare the next bytes of `a` and `b` (the shorter length counts).
    pub fn feed(&mut self, a: &[u8], b: &[u8]) {
        let n = a.len().min(b.len());
        if a[..n] != b[..n] {
            const BLOCK: usize = 64;
            for start in (0..n).step_by(BLOCK) {
                let end = (start + BLOCK).min(n);
                if a[start..end] == b[start..end] {
                    continue;
                }
                for j in start..end {
                    if a[j] != b[j] {
                        self.byte_differs(self.pos + j as u64);
                    }
                }
            }
        }
        self.pos += n as u64;
    }

    /// Count the byte at `off` as differing (offsets in increasing order,
    /// for a caller that decides itself which bytes differ).
    pub fn mark(&mut self, off: u64) {
        self.byte_differs(off);
    }

    fn byte_differs(&mut self, off: u64) {
        self.differing += 1;
        self.first.get_or_insert(off);
        match &mut self.current {
            Some((_, end, count)) if off < *end + MERGE_GAP => {
                *end = off + 1;
                *count += 1;
            }
            _ => {
                self.close_range();
                self.current = Some((off, off + 1, 1));
            }
        }
    }

    fn close_range(&mut self) {
        if let Some((start, end, count)) = self.current.take() {
            self.ranges += 1;
            self.largest.push((start, end - start, count));
            self.largest
                .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            self.largest.truncate(LISTED);
        }
    }

    /// `None` when everything fed was equal.
    pub fn finish(mut self) -> Option<RangeReport> {
        self.close_range();
        let first = self.first?;
        let listed: u64 = self.largest.iter().map(|r| r.2).sum();
        Some(RangeReport {
            differing_bytes: self.differing,
            first_offset: first,
            ranges: self.ranges,
            merge_gap: MERGE_GAP,
            unlisted_ranges: self.ranges - self.largest.len() as u64,
            unlisted_differing_bytes: self.differing - listed,
            largest: self
                .largest
                .iter()
                .map(|&(offset, span, differing_bytes)| Range {
                    offset,
                    span,
                    differing_bytes,
                    arg: owning_arg(&self.pointers, offset),
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_input_is_no_mismatch() {
        let a = vec![7u8; 1000];
        let mut t = RangeTally::new(vec![]);
        t.feed(&a[..500], &a[..500]);
        t.feed(&a[500..], &a[500..]);
        assert!(t.finish().is_none());
    }

    #[test]
    fn ranges_carry_span_differing_bytes_and_argument_across_pieces() {
        let expected = vec![0u8; 4096];
        let mut actual = expected.clone();
        actual[10] = 1; // range A: 1 byte
        for b in &mut actual[1000..1300] {
            *b = 2; // range B: 300 bytes, split across the two pieces below
        }
        actual[1310] = 3; // within MERGE_GAP of B: merged
        actual[3000] = 4;
        actual[3001] = 4; // range C: 2 bytes
        let ptrs = vec![
            ArgPointer {
                index: 1,
                offset: 0,
            },
            ArgPointer {
                index: 3,
                offset: 2048,
            },
        ];
        let mut t = RangeTally::new(ptrs);
        t.feed(&actual[..1100], &expected[..1100]);
        t.feed(&actual[1100..], &expected[1100..]);
        let r = t.finish().unwrap();
        assert_eq!(r.differing_bytes, 1 + 300 + 1 + 2);
        assert_eq!(r.first_offset, 10);
        assert_eq!(r.ranges, 3);
        let b = r.largest[0];
        assert_eq!((b.offset, b.span, b.differing_bytes), (1000, 311, 301));
        assert_eq!(b.arg.unwrap().index, 1);
        assert_eq!(r.largest[1].offset, 3000);
        assert_eq!(r.largest[1].arg.unwrap().index, 3);
        let text = r.describe(Some(0x7000)).join("\n");
        assert!(
            text.contains("arena+0x3e8 (0x73e8): 301 differing byte(s) in 311 byte(s), in the buffer of argument 1"),
            "{text}"
        );
        assert!(text.contains("arena+0xbb8 (0x7bb8): 2 differing byte(s) in 2 byte(s), in the buffer of argument 3 (arena+0x800) at +0x3b8"), "{text}");
    }

    #[test]
    fn listed_and_unlisted_add_up_to_the_summary() {
        let a = vec![0u8; 10_000];
        let mut b = a.clone();
        // 20 ranges of 3 differing bytes in a 9-byte span, plus 80 single bytes.
        for r in 0..20 {
            for k in [0, 4, 8] {
                b[r * 100 + k] = 1;
            }
        }
        for i in 0..80 {
            b[3000 + i * 50] = 1;
        }
        let mut t = RangeTally::new(vec![]);
        t.feed(&b[..5000], &a[..5000]);
        t.feed(&b[5000..], &a[5000..]);
        let r = t.finish().unwrap();
        assert_eq!(r.differing_bytes, 20 * 3 + 80);
        assert_eq!(r.ranges, 100);
        assert_eq!(r.largest.len(), LISTED);
        assert!(r
            .largest
            .iter()
            .all(|x| x.span == 9 && x.differing_bytes == 3));
        let listed: u64 = r.largest.iter().map(|x| x.differing_bytes).sum();
        assert_eq!(listed + r.unlisted_differing_bytes, r.differing_bytes);
        assert_eq!(r.largest.len() as u64 + r.unlisted_ranges, r.ranges);
        let text = r.describe(None).join("\n");
        assert!(
            text.contains("holding 15 of the 140 differing bytes (the other 95 range(s) hold 125)"),
            "{text}"
        );
        assert!(
            text.contains("arena+0x0: 3 differing byte(s) in 9 byte(s)"),
            "{text}"
        );
    }
}
