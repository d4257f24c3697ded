//! `rrstore tune`: the fastest verified launch configuration and compile
//! variant of a recorded kernel.
//!
//! The variants are the product of the team counts, the thread counts (each
//! within the recorded `TeamsLimits`/`ThreadsLimits` unless
//! `ignore_limits`) and the compile variants (toolchain and flags of an IR
//! image, or of the recording's `.bc` part, which a compile variant
//! selects as `--toolchain`/`--cflags` do). Each is replayed with
//! repetitions and verified against the recorded output (byte for byte,
//! or within the tolerance); one that does
//! not verify is never the answer. The search ([`search`]) is successive
//! halving within half of the full grid's launches, or the full grid
//! itself (the benchmark's reference). The recorded image with the
//! recorded launch is measured in the same run, before the last round with
//! that round's repetitions, for the speedup. Every replay writes its
//! history row through [`super::run::run`] (never answered from the replay
//! cache: a tune measures).

pub mod search;

use rrstore_format::image::ImageTarget;
use rrstore_format::{PartRole, RecordingId};
use rrstore_store::Store;
use serde::Serialize;

use super::image::ImageOverride;
use super::run::{run, Run, RunOptions};
use super::RegressError;
use crate::compile::CompileOptions;
use crate::VerifyMode;
use search::Measured;

/// A compile variant: how an IR image is compiled.
#[derive(Clone, Debug)]
pub struct CompileVariant {
    /// How it is shown (`clang-22 -O3 -ffast-math`).
    pub label: String,
    pub compile: CompileOptions,
}

/// What `tune` searches, and how.
#[derive(Clone)]
pub struct TuneOptions {
    /// Team counts to try; empty: the recorded one only.
    pub teams: Vec<u64>,
    /// Thread counts to try; empty: the recorded one only.
    pub threads: Vec<u64>,
    /// Compile variants; empty: the base options only.
    pub compiles: Vec<CompileVariant>,
    /// The image the variants run (None: the recorded one).
    pub image: Option<ImageOverride>,
    /// Base replay options (verification, tolerance, timeout, ...).
    pub run: RunOptions,
    /// The grid's repetitions per variant; the halving search spends at
    /// most half of `variants × repetitions` launches.
    pub repetitions: u32,
    /// Replay every variant with `repetitions` instead of searching.
    pub full_grid: bool,
}

/// One point of the grid.
#[derive(Clone, Debug, Serialize)]
pub struct Variant {
    pub index: usize,
    /// None: the recorded count.
    pub teams: Option<u64>,
    pub threads: Option<u64>,
    /// The compile variant's label (None: the base compile options).
    pub compile: Option<String>,
}

impl Variant {
    /// `teams=8 threads=2 [clang-22 -O3]`, or `recorded launch`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.teams {
            parts.push(format!("teams={t}"));
        }
        if let Some(t) = self.threads {
            parts.push(format!("threads={t}"));
        }
        if let Some(c) = &self.compile {
            parts.push(format!("[{c}]"));
        }
        if parts.is_empty() {
            "recorded launch".to_string()
        } else {
            parts.join(" ")
        }
    }
}

/// Kernel times of one measurement (nanoseconds).
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    pub repetitions: usize,
    pub min_ns: u64,
    pub median_ns: u64,
    pub max_ns: u64,
}

impl Spread {
    pub fn of(times: &[u64]) -> Option<Spread> {
        Some(Spread {
            repetitions: times.len(),
            min_ns: *times.iter().min()?,
            median_ns: search::median(times)?,
            max_ns: *times.iter().max()?,
        })
    }
}

/// One replay of the search.
#[derive(Clone, Debug, Serialize)]
pub struct Trial {
    /// 1-based round (the grid has one).
    pub round: u32,
    /// None: the baseline (recorded image and launch).
    pub variant: Option<usize>,
    pub verified: bool,
    pub spread: Option<Spread>,
    pub run: Run,
}

/// The answer for one kernel.
#[derive(Clone, Debug, Serialize)]
pub struct Best {
    pub variant: usize,
    pub describe: String,
    /// Every launch it made in the search.
    pub spread: Spread,
    /// The recorded launch's median over the best's.
    pub speedup: f64,
    /// History row of its last replay.
    pub row: i64,
}

/// `tune`'s result for one recording.
#[derive(Clone, Debug, Serialize)]
pub struct TuneReport {
    pub recording: String,
    pub kernel: String,
    /// `halving` or `grid`.
    pub search: &'static str,
    pub variants: Vec<Variant>,
    /// Counts left out: outside the recorded limits.
    pub excluded: Vec<String>,
    /// The recorded image with the recorded launch.
    pub baseline: Trial,
    pub trials: Vec<Trial>,
    pub best: Option<Best>,
    /// Kernel launches of the variants (repetitions summed; the baseline's
    /// not included).
    pub launches: u64,
    /// The grid's launches: variants × repetitions.
    pub grid_launches: u64,
    /// Replays run, the baseline's included.
    pub replays: u32,
}

fn within(v: u64, limits: Option<[u64; 2]>) -> bool {
    match limits {
        Some([min, max]) => v >= min && (max == 0 || v <= max),
        None => true,
    }
}

