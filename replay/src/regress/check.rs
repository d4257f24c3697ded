//! `rrstore check`: replay every matching recording (optionally with another
//! image) and say, per recording, whether the output is still the recorded
//! one, whether it changed against the recorded-image run, and how the
//! kernel time compares with that run.
//!
//! Without `--image` each recording is replayed with its recorded image and
//! its time is compared with the previous recorded-image run in the
//! history (if any). With `--image` the recorded-image run (the baseline)
//! is taken from the history when there is one, else replayed once; the
//! image run is replayed unless `use_cache` allows reusing it too.
//! A recording regressed when its run mismatches the recorded output
//! (outside `--tolerance`), crashes, times out or fails, or, without an
//! output snapshot, when its output differs from the baseline run's.
//!
//! Time: each replay launches the kernel `repetitions` times (see
//! [`DEFAULT_REPETITIONS`]); the run's median kernel time is compared with
//! the baseline's (the repetitions its history row recorded). A slowdown is
//! flagged only outside the noise: the median ratio exceeds
//! 1 + [`SLOWDOWN_THRESHOLD`] AND the run's lower quartile is above the
//! baseline's upper quartile (the interquartile ranges do not overlap;
//! quartiles, not min..max, because a replay's first launch runs cold and
//! can take 100 times longer than the next), with at least [`MIN_SAMPLES`]
//! repetitions on each side. A slowdown is
//! reported, not counted as a regression (the exit status is about
//! outputs).

use rrstore_store::{LsFilter, Store};
use serde::Serialize;

use super::image::ImageOverride;
use super::run::{run, Run, RunOptions};
use super::RegressError;

/// Kernel launches per replay when the caller does not say (host kernels
/// of the fixtures take milliseconds: five keep a check fast).
pub const DEFAULT_REPETITIONS: u32 = 5;
/// A median more than this fraction above the baseline's may be a slowdown.
pub const SLOWDOWN_THRESHOLD: f64 = 0.10;
/// Fewer repetitions than this on either side say nothing about the noise.
pub const MIN_SAMPLES: usize = 3;

/// Kernel times of one run's repetitions, nanoseconds. The quartiles are
/// the sorted samples at n/4 and 3n/4 (0-based): min and max for n < 4.
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
    /// None when the kernel did not run.
    pub fn of(times: &[u64]) -> Option<Spread> {
        let mut v = times.to_vec();
        v.sort_unstable();
        let n = v.len();
        let median = match n {
            0 => return None,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2,
        };
        let q = |i: usize| v[i.min(n - 1)];
        Some(Spread {
            samples: n,
            min_ns: v[0],
            q1_ns: q(n / 4),
            median_ns: median,
            q3_ns: q(if n < 4 { n - 1 } else { 3 * n / 4 }),
            max_ns: v[n - 1],
        })
    }
}

/// The run's kernel time against the baseline's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimeCompare {
    pub run: Spread,
    pub baseline: Spread,
    /// Median over median.
    pub ratio: f64,
    /// Slower beyond the noise (rule in the module documentation).
    pub slower: bool,
    /// Faster beyond the noise (the same rule, mirrored).
    pub faster: bool,
    /// Both sides have enough repetitions to tell noise from a change.
    pub enough_samples: bool,
}

impl TimeCompare {
    pub fn of(run: &Run, baseline: &Run) -> Option<TimeCompare> {
        let r = Spread::of(&run.kernel_times_ns)?;
        let b = Spread::of(&baseline.kernel_times_ns)?;
        if b.median_ns == 0 {
            return None;
        }
        let ratio = r.median_ns as f64 / b.median_ns as f64;
        let enough = r.samples >= MIN_SAMPLES && b.samples >= MIN_SAMPLES;
        Some(TimeCompare {
            run: r,
            baseline: b,
            ratio,
            slower: enough && ratio > 1.0 + SLOWDOWN_THRESHOLD && r.q1_ns > b.q3_ns,
            faster: enough && ratio < 1.0 / (1.0 + SLOWDOWN_THRESHOLD) && r.q3_ns < b.q1_ns,
            enough_samples: enough,
        })
    }
}

/// One line of the check table.
#[derive(Clone, Debug, Serialize)]
pub struct CheckRow {
    pub recording: String,
    pub kernel: String,
    pub label: String,
    /// The run checked (with the given image, or the recorded one).
    pub run: Run,
    /// The recorded-image run compared with (cached or replayed), if any.
    pub baseline: Option<Run>,
    /// Output differs from the recorded output snapshot (None: no snapshot
    /// or no output).
    pub changed_vs_recorded: Option<bool>,
    /// Output differs from the baseline run's output.
    pub changed_vs_baseline: Option<bool>,
    /// Median kernel time of the run divided by the baseline's.
    pub time_ratio: Option<f64>,
    /// The time comparison (medians, spreads, whether outside the noise).
    pub time: Option<TimeCompare>,
    pub regressed: bool,
}

/// The whole check.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// Image checked (hex), or None for the recorded images.
    pub image: Option<String>,
    pub rows: Vec<CheckRow>,
    /// Replays actually run (cache hits excluded).
    pub replays: u32,
    pub cached: u32,
    pub regressed: u32,
    /// Rows whose kernel time is slower beyond the noise.
    pub slower: u32,
    /// Kernel launches per replay.
    pub repetitions: u32,
}

