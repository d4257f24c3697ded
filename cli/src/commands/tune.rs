//! `rrstore tune ID|--label GLOB [--teams LIST] [--threads LIST]
//! [--variant-cflags FLAGS]... [--toolchains T...] [--image IR]
//! [--repetitions R] [--full-grid] [--json] [--junit FILE]
//! [--markdown FILE]`: the fastest verified launch configuration and
//! compile variant of each kernel, with its speedup over the recorded
//! image and launch and the spread of its kernel times. Exit 0 when every
//! kernel has a verified variant, 1 when one has none. Logic:
//! rrstore_replay::regress::tune; the JUnit/Markdown suite:
//! rrstore_report::suite_tune.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_replay::regress::run::RunOptions;
use rrstore_replay::regress::tune::{tune, CompileVariant, Trial, TuneOptions, Variant};
use rrstore_report::shown::Shown;

use super::image::resolve_image;
use super::storeutil;
use crate::errors::regress_error as regress_err;
use crate::exit::UsageError;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub select: crate::flags::regress::Selection,
    /// Team counts to try: a list and ranges (`1,2,8`, `4-8`) [default:
    /// the recorded one].
    #[arg(long, value_name = "LIST")]
    pub teams: Option<String>,
    /// Thread counts to try: a list and ranges (`1,2`, `1-4`) [default:
    /// the recorded one].
    #[arg(long, value_name = "LIST")]
    pub threads: Option<String>,
    /// Try counts outside the recorded TeamsLimits/ThreadsLimits (left out
    /// by default).
    #[arg(long)]
    pub ignore_limits: bool,
    /// A compile variant of the IR image (or of the recording's .bc part,
    /// which compile variants select): flags after rrstore's -O2 and
    /// --cflags, split as a shell would; repeat for several.
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub variant_cflags: Vec<String>,
    /// Compile variants with each of these toolchains (clang-N, N, PATH).
    #[arg(long, num_args = 1.., value_name = "TOOLCHAIN")]
    pub toolchains: Vec<String>,
    /// The image the variants run (a file, or a stored image's hash prefix
    /// or label; IR for compile variants) [default: the recorded one].
    #[arg(long, value_name = "FILE_OR_HASH")]
    pub image: Option<String>,
    /// Repetitions per variant of the full grid; the search spends at
    /// most half of the grid's launches.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub repetitions: u32,
    /// Replay every variant with --repetitions instead of searching.
    #[arg(long)]
    pub full_grid: bool,
    #[command(flatten)]
    pub replay: crate::flags::replay::ReplayFlags,
    /// Print every kernel's variants, replays and best as JSON (docs/json.md).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ci: super::ciout::CiArgs,
}