/// Tune recording `id`; `on_trial` sees each replay as it ends.
pub fn tune(
    store: &mut Store,
    id: &RecordingId,
    opts: &TuneOptions,
    on_trial: &mut dyn FnMut(&Variant, &Trial),
) -> Result<TuneReport, RegressError> {
    let rec = store.recording(id)?;
    // A compile variant names flags or a compiler, so it runs the IR
    // there is, as `--toolchain`/`--cflags` do on every command that
    // replays: the image given, else an IR image, else the recording's
    // `.bc` part (`prefer_ir`, set on each variant below).
    let ir = opts.image.as_ref().map_or(
        rec.image_target == ImageTarget::Bitcode || rec.part(PartRole::Bitcode).is_some(),
        |i| i.target == ImageTarget::Bitcode,
    ) || opts.run.replay.compile.from_bitcode;
    if !opts.compiles.is_empty() && !ir {
        return Err(RegressError::Usage(format!(
            "compile variants need an IR image, and {} runs a native one and has no bitcode (.bc) part: give the IR of a -fopenmp-target-jit build as the image",
            id.short()
        )));
    }
    let ignore = opts.run.replay.ignore_limits;
    let mut excluded = Vec::new();
    let mut counts = |asked: &[u64], limits: Option<[u64; 2]>, what: &str| {
        if asked.is_empty() {
            return vec![None];
        }
        let mut keep = Vec::new();
        for &v in asked {
            if ignore || within(v, limits) {
                keep.push(Some(v));
            } else if let Some([min, max]) = limits {
                excluded.push(format!("{what}={v} (recorded limits {min}..{max})"));
            }
        }
        keep
    };
    let teams = counts(&opts.teams, rec.launch.teams_limits, "teams");
    let threads = counts(&opts.threads, rec.launch.threads_limits, "threads");
    let compiles: Vec<Option<&CompileVariant>> = if opts.compiles.is_empty() {
        vec![None]
    } else {
        opts.compiles.iter().map(Some).collect()
    };
    let mut variants = Vec::new();
    let mut settings = Vec::new();
    for c in &compiles {
        for &te in &teams {
            for &th in &threads {
                variants.push(Variant {
                    index: variants.len(),
                    teams: te,
                    threads: th,
                    compile: c.map(|c| c.label.clone()),
                });
                let mut r = opts.run.clone();
                r.use_cache = false;
                r.keep_output = false;
                r.replay.num_teams = te;
                r.replay.num_threads = th;
                // A variant that differs is simply dropped: no
                // confirmation replays, no thread-count hint.
                r.replay.confirm = 0;
                r.replay.thread_hint = false;
                if r.replay.verify == VerifyMode::Auto {
                    r.replay.verify = VerifyMode::On;
                }
                if let Some(c) = c {
                    r.replay.compile = c.compile.clone();
                    r.replay.compile.prefer_ir = true;
                }
                settings.push(r);
            }
        }
    }
    // The baseline: the recorded image, launch and compile options.
    let mut base_opts = settings
        .first()
        .cloned()
        .unwrap_or_else(|| opts.run.clone());
    base_opts.replay.num_teams = None;
    base_opts.replay.num_threads = None;
    base_opts.replay.compile = opts.run.replay.compile.clone();
    let mut replays = 0u32;
    let mut measure = |v: Option<usize>, reps: u32, round: u32| -> Result<Trial, RegressError> {
        let (image, r) = match v {
            Some(v) => (opts.image.as_ref(), &settings[v]),
            None => (None, &base_opts),
        };
        let mut r = r.clone();
        r.replay.repetitions = reps;
        let out = run(store, id, image, &r)?;
        replays += 1;
        let t = Trial {
            round,
            variant: v,
            verified: matches!(out.verdict.as_str(), "verified" | "within-tolerance"),
            spread: Spread::of(&out.kernel_times_ns),
            run: out,
        };
        if let Some(v) = v {
            on_trial(&variants[v], &t);
        }
        Ok(t)
    };
    let verdict = |t: &Trial| Measured {
        verified: t.verified,
        times_ns: t.run.kernel_times_ns.clone(),
    };
    let n = variants.len();
    if n == 0 {
        return Err(RegressError::Usage(format!(
            "no variant to tune: every count asked for is outside the recorded limits ({}); widen the counts or ignore the limits",
            excluded.join(", ")
        )));
    }
    let outcome = if opts.full_grid {
        search::grid(n, opts.repetitions, &mut measure, &verdict)?
    } else {
        search::halving(n, opts.repetitions, &mut measure, &verdict)?
    };
    let trials: Vec<Trial> = outcome.trials.into_iter().map(|(_, _, t)| t).collect();
    let Some(baseline) = outcome.baseline else {
        return Err(RegressError::Usage(
            "no variant to tune: the search measured nothing".into(),
        ));
    };
    let base_median = baseline.spread.as_ref().map(|s| s.median_ns);
    let best = outcome.best.and_then(|v| {
        // Every launch it made in the search (the search ranked on them).
        let mine: Vec<&Trial> = trials.iter().filter(|t| t.variant == Some(v)).collect();
        let times: Vec<u64> = mine
            .iter()
            .flat_map(|t| t.run.kernel_times_ns.iter().copied())
            .collect();
        let spread = Spread::of(&times)?;
        Some(Best {
            variant: v,
            describe: variants[v].describe(),
            speedup: base_median.map_or(0.0, |b| b as f64 / spread.median_ns.max(1) as f64),
            spread,
            row: mine.last()?.run.row,
        })
    });
    Ok(TuneReport {
        recording: id.to_hex(),
        kernel: rec.kernel.clone(),
        search: if opts.full_grid { "grid" } else { "halving" },
        launches: trials
            .iter()
            .map(|t| t.run.kernel_times_ns.len() as u64)
            .sum(),
        grid_launches: n as u64 * u64::from(opts.repetitions.max(1)),
        replays,
        variants,
        excluded,
        baseline,
        trials,
        best,
    })
}
