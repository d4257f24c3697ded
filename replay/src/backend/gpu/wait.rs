//! Waiting for a launch to finish without blocking past `--timeout`: the
//! GPU backends poll the launch's stop event instead of calling the
//! blocking synchronize (`hipEventSynchronize` would wait for a kernel that
//! never ends, and a GPU kernel cannot be killed).

use std::time::{Duration, Instant};

/// What one poll of the stop event said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll<R> {
    /// Still running.
    Pending,
    /// Finished; the driver's result for the work before the event.
    Done(R),
}

/// Poll `query` until it is done (its result), or until `limit` has passed
/// since the call (`None`: the kernel may still run, and the caller must not
/// wait on it again). A `limit` of `None` polls without limit.
pub fn poll_until<R>(limit: Option<Duration>, mut query: impl FnMut() -> Poll<R>) -> Option<R> {
    let t0 = Instant::now();
    let mut pause = Duration::from_micros(20);
    loop {
        if let Poll::Done(r) = query() {
            return Some(r);
        }
        if limit.is_some_and(|l| t0.elapsed() > l) {
            return None;
        }
        // Short kernels finish within microseconds; long ones need not be
        // polled more than every millisecond.
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_that_never_ends_times_out_and_one_that_ends_is_waited_for() {
        // A fake device queue: never done.
        let mut polls = 0;
        let r: Option<i32> = poll_until(Some(Duration::from_millis(5)), || {
            polls += 1;
            Poll::Pending
        });
        assert_eq!(r, None);
        assert!(polls >= 1);
        // Done after a few polls, with the driver's result (e.g. a fault).
        let mut left = 3;
        let r = poll_until(None, || {
            left -= 1;
            if left == 0 {
                Poll::Done("CUDA_ERROR_ILLEGAL_ADDRESS")
            } else {
                Poll::Pending
            }
        });
        assert_eq!(r, Some("CUDA_ERROR_ILLEGAL_ADDRESS"));
    }
}