/// What to check.
pub struct CheckOptions {
    pub image: Option<ImageOverride>,
    pub filter: LsFilter,
    pub run: RunOptions,
}

/// Run the check; `on_row` sees each row as it is done.
pub fn check(
    store: &mut Store,
    opts: &CheckOptions,
    on_row: &mut dyn FnMut(&CheckRow),
) -> Result<CheckReport, RegressError> {
    let recs = store.list(&opts.filter)?;
    let mut report = CheckReport {
        image: opts
            .image
            .as_ref()
            .map(|i| rrstore_format::id::hex(&i.hash)),
        rows: Vec::new(),
        replays: 0,
        cached: 0,
        regressed: 0,
        slower: 0,
        repetitions: opts.run.replay.repetitions.max(1),
    };
    let cached_opts = RunOptions {
        use_cache: true,
        ..opts.run.clone()
    };
    for s in recs {
        let id = store.resolve(&s.id)?;
        let rec = store.recording(&id)?;
        let recorded = rec.part(rrstore_format::PartRole::Output).map(|p| p.blake3);
        let (the_run, baseline) = match &opts.image {
            Some(img) => {
                let base = run(store, &id, None, &cached_opts)?;
                let r = run(store, &id, Some(img), &opts.run)?;
                (r, Some(base))
            }
            None => {
                let recorded_image = super::run::image_hash(store, &id, None)?;
                let prev = store.cached_run(&id, &recorded_image)?;
                let r = run(store, &id, None, &opts.run)?;
                let prev = prev.map(|e| Run::from_history(&e));
                (r, prev.filter(|p| p.row != 0))
            }
        };
        let counted = if opts.image.is_some() {
            baseline.as_ref()
        } else {
            None // the previous run is only a time reference
        };
        for r in std::iter::once(&the_run).chain(counted) {
            if r.cached {
                report.cached += 1;
            } else {
                report.replays += 1;
            }
        }
        let changed_vs_recorded = match (recorded, the_run.output) {
            (Some(a), Some(b)) => Some(a != b),
            _ => None,
        };
        let changed_vs_baseline = match (baseline.as_ref().and_then(|b| b.output), the_run.output) {
            (Some(a), Some(b)) => Some(a != b),
            _ => None,
        };
        let regressed = match the_run.verdict.as_str() {
            "verified" | "within-tolerance" => false,
            "unverified" => changed_vs_baseline == Some(true),
            _ => true,
        };
        if regressed {
            report.regressed += 1;
        }
        let time = baseline.as_ref().and_then(|b| TimeCompare::of(&the_run, b));
        if time.is_some_and(|t| t.slower) {
            report.slower += 1;
        }
        let row = CheckRow {
            recording: s.id.clone(),
            kernel: s.kernel.clone(),
            label: s.label.clone(),
            time_ratio: time.map(|t| t.ratio),
            time,
            run: the_run,
            baseline,
            changed_vs_recorded,
            changed_vs_baseline,
            regressed,
        };
        on_row(&row);
        report.rows.push(row);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(times: &[u64]) -> Run {
        Run {
            row: 1,
            cached: false,
            image: [0; 32],
            verdict: "verified".into(),
            output: Some([1; 32]),
            kernel_ns: times.iter().min().copied(),
            kernel_times_ns: times.to_vec(),
            launch: "1x1".into(),
            detail: String::new(),
            output_kept: false,
        }
    }

    fn compare(run: &[u64], base: &[u64]) -> TimeCompare {
        TimeCompare::of(&run_with(run), &run_with(base)).unwrap()
    }

    #[test]
    fn quartiles_of_five_skip_the_cold_first_launch() {
        let s = Spread::of(&[7_000, 50, 48, 52, 49]).unwrap();
        assert_eq!(
            (s.min_ns, s.q1_ns, s.median_ns, s.q3_ns, s.max_ns),
            (48, 49, 50, 52, 7_000)
        );
        let s = Spread::of(&[3, 1]).unwrap();
        assert_eq!((s.q1_ns, s.median_ns, s.q3_ns), (1, 2, 3));
    }

    #[test]
    fn a_slowdown_is_flagged_only_outside_the_noise() {
        let base = [100, 101, 99, 102, 100];
        // Clearly slower: median 1.5x, quartiles apart.
        let t = compare(&[150, 151, 149, 152, 150], &base);
        assert!(t.slower && !t.faster, "{t:?}");
        // A noisy run with a 3.8x median whose quartiles overlap the
        // baseline's (one launch ran at baseline speed): not flagged.
        let t = compare(&[380, 100, 390, 101, 385], &[100, 380, 99, 101, 390]);
        assert!(t.ratio > 1.0 && !t.slower, "{t:?}");
        // Within the threshold: not flagged even with disjoint quartiles.
        let t = compare(&[105, 106, 105, 106, 105], &base);
        assert!(!t.slower, "{t:?}");
        // A single launch on either side cannot tell noise from a change.
        let t = compare(&[1000], &base);
        assert!(!t.slower && !t.enough_samples, "{t:?}");
        // Faster beyond the noise.
        let t = compare(&[50, 51, 50, 52, 50], &base);
        assert!(t.faster && !t.slower, "{t:?}");
    }
}
