//! Which virtual reservations the GPU backends ask the driver for, and in
//! what order, to get the arena at the recorded address.
//!
//! `cuMemAddressReserve` / `hipMemAddressReserve` take the address as a hint
//! and honour it for some sizes only (on an H200 with driver 580, 8 and
//! 16 MiB reservations were placed elsewhere while 64 MiB and 1 GiB ones
//! landed on the hint). The recorder itself reserved `VAllocSize` bytes at
//! the recorded address and got it, so that exact request comes first; then
//! the snapshot's length, then larger ones. Only the snapshot's length is
//! ever backed with memory. When every attempt lands elsewhere, a replay
//! that may relocate keeps the first such reservation
//! ([`reserve_placed`]) and the arena is relocated there.

/// Reservation lengths to try for an arena of `len` bytes (already rounded
/// to the granularity `gran`): the recorded reservation `recorded` (rounded
/// up to `gran`) when it covers the arena, then `len`, then `len` rounded up
/// to 64 MiB and to 1 GiB; no length twice.
pub fn reservation_lengths(len: u64, recorded: Option<u64>, gran: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let round = |x: u64, step: u64| x.checked_next_multiple_of(step.max(1));
    if let Some(r) = recorded.and_then(|r| round(r, gran)) {
        if r >= len {
            v.push(r);
        }
    }
    for x in [Some(len), round(len, 64 << 20), round(len, 1 << 30)]
        .into_iter()
        .flatten()
    {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// Try each of `lengths` at `start` with `reserve(len, hint)` (the address
/// the driver chose, or why it failed) until one lands on `start`; a
/// reservation placed elsewhere is handed back with `free` at once. Returns
/// the length that landed, or one line per attempt saying what happened.
pub fn reserve_at_hint(
    start: u64,
    lengths: &[u64],
    reserve: impl FnMut(u64, u64) -> Result<u64, String>,
    free: impl FnMut(u64, u64),
) -> Result<u64, Vec<String>> {
    reserve_placed(start, lengths, false, reserve, free).map(|(len, _)| len)
}

/// [`reserve_at_hint`], and with `elsewhere` (a relocating replay) the
/// first reservation the driver placed elsewhere is kept, not freed, for
/// when no length lands on `start`: the arena is then relocated there
/// (`crate::placement`). Returns the length and the address reserved.
pub fn reserve_placed(
    start: u64,
    lengths: &[u64],
    elsewhere: bool,
    mut reserve: impl FnMut(u64, u64) -> Result<u64, String>,
    mut free: impl FnMut(u64, u64),
) -> Result<(u64, u64), Vec<String>> {
    let mut attempts = Vec::new();
    let mut kept: Option<(u64, u64)> = None;
    for &len in lengths {
        match reserve(len, start) {
            Ok(got) if got == start => {
                if let Some((l, at)) = kept.take() {
                    free(at, l);
                }
                return Ok((len, start));
            }
            Ok(got) => {
                if elsewhere && kept.is_none() {
                    kept = Some((len, got));
                } else {
                    free(got, len);
                }
                attempts.push(format!("{len:#x} bytes at {got:#x}"));
            }
            Err(e) => attempts.push(format!("{len:#x} bytes: {e}")),
        }
    }
    kept.ok_or(attempts)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    #[test]
    fn the_recorded_reservation_is_asked_for_first() {
        assert_eq!(
            reservation_lengths(8 * MIB, Some(4 * GIB), 2 * MIB),
            vec![4 * GIB, 8 * MIB, 64 * MIB, GIB]
        );
        // Rounded up to the granularity; never smaller than the arena.
        assert_eq!(
            reservation_lengths(8 * MIB, Some(GIB - 4096), 2 * MIB),
            vec![GIB, 8 * MIB, 64 * MIB]
        );
        assert_eq!(
            reservation_lengths(8 * MIB, Some(4 * MIB), 2 * MIB),
            vec![8 * MIB, 64 * MIB, GIB]
        );
        assert_eq!(
            reservation_lengths(GIB, None, 2 * MIB),
            vec![GIB],
            "no recorded size (LLVM 18-22): the old order"
        );
        assert_eq!(
            reservation_lengths(GIB + 2 * MIB, None, 2 * MIB),
            vec![GIB + 2 * MIB, GIB + 64 * MIB, 2 * GIB]
        );
    }

    /// A driver that honours the hint only for reservations of at least
    /// `honours_from` bytes and puts smaller ones at `elsewhere`.
    struct FakeDriver {
        honours_from: u64,
        elsewhere: u64,
        live: Vec<(u64, u64)>,
        calls: Vec<u64>,
    }

    impl FakeDriver {
        fn reserve(&mut self, len: u64, hint: u64) -> Result<u64, String> {
            self.calls.push(len);
            if len > 64 * GIB {
                return Err("CUDA_ERROR_OUT_OF_MEMORY".into());
            }
            let at = if len >= self.honours_from {
                hint
            } else {
                self.elsewhere
            };
            self.live.push((at, len));
            Ok(at)
        }
        fn free(&mut self, at: u64, len: u64) {
            self.live.retain(|&r| r != (at, len));
        }
    }

    #[test]
    fn misplaced_reservations_are_freed_and_the_next_length_tried() {
        let start = 0x7e00_0000_0000;
        let drv = std::cell::RefCell::new(FakeDriver {
            honours_from: 64 * MIB,
            elsewhere: 0x7f00_0000_0000,
            live: Vec::new(),
            calls: Vec::new(),
        });
        let lengths = reservation_lengths(8 * MIB, None, 2 * MIB);
        let got = reserve_at_hint(
            start,
            &lengths,
            |l, h| drv.borrow_mut().reserve(l, h),
            |a, l| drv.borrow_mut().free(a, l),
        );
        assert_eq!(got, Ok(64 * MIB));
        assert_eq!(drv.borrow().calls, vec![8 * MIB, 64 * MIB]);
        assert_eq!(drv.borrow().live, vec![(start, 64 * MIB)], "one left");

        // With the recorded 4 GiB, the first request is the recorder's.
        drv.borrow_mut().calls.clear();
        drv.borrow_mut().live.clear();
        let lengths = reservation_lengths(8 * MIB, Some(4 * GIB), 2 * MIB);
        let got = reserve_at_hint(
            start,
            &lengths,
            |l, h| drv.borrow_mut().reserve(l, h),
            |a, l| drv.borrow_mut().free(a, l),
        );
        assert_eq!(got, Ok(4 * GIB));
        assert_eq!(drv.borrow().calls, vec![4 * GIB]);

        // Nothing lands: every attempt is reported, nothing stays reserved.
        drv.borrow_mut().honours_from = u64::MAX;
        drv.borrow_mut().live.clear();
        let err = reserve_at_hint(
            start,
            &[8 * MIB, 128 * GIB],
            |l, h| drv.borrow_mut().reserve(l, h),
            |a, l| drv.borrow_mut().free(a, l),
        )
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "0x800000 bytes at 0x7f0000000000".to_string(),
                "0x2000000000 bytes: CUDA_ERROR_OUT_OF_MEMORY".to_string()
            ]
        );
        assert!(drv.borrow().live.is_empty());
    }

    #[test]
    fn a_relocating_replay_keeps_the_first_reservation_placed_elsewhere() {
        let start = 0x7e00_0000_0000;
        let elsewhere = 0x7f00_0000_0000;
        let drv = std::cell::RefCell::new(FakeDriver {
            honours_from: u64::MAX,
            elsewhere,
            live: Vec::new(),
            calls: Vec::new(),
        });
        let lengths = reservation_lengths(8 * MIB, None, 2 * MIB);
        let got = reserve_placed(
            start,
            &lengths,
            true,
            |l, h| drv.borrow_mut().reserve(l, h),
            |a, l| drv.borrow_mut().free(a, l),
        );
        // Every length was tried at the hint first; the first one placed
        // elsewhere is the one kept, and only it.
        assert_eq!(got, Ok((8 * MIB, elsewhere)));
        assert_eq!(drv.borrow().calls, vec![8 * MIB, 64 * MIB, GIB]);
        assert_eq!(drv.borrow().live, vec![(elsewhere, 8 * MIB)]);
        // A later length that lands on the hint wins; the kept one is freed.
        drv.borrow_mut().honours_from = 64 * MIB;
        drv.borrow_mut().live.clear();
        drv.borrow_mut().calls.clear();
        let got = reserve_placed(
            start,
            &lengths,
            true,
            |l, h| drv.borrow_mut().reserve(l, h),
            |a, l| drv.borrow_mut().free(a, l),
        );
        assert_eq!(got, Ok((64 * MIB, start)));
        assert_eq!(drv.borrow().live, vec![(start, 64 * MIB)]);
    }
}
