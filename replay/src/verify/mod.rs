//! Checking the replayed arena against the recorded output, streamed: the
//! engine feeds both in matching pieces (the output part is read through a
//! bounded buffer, never held whole).
//!
//! * [`ranges`]: byte-exact comparison, differing ranges (span and
//!   differing bytes) mapped to the argument buffers they fall in; `diff`
//!   reports the same ranges.
//! * [`tolerance`]: element-wise f32/f64 comparison with rtol/atol/ULP.
//! * [`variation`]: several replays' outputs against the recorded one:
//!   the bytes that vary between replays, those that differ in every one.
//! * [`profile`]: what a differing run's replays showed, kept in the
//!   history so that `check` can compare runs of a varying kernel.

pub mod profile;
pub mod ranges;
pub mod tolerance;
pub mod variation;

/// An argument whose value points into the arena: argument `index` at
/// `arena+offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ArgPointer {
    pub index: usize,
    pub offset: u64,
}

/// The arguments that point into an arena of `size` bytes at `base`, sorted
/// by offset.
pub fn arg_pointers(args: &[u64], base: u64, size: u64) -> Vec<ArgPointer> {
    let mut v: Vec<ArgPointer> = args
        .iter()
        .enumerate()
        .filter_map(|(index, &a)| {
            let off = a.checked_sub(base)?;
            (off < size).then_some(ArgPointer { index, offset: off })
        })
        .collect();
    v.sort_by_key(|p| (p.offset, p.index));
    v
}

/// The argument buffer `offset` falls in: the argument pointing at it, else
/// the nearest argument pointer below it.
pub fn owning_arg(pointers: &[ArgPointer], offset: u64) -> Option<ArgPointer> {
    pointers.iter().rev().find(|p| p.offset <= offset).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_offsets_to_the_nearest_argument_below() {
        let base = 0x1000;
        let args = [u64::MAX, base, 7, base + 0x100, base + 0x10000];
        let p = arg_pointers(&args, base, 0x200);
        assert_eq!(
            p,
            vec![
                ArgPointer {
                    index: 1,
                    offset: 0
                },
                ArgPointer {
                    index: 3,
                    offset: 0x100
                }
            ]
        );
        assert_eq!(owning_arg(&p, 0x100).unwrap().index, 3);
        assert_eq!(owning_arg(&p, 0xff).unwrap().index, 1);
        assert_eq!(owning_arg(&[], 5), None);
    }
}
