//! `check`'s kernel time comparison: the run's repetitions against the
//! recent runs of the recorded image in the history (the baseline), and the
//! rule that says when a difference is outside the noise.
//!
//! Measured on the fixtures (host kernels of 5 to 50 µs): within one replay
//! the repetitions agree but the first launch runs cold (2 to 50 ms against
//! 0.04 ms); between replays (processes) the same kernel's median moves by
//! up to 10x. So the spread is the interquartile range (the cold launch falls
//! outside it), and the baseline is several history rows, each its own
//! spread: a run is slower only when it is slower than every one of them.
//! A row's quartiles mean something only with [`MIN_SAMPLES`] launches (with
//! fewer they are its min and max), so rows with fewer are left out of the
//! comparison rather than pooled with the others.

use rrstore_format::RecordingId;
use rrstore_store::Store;
use serde::Serialize;

use crate::regress::RegressError;

/// Kernel launches per replay when the caller does not say (host kernels
/// of the fixtures take milliseconds at most: five keep a check fast).
pub const DEFAULT_REPETITIONS: u32 = 5;
/// A median more than this fraction above the baseline may be a slowdown.
pub const SLOWDOWN_THRESHOLD: f64 = 0.10;
/// Fewer launches than this in the run, or in a baseline row, say nothing
/// about the noise.
pub const MIN_SAMPLES: usize = 3;
/// How many of the newest recorded-image history rows form the baseline.
pub const BASELINE_RUNS: usize = 5;

/// Kernel times of repetitions, nanoseconds. The quartiles are the sorted
/// samples at n/4 and 3n/4 (0-based): min and max for n < 4.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub samples: usize,
    pub min_ns: u64,
    pub q1_ns: u64,
    pub median_ns: u64,
    pub q3_ns: u64,
    pub max_ns: u64,
}

impl Spread {
    /// None when there is no sample.
    pub fn of(times: &[u64]) -> Option<Spread> {
        let mut v = times.to_vec();
        v.sort_unstable();
        let n = v.len();
        let median = match n {
            0 => return None,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2,
        };
        Some(Spread {
            samples: n,
            min_ns: v[0],
            q1_ns: v[n / 4],
            median_ns: median,
            q3_ns: v[if n < 4 { n - 1 } else { 3 * n / 4 }],
            max_ns: v[n - 1],
        })
    }
}

/// The run's kernel time against the baseline's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeCompare {
    pub run: Spread,
    /// All baseline launches together.
    pub baseline: Spread,
    /// The history rows the baseline is made of, oldest first.
    pub baseline_rows: Vec<i64>,
    /// The run's median over the baseline's (all launches together).
    pub ratio: f64,
    /// Slower beyond the noise: the run's median is more than
    /// [`SLOWDOWN_THRESHOLD`] above every compared baseline row's median
    /// AND the run's lower quartile is above every compared row's upper
    /// quartile. Compared rows: those with [`MIN_SAMPLES`] launches.
    pub slower: bool,
    /// Faster beyond the noise (the same rule, mirrored).
    pub faster: bool,
    /// The run and at least one baseline row have [`MIN_SAMPLES`] launches.
    pub enough_samples: bool,
    /// The history row of the replay that confirmed or refuted a slowdown
    /// (`check` replays the recorded image once more when `slower`).
    pub confirmed_by: Option<i64>,
}

impl TimeCompare {
    /// `run`: the run's launch times; `baseline`: (history row, launch
    /// times) of each baseline run. None when either side has no time.
    pub fn of(run: &[u64], baseline: &[(i64, Vec<u64>)]) -> Option<TimeCompare> {
        let r = Spread::of(run)?;
        let rows: Vec<Spread> = baseline
            .iter()
            .filter_map(|(_, t)| Spread::of(t))
            .filter(|s| s.samples >= MIN_SAMPLES)
            .collect();
        let pooled: Vec<u64> = baseline
            .iter()
            .flat_map(|(_, t)| t.iter().copied())
            .collect();
        let b = Spread::of(&pooled)?;
        if b.median_ns == 0 {
            return None;
        }
        let enough = r.samples >= MIN_SAMPLES && !rows.is_empty();
        let k = 1.0 + SLOWDOWN_THRESHOLD;
        let med = |s: &Spread| s.median_ns as f64;
        let slower = rows
            .iter()
            .all(|s| med(&r) > k * med(s) && r.q1_ns > s.q3_ns);
        let faster = rows
            .iter()
            .all(|s| med(&r) * k < med(s) && r.q3_ns < s.q1_ns);
        Some(TimeCompare {
            run: r,
            baseline: b,
            baseline_rows: baseline.iter().map(|(row, _)| *row).collect(),
            ratio: med(&r) / med(&b),
            slower: enough && slower,
            faster: enough && faster,
            enough_samples: enough,
            confirmed_by: None,
        })
    }
}