/// `1,2,8` and `4-8` (every count in the range), each at least 1.
pub fn counts(flag: &str, s: &str) -> Result<Vec<u64>, UsageError> {
    let bad = || {
        UsageError(format!(
            "{flag} `{s}` is not a list of counts: give numbers of at least 1 and ranges, e.g. `1,2,8` or `1-4`"
        ))
    };
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim) {
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u64>(), b.trim().parse::<u64>()),
            None => (item.parse::<u64>(), item.parse::<u64>()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else {
            return Err(bad());
        };
        if lo == 0 || hi < lo || hi - lo > 4096 {
            return Err(bad());
        }
        for v in lo..=hi {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    Ok(out)
}

/// Toolchains × flags, each on top of the base compile options.
fn compile_variants(args: &Args, run: &RunOptions) -> anyhow::Result<Vec<CompileVariant>> {
    let base = &run.replay.compile;
    let toolchains: Vec<Option<&String>> = if args.toolchains.is_empty() {
        vec![None]
    } else {
        args.toolchains.iter().map(Some).collect()
    };
    let flags: Vec<Option<&String>> = if args.variant_cflags.is_empty() {
        vec![None]
    } else {
        args.variant_cflags.iter().map(Some).collect()
    };
    if args.toolchains.is_empty() && args.variant_cflags.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for t in &toolchains {
        for f in &flags {
            let mut c = base.clone();
            if let Some(t) = t {
                c.toolchain = Some((*t).clone());
            }
            if let Some(f) = f {
                c.cflags.extend(shlex::split(f).ok_or_else(|| {
                    UsageError(format!(
                        "--variant-cflags `{f}` has an unbalanced quote: quote it as a shell would"
                    ))
                })?);
            }
            let label = format!(
                "{} {}",
                c.toolchain.as_deref().unwrap_or("default"),
                c.cflags.join(" ")
            );
            out.push(CompileVariant {
                label: label.trim().to_string(),
                compile: c,
            });
        }
    }
    Ok(out)
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn print_trial(v: &Variant, t: &Trial) {
    let what = match (&t.spread, t.verified) {
        (Some(s), true) => format!(
            "verified, median {} ({} reps, {}..{})",
            ms(s.median_ns),
            s.repetitions,
            ms(s.min_ns),
            ms(s.max_ns)
        ),
        _ => crate::color::paint(
            crate::color::Tone::Bad,
            &format!("{}: never chosen", t.run.verdict.to_uppercase()),
        ),
    };
    println!("  round {} {:<36} {what}", t.round, Shown(&v.describe()));
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut store = storeutil::open(globals)?;
    let mut run = RunOptions {
        replay: args.replay.options(globals)?,
        use_cache: false,
        keep_output: false,
    };
    run.replay.ignore_limits = args.ignore_limits;
    let teams = match &args.teams {
        Some(s) => counts("--teams", s)?,
        None => Vec::new(),
    };
    let threads = match &args.threads {
        Some(s) => counts("--threads", s)?,
        None => Vec::new(),
    };
    let compiles = compile_variants(&args, &run)?;
    let image_set = match &args.image {
        Some(spec) => Some(resolve_image(&mut store, spec)?.set),
        None => None,
    };
    let ids = args.select.ids(&store, "tune")?;
    let mut reports = Vec::new();
    for id in &ids {
        let rec = store.recording(id)?;
        let image = match &image_set {
            Some(set) if !compiles.is_empty() => Some(set.pick_ir(&rec).map_err(regress_err)?),
            Some(set) => Some(set.pick(&rec).map_err(regress_err)?),
            None => None,
        };
        let opts = TuneOptions {
            teams: teams.clone(),
            threads: threads.clone(),
            compiles: compiles.clone(),
            image,
            run: run.clone(),
            repetitions: args.repetitions,
            full_grid: args.full_grid,
        };
        if !args.json {
            println!("tune {} ({})", Shown(&rec.kernel), id.short());
        }
        let json = args.json;
        let r = tune(&mut store, id, &opts, &mut |v, t| {
            if !json {
                print_trial(v, t);
            }
        })
        .map_err(regress_err)
        .with_context(|| format!("tuning {}", id.short()))?;
        if !json {
            print_summary(&r);
        }
        reports.push(r);
    }
    args.ci.write_labelled(&store, &ids, |labels, now| {
        rrstore_report::suite_tune::from_tune(&reports, labels, now)
    })?;
    let all_verified = reports.iter().all(|r| r.best.is_some());
    if args.json {
        let v = serde_json::json!({
            "recordings": reports,
            "launches": reports.iter().map(|r| r.launches).sum::<u64>(),
            "replays": reports.iter().map(|r| r.replays).sum::<u32>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(if all_verified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::MISMATCH)
    })
}

fn print_summary(r: &rrstore_replay::regress::tune::TuneReport) {
    for e in &r.excluded {
        println!("  left out: {e} (--ignore-limits to try it)");
    }
    if let Some(s) = &r.baseline.spread {
        println!(
            "  recorded launch: {} median {} ({} reps, {}..{})",
            r.baseline.run.verdict,
            ms(s.median_ns),
            s.repetitions,
            ms(s.min_ns),
            ms(s.max_ns)
        );
    }
    println!(
        "  {}: {} variant(s), {} launches (the full grid: {}), {} replays",
        r.search,
        r.variants.len(),
        r.launches,
        r.grid_launches,
        r.replays
    );
    match &r.best {
        Some(b) => println!(
            "  best: {} median {} ({}..{}, {} reps), {}",
            Shown(&b.describe),
            ms(b.spread.median_ns),
            ms(b.spread.min_ns),
            ms(b.spread.max_ns),
            b.spread.repetitions,
            if b.speedup < 1.0 {
                format!(
                    "no faster than the recorded launch ({:.2}x; history row {})",
                    b.speedup, b.row
                )
            } else {
                format!(
                    "{:.2}x the recorded launch (history row {})",
                    b.speedup, b.row
                )
            }
        ),
        None => println!(
            "  {}",
            crate::color::paint(
                crate::color::Tone::Bad,
                "no variant verified: nothing to choose"
            )
        ),
    }
}
