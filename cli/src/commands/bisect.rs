//! `rrstore bisect ID --images A B ... [--good N] [--bad N]` and
//! `rrstore bisect --label GLOB [--kernel GLOB] --images ...`: the first
//! image (list ordered oldest to newest) whose replay output differs from
//! the good image's, per recording; each step and the culprit are printed,
//! and runs already in the history are not repeated. Exit 0 once the search
//! completes (culprit or not); errors use the usual codes.
//! `--passes` (the first compiler pass): [`super::bisect_passes`].
//! Logic: rrstore_replay::regress::bisect.

use rrstore_report::shown::Shown;
use std::process::ExitCode;

use rrstore_replay::regress::bisect::{bisect_all, BisectOptions, ListedImage, Step};
use rrstore_replay::regress::run::Run;

use super::image::resolve_image;
use super::storeutil;
use crate::errors::regress_error as regress_err;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub select: crate::flags::regress::Selection,
    /// Images, oldest first: stored hash prefixes or labels, or files.
    #[arg(long, num_args = 2.., required_unless_present = "passes", value_name = "FILE_OR_HASH")]
    pub images: Vec<String>,
    /// Find the first optimization pass that changes the output: the IR
    /// (the recording's, or --image) compiled with -opt-bisect-limit
    /// (docs/regress.md, "Bisecting compiler passes").
    #[arg(long, conflicts_with_all = ["images", "good", "bad"])]
    pub passes: bool,
    /// With --passes: toolchains, oldest first (clang-N, N or paths): the
    /// first whose image changes the output of the first one's is found,
    /// then its passes are bisected.
    #[arg(long, num_args = 2.., requires = "passes", value_name = "TOOLCHAIN")]
    pub toolchains: Vec<String>,
    /// With --passes: a kernel more than PCT percent slower than the
    /// reference (and slower than its slowest repetition) counts as
    /// changed too.
    #[arg(long, requires = "passes", value_name = "PCT")]
    pub slower: Option<f64>,
    /// With --passes: launches per replay [default: 5 with --slower, else 1].
    #[arg(long, requires = "passes", value_name = "N")]
    pub repetitions: Option<u32>,
    /// With --passes: the IR to compile (a file, or a stored image's hash
    /// prefix or label) instead of the recording's own.
    #[arg(long, requires = "passes", value_name = "FILE_OR_HASH")]
    pub image: Option<String>,
    /// Index of a known good image (default 0, the oldest).
    #[arg(long, default_value_t = 0)]
    pub good: usize,
    /// Index of the last image to consider (default: the newest).
    #[arg(long)]
    pub bad: Option<usize>,
    #[command(flatten)]
    pub run: crate::flags::regress::RegressFlags,
    /// Print every recording's search steps and culprit as JSON (docs/json.md).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ci: super::ciout::CiArgs,
}

/// How a step of a search ended: `good output H`, `BAD output H differs`
/// or `BAD VERDICT` (bisect, `bisect --passes`).
pub(super) fn outcome(good: bool, run: &Run) -> String {
    format!(
        "{} {}",
        if good {
            crate::color::paint(crate::color::Tone::Good, "good")
        } else {
            crate::color::paint(crate::color::Tone::Bad, "BAD")
        },
        match &run.output {
            Some(h) if good => format!("output {}", &rrstore_format::id::hex(h)[..12]),
            Some(h) => format!("output {} differs", &rrstore_format::id::hex(h)[..12]),
            None => run.verdict.clone(),
        }
    )
}

fn print_step(s: &Step) {
    println!(
        "  step {}: image {} {} ({}) -> {}{}",
        s.step,
        s.index,
        &s.image[..12],
        s.label,
        outcome(s.good, &s.run),
        if s.run.cached {
            format!(" (history row {}, not re-run)", s.run.row)
        } else {
            format!(" (replayed, row {})", s.run.row)
        }
    );
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    if args.passes {
        return super::bisect_passes::run(&args, globals);
    }
    let mut store = storeutil::open(globals)?;
    let mut images = Vec::new();
    for spec in &args.images {
        let r = resolve_image(&mut store, spec)?;
        images.push(ListedImage {
            label: r
                .set
                .images
                .first()
                .map(|i| i.0.label.clone())
                .unwrap_or_default(),
            set: r.set,
        });
    }
    let ids = args.select.ids(&store, "bisect")?;
    let opts = BisectOptions {
        images,
        good: args.good,
        bad: args.bad,
        run: args.run.options(true, globals)?,
    };
    rrstore_replay::regress::bisect::range(&opts).map_err(regress_err)?;
    let fleet = args.run.parallel.fleet()?;
    let mut reports = Vec::new();
    let mut first_err = None;
    // fleet (issue 21): several recordings at once; each is printed whole,
    // in order, once done.
    bisect_all(&mut store, &ids, &opts, &fleet, &mut |i, r| {
        if first_err.is_some() {
            return;
        }
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                first_err = Some(regress_err(e).context(format!("bisecting {}", ids[i].short())));
                return;
            }
        };
        if !args.json {
            println!("bisect {} ({})", Shown(&r.kernel), ids[i].short());
            for s in &r.steps {
                print_step(s);
            }
            println!("  reference: {}", r.reference);
            match (r.culprit, &r.culprit_image) {
                (Some(i), Some(h)) => println!(
                    "  culprit: image {i} {} ({}) is the first to change the output (last good: image {}); {} replay(s), {} from the history",
                    &h[..12],
                    r.culprit_label.as_deref().unwrap_or(""),
                    r.last_good,
                    r.replays,
                    r.cached
                ),
                _ => println!(
                    "  no image in {}..={} changed the output; {} replay(s), {} from the history",
                    r.good, r.bad, r.replays, r.cached
                ),
            }
        }
        reports.push(r);
    })
    .map_err(regress_err)?;
    if let Some(e) = first_err {
        return Err(e);
    }
    args.ci.write_labelled(&store, &ids, |labels, now| {
        rrstore_report::suite::from_bisect(&reports, labels, now)
    })?;
    let total: u32 = reports.iter().map(|r| r.replays).sum();
    if args.json {
        let v = serde_json::json!({
            "recordings": reports,
            "replays": total,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if reports.len() > 1 {
        // sandbox (hD): what the runners printed, apart from the summary.
        super::confine::KernelOutput::after_runs(
            opts.run.replay.backends.sandbox,
            total > 0,
            reports
                .iter()
                .flat_map(|r| r.steps.iter().map(|s| &s.run.runner_output)),
        )
        .print();
        println!("first image that changed each kernel:");
        for r in &reports {
            println!(
                "  {:<48} {}",
                Shown(&r.kernel),
                match (r.culprit, &r.culprit_label) {
                    (Some(i), l) => format!("image {i} ({})", Shown(l.as_deref().unwrap_or(""))),
                    _ => "unchanged".into(),
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
