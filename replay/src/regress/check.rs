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
//! A recording regressed when its run differs from the recorded output
//! (outside `--tolerance`) and changed since the baseline, crashes, times
//! out or fails, or, without an output snapshot, when its output differs
//! from the baseline run's; a baseline that already differed alike, and a
//! nondeterministic run whose stable ranges did not change, are not new
//! regressions (rules: [`status`]).
//!
//! Time: each replay launches the kernel `repetitions` times (see
//! [`DEFAULT_REPETITIONS`]); the run's launches are compared with the
//! recent recorded-image runs of the history, and a slowdown is flagged
//! only outside the noise (rule: [`timing`]) and when a second replay of
//! the recorded image, right after, confirms it (a busy machine slows
//! every replay while it lasts). A slowdown is reported, not
//! counted as a regression (the exit status is about outputs).

use rrstore_store::{LsFilter, Store};
use serde::Serialize;

pub mod profiles;
pub mod status;
pub mod timing;

pub use status::Status;

pub use timing::{Spread, TimeCompare, DEFAULT_REPETITIONS, SLOWDOWN_THRESHOLD};

use super::image::ImageSet;
use super::lanes;
use super::run::{run, Run, RunOptions};
use super::RegressError;

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
    /// The outcome ([`status`]): passed, regressed, known (differs from
    /// the recording as the baseline did) or nondeterministic.
    pub status: Status,
    pub regressed: bool,
}

impl CheckRow {
    /// What this recording's runners printed: the run's, then the
    /// baseline's (replays of this recording only, whatever ran beside
    /// them in other lanes).
    pub fn runner_output(&self) -> crate::sandbox::output::RunnerOutput {
        let mut out = self.run.runner_output.clone();
        if let Some(b) = &self.baseline {
            out.append(&b.runner_output);
        }
        out
    }
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
    /// Rows that vary between replays, stable ranges unchanged.
    pub nondeterministic: u32,
    /// Rows that differ from the recording as their baseline already did.
    pub known: u32,
    /// Rows whose kernel time is slower beyond the noise.
    pub slower: u32,
    /// Kernel launches per replay.
    pub repetitions: u32,
}

/// What to check.
pub struct CheckOptions {
    /// The images `--image` names; each recording runs the one built for
    /// its target ([`ImageSet::pick`]).
    pub image: Option<ImageSet>,
    pub filter: LsFilter,
    pub run: RunOptions,
    /// fleet (issue 21): jobs, devices and shard.
    pub fleet: lanes::Fleet,
}

/// A run slower than the history may have met a busy machine: the
/// recorded image is replayed once more, right away, and the slowdown
/// stands only if, with `--image`, the run is also slower than that replay,
/// or, without (the run is the recorded image), that replay is also slower
/// than the history. Updates `t`; returns the confirming run.
fn confirm_slowdown(
    store: &mut Store,
    id: &rrstore_format::RecordingId,
    opts: &CheckOptions,
    run_opts: &RunOptions,
    the_run: &Run,
    history: &[(i64, Vec<u64>)],
    t: &mut TimeCompare,
) -> Result<Run, RegressError> {
    let fresh_opts = RunOptions {
        use_cache: false,
        keep_output: false,
        ..run_opts.clone()
    };
    let fresh = run(store, id, None, &fresh_opts)?;
    let again = match &opts.image {
        Some(_) => TimeCompare::of(
            &the_run.kernel_times_ns,
            &[(fresh.row, fresh.kernel_times_ns.clone())],
        ),
        None => TimeCompare::of(&fresh.kernel_times_ns, history),
    };
    t.slower = again.is_some_and(|a| a.slower);
    t.confirmed_by = Some(fresh.row);
    Ok(fresh)
}

/// One recording's row and the replays it took.
struct Checked {
    row: CheckRow,
    replays: u32,
    cached: u32,
}