/// The baseline runs: the newest [`BASELINE_RUNS`] completed history rows
/// of `id` with `image` on `device` that timed the kernel, except row
/// `except` (the run itself), oldest first.
pub fn baseline_runs(
    store: &Store,
    id: &RecordingId,
    image: &[u8; 32],
    device: &str,
    except: i64,
) -> Result<Vec<(i64, Vec<u64>)>, RegressError> {
    let mut rows: Vec<(i64, Vec<u64>)> = store
        .history(Some(*id))?
        .into_iter()
        .filter(|e| {
            e.id != except
                && &e.image_hash == image
                && e.device == device
                && e.completed()
                && !e.kernel_ns.is_empty()
        })
        .map(|e| (e.id, e.kernel_ns))
        .collect();
    let skip = rows.len().saturating_sub(BASELINE_RUNS);
    rows.drain(..skip);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compare(run: &[u64], base: &[&[u64]]) -> TimeCompare {
        let base: Vec<(i64, Vec<u64>)> = base
            .iter()
            .enumerate()
            .map(|(i, t)| (i as i64 + 1, t.to_vec()))
            .collect();
        TimeCompare::of(run, &base).unwrap()
    }

    #[test]
    fn quartiles_of_five_leave_out_the_cold_first_launch() {
        let s = Spread::of(&[7_000, 50, 48, 52, 49]).unwrap();
        let got = (s.min_ns, s.q1_ns, s.median_ns, s.q3_ns, s.max_ns);
        assert_eq!(got, (48, 49, 50, 52, 7_000));
        let s = Spread::of(&[3, 1]).unwrap();
        assert_eq!((s.q1_ns, s.median_ns, s.q3_ns), (1, 2, 3));
    }

    #[test]
    fn a_slowdown_is_flagged_only_outside_the_noise() {
        let base: &[u64] = &[100, 101, 99, 102, 100];
        // Clearly slower: median 1.5x, quartiles apart.
        let t = compare(&[150, 151, 149, 152, 150], &[base]);
        assert!(t.slower && !t.faster, "{t:?}");
        // A noisy run with a 3.8x median whose quartiles overlap the
        // baseline's: not flagged.
        let t = compare(&[380, 100, 390, 101, 385], &[&[100, 380, 99, 101, 390]]);
        assert!(t.ratio > 3.0 && !t.slower, "{t:?}");
        // Within the threshold: not flagged even with disjoint quartiles.
        let t = compare(&[105, 106, 105, 106, 105], &[base]);
        assert!(!t.slower, "{t:?}");
        // A single launch on either side cannot tell noise from a change.
        let t = compare(&[1000], &[base]);
        assert!(!t.slower && !t.enough_samples, "{t:?}");
        // Faster beyond the noise.
        let t = compare(&[50, 51, 50, 52, 50], &[base]);
        assert!(t.faster && !t.slower, "{t:?}");
    }

    #[test]
    fn baseline_rows_of_one_or_two_launches_are_not_compared() {
        // Seen: `faster`, ratio 0.06, against rows of 1 and 2 launches (whose
        // quartiles are their min and max). Together they have 3 launches,
        // but no row says anything about the noise.
        let run: &[u64] = &[50, 51, 50, 52, 50];
        let t = compare(run, &[&[1000], &[900, 1100]]);
        assert!(!t.enough_samples && !t.faster && !t.slower, "{t:?}");
        assert_eq!(t.baseline.samples, 3);
        // A row with enough launches is compared; the short one is not
        // (its single fast launch would otherwise hide the speed-up).
        let t = compare(run, &[&[40], &[100, 101, 99, 102, 100]]);
        assert!(t.enough_samples && t.faster, "{t:?}");
        let t = compare(&[200, 201, 200, 202, 200], &[&[300], &[100, 101, 99]]);
        assert!(t.enough_samples && t.slower, "{t:?}");
    }

    #[test]
    fn a_run_as_slow_as_one_earlier_baseline_run_is_noise() {
        // Processes differ: one baseline replay ran the kernel at 10 units,
        // another at 50. A run at 53 is 5x the pooled median, but within
        // 10% of the slow baseline run: not flagged.
        let fast: &[u64] = &[10, 9, 10, 11, 10];
        let slow: &[u64] = &[49, 50, 48, 51, 50];
        let t = compare(&[53, 53, 54, 52, 53], &[fast, slow, fast]);
        assert!(t.ratio > 4.0 && !t.slower, "{t:?}");
        assert_eq!(t.baseline.samples, 15);
        assert_eq!(t.baseline_rows, vec![1, 2, 3]);
        // Twice the slowest baseline run is a slowdown.
        let t = compare(&[100, 101, 102, 100, 101], &[fast, slow, fast]);
        assert!(t.slower, "{t:?}");
    }
}
