//! Byte-exact comparison of the replayed arena with the recorded output.
//!
//! Differing bytes closer than [`MERGE_GAP`] bytes are one range (a changed
//! float usually differs in a few of its bytes, not all). Memory stays
//! bounded: only the [`KEEP_LARGEST`] largest ranges are kept.

use serde::Serialize;

use super::{owning_arg, ArgPointer};

/// Differing bytes at most this far apart belong to the same range.
pub const MERGE_GAP: u64 = 16;
/// How many of the largest ranges a report keeps.
pub const KEEP_LARGEST: usize = 5;

/// A run of differing bytes `[offset, offset + len)` (it may contain equal
/// bytes shorter than [`MERGE_GAP`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DiffRange {
    pub offset: u64,
    pub len: u64,
    /// The argument buffer it falls in, if any argument points at or below it.
    pub arg: Option<ArgPointer>,
}

/// What differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MismatchReport {
    pub differing_bytes: u64,
    pub first_offset: u64,
    /// Number of ranges (all of them, not only the kept ones).
    pub ranges: u64,
    /// The largest ranges, largest first.
    pub largest: Vec<DiffRange>,
}

impl MismatchReport {
    /// Human-readable lines: summary, then one line per kept range.
    pub fn describe(&self, base: Option<u64>) -> Vec<String> {
        let mut out = vec![format!(
            "{} bytes differ in {} range(s); first difference at arena+{:#x}",
            self.differing_bytes, self.ranges, self.first_offset
        )];
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
                "  arena+{:#x}{addr}: {} bytes{arg}",
                r.offset, r.len
            ));
        }
        out
    }
}

/// Streaming comparer: feed matching pieces in order, then [`finish`](Self::finish).
pub struct ExactComparer {
    pointers: Vec<ArgPointer>,
    pos: u64,
    differing: u64,
    first: Option<u64>,
    ranges: u64,
    current: Option<(u64, u64)>,
    largest: Vec<(u64, u64)>,
}

impl ExactComparer {
    pub fn new(pointers: Vec<ArgPointer>) -> ExactComparer {
        ExactComparer {
            pointers,
            pos: 0,
            differing: 0,
            first: None,
            ranges: 0,
            current: None,
            largest: Vec::new(),
        }
    }

    /// Compare the next `actual.len()` bytes (`expected` has the same length).
    pub fn feed(&mut self, actual: &[u8], expected: &[u8]) {
        let n = actual.len().min(expected.len());
        if actual[..n] == expected[..n] {
            self.pos += n as u64;
            return;
        }
        const BLOCK: usize = 64;
        let mut i = 0;
        while i < n {
            let end = (i + BLOCK).min(n);
            if actual[i..end] != expected[i..end] {
                for j in i..end {
                    if actual[j] != expected[j] {
                        self.byte_differs(self.pos + j as u64);
                    }
                }
            }
            i = end;
        }
        self.pos += n as u64;
    }

    fn byte_differs(&mut self, off: u64) {
        self.differing += 1;
        self.first.get_or_insert(off);
        match self.current {
            Some((start, end)) if off < end + MERGE_GAP => self.current = Some((start, off + 1)),
            _ => {
                self.close_range();
                self.current = Some((off, off + 1));
            }
        }
    }

    fn close_range(&mut self) {
        if let Some((start, end)) = self.current.take() {
            self.ranges += 1;
            self.largest.push((start, end - start));
            self.largest
                .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            self.largest.truncate(KEEP_LARGEST);
        }
    }

    /// `None` when everything fed was equal.
    pub fn finish(mut self) -> Option<MismatchReport> {
        self.close_range();
        let first = self.first?;
        Some(MismatchReport {
            differing_bytes: self.differing,
            first_offset: first,
            ranges: self.ranges,
            largest: self
                .largest
                .iter()
                .map(|&(offset, len)| DiffRange {
                    offset,
                    len,
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
        let mut c = ExactComparer::new(vec![]);
        c.feed(&a[..500], &a[..500]);
        c.feed(&a[500..], &a[500..]);
        assert!(c.finish().is_none());
    }

    #[test]
    fn reports_count_first_offset_and_largest_ranges_across_pieces() {
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
        let mut c = ExactComparer::new(ptrs);
        c.feed(&actual[..1100], &expected[..1100]);
        c.feed(&actual[1100..], &expected[1100..]);
        let r = c.finish().unwrap();
        assert_eq!(r.differing_bytes, 1 + 300 + 1 + 2);
        assert_eq!(r.first_offset, 10);
        assert_eq!(r.ranges, 3);
        assert_eq!(r.largest[0].offset, 1000);
        assert_eq!(r.largest[0].len, 311);
        assert_eq!(r.largest[0].arg.unwrap().index, 1);
        assert_eq!(r.largest[1].offset, 3000);
        assert_eq!(r.largest[1].arg.unwrap().index, 3);
        let text = r.describe(Some(0x7000)).join("\n");
        assert!(text.contains("arena+0xbb8 (0x7bb8): 2 bytes, in the buffer of argument 3 (arena+0x800) at +0x3b8"), "{text}");
    }

    #[test]
    fn keeps_only_the_largest_ranges() {
        let expected = vec![0u8; 10_000];
        let mut actual = expected.clone();
        for i in 0..100 {
            actual[i * 100] = 1;
        }
        let mut c = ExactComparer::new(vec![]);
        c.feed(&actual, &expected);
        let r = c.finish().unwrap();
        assert_eq!(r.ranges, 100);
        assert_eq!(r.largest.len(), KEEP_LARGEST);
    }
}