/// Check one recording (`s`) with `run_opts` (the lane's: its device).
fn check_one(
    store: &mut Store,
    opts: &CheckOptions,
    run_opts: &RunOptions,
    s: &rrstore_store::RecordingSummary,
) -> Result<Checked, RegressError> {
    let cached_opts = RunOptions {
        use_cache: true,
        ..run_opts.clone()
    };
    let (mut replays, mut cached) = (0, 0);
    let id = store.resolve(&s.id)?;
    let rec = store.recording(&id)?;
    let recorded = rec.part(rrstore_format::PartRole::Output).map(|p| p.blake3);
    let (the_run, baseline) = match &opts.image {
        Some(set) => {
            let img = set.pick(&rec)?;
            let base = run(store, &id, None, &cached_opts)?;
            let r = run(store, &id, Some(&img), run_opts)?;
            (r, Some(base))
        }
        None => {
            let recorded_image = super::run::image_hash(store, &id, None)?;
            let prev = super::run::previous(store, &id, &recorded_image, &run_opts.replay)?;
            let r = run(store, &id, None, run_opts)?;
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
            cached += 1;
        } else {
            replays += 1;
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
    let profiles = profiles::Profiles::read(store, &id, &the_run, baseline.as_ref())?;
    let (status, changed_vs_baseline) =
        status::classify(&the_run, baseline.as_ref(), changed_vs_baseline, &profiles);
    let regressed = status == Status::Regressed;
    let mut time = None;
    if baseline.is_some() {
        let recorded_image = super::run::image_hash(store, &id, None)?;
        let device = store.history_entry(the_run.row)?.device;
        let base = timing::baseline_runs(store, &id, &recorded_image, &device, the_run.row)?;
        time = TimeCompare::of(&the_run.kernel_times_ns, &base);
        if let Some(t) = time.as_mut().filter(|t| t.slower) {
            let fresh = confirm_slowdown(store, &id, opts, run_opts, &the_run, &base, t)?;
            replays += u32::from(!fresh.cached);
        }
    }
    let row = CheckRow {
        recording: s.id.clone(),
        kernel: s.kernel.clone(),
        label: s.label.clone(),
        time_ratio: time.as_ref().map(|t| t.ratio),
        time,
        run: the_run,
        baseline,
        changed_vs_recorded,
        changed_vs_baseline,
        status,
        regressed,
    };
    Ok(Checked {
        row,
        replays,
        cached,
    })
}

/// Run the check; `on_row` sees each row as it is done, in the order of
/// the listing whatever `opts.fleet` runs at once ([`lanes`]).
pub fn check(
    store: &mut Store,
    opts: &CheckOptions,
    on_row: &mut dyn FnMut(&CheckRow),
) -> Result<CheckReport, RegressError> {
    let mut recs = store.list(&opts.filter)?;
    if let Some(shard) = &opts.fleet.shard {
        // fleet (issue 21): this job's subset, by recording ID.
        recs.retain(|s| s.id.parse().is_ok_and(|id| shard.contains(&id)));
    }
    let mut report = CheckReport {
        image: opts.image.as_ref().map(ImageSet::hashes),
        rows: Vec::new(),
        replays: 0,
        cached: 0,
        regressed: 0,
        nondeterministic: 0,
        known: 0,
        slower: 0,
        repetitions: opts.run.replay.repetitions.max(1),
    };
    let mut first_err = None;
    lanes::each_ahead(
        store,
        &opts.fleet,
        &opts.run,
        recs.len(),
        &|i| recs[i].id.parse().ok(),
        &|store, run_opts, i| check_one(store, opts, run_opts, &recs[i]),
        &mut |_, r| match r {
            Ok(c) => {
                report.replays += c.replays;
                report.cached += c.cached;
                report.regressed += u32::from(c.row.regressed);
                report.nondeterministic += u32::from(c.row.status == Status::Nondeterministic);
                report.known += u32::from(c.row.status == Status::Known);
                report.slower += u32::from(c.row.time.as_ref().is_some_and(|t| t.slower));
                on_row(&c.row);
                report.rows.push(c.row);
            }
            // The others still run (their rows are in the history); the
            // first error, in listing order, is the check's.
            Err(e) => {
                first_err.get_or_insert(e);
            }
        },
    )?;
    match first_err {
        Some(e) => Err(e),
        None => Ok(report),
    }
}
