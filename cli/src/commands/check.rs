//! `rrstore check [--image HASH|FILE] [--kernel GLOB] [--label GLOB]
//! [--repetitions N] [--tolerance --dtype f32|f64 --rtol X --atol Y
//! --max-ulp N] [--json]`: replay every matching recording and print one aligned line
//! per recording (kernel time as median ratio with both spreads); exit 1
//! (MISMATCH) when any regressed (not for nondeterministic rows or known
//! differences: `rrstore_replay::regress::check::status`), 3 (NOT_FOUND) when none matches. Logic:
//! rrstore_replay::regress::check.

use anyhow::Context;
use std::process::ExitCode;

use rrstore_replay::regress::check::{
    check, CheckOptions, CheckRow, Spread, Status, DEFAULT_REPETITIONS, SLOWDOWN_THRESHOLD,
};
use rrstore_report::shown::Shown;
use rrstore_store::LsFilter;

use super::image::resolve_image;
use super::storeutil;
use crate::errors::regress_error as regress_err;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Replay with this image instead of each recording's own (stored
    /// image hash prefix or label, or a file, which is added).
    #[arg(long, value_name = "HASH|FILE")]
    pub image: Option<String>,
    /// Only recordings whose kernel name matches this glob.
    #[arg(long, value_name = "GLOB")]
    pub kernel: Option<String>,
    /// Only recordings whose label matches this glob.
    #[arg(long, value_name = "GLOB")]
    pub label: Option<String>,
    /// Reuse history rows for the --image runs too (the recorded-image
    /// baseline always comes from the history when present).
    #[arg(long)]
    pub use_cache: bool,
    /// Kernel launches per replay; the median is compared, and a slowdown
    /// is flagged only when the spreads do not overlap (docs/regress.md).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_REPETITIONS,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repetitions: u32,
    #[command(flatten)]
    pub run: crate::flags::regress::RegressFlags,
    /// Only the recordings of shard I of N (I from 0; by recording ID), or
    /// `auto`, `auto/N`, `auto/VAR`: from a Slurm job array or a
    /// Kubernetes Indexed Job (docs/fleet.md).
    #[arg(long, value_name = "I/N|auto|auto/N")]
    pub shard: Option<String>,
    /// Name of the fleet run: with --results, this shard's report is
    /// written as runs/NAME/shard-I-of-N.json; with --collect, every
    /// shard's is read.
    #[arg(long = "run", value_name = "NAME")]
    pub run_name: Option<String>,
    /// Write this shard's results to a directory or a remote (`NAME:`).
    #[arg(long, value_name = "DIR|REMOTE:", requires = "run_name")]
    pub results: Option<String>,
    /// Replay nothing: gather run NAME's shard results from a directory or
    /// a remote into one report; exit 1 if any regressed, 3 if a shard is
    /// missing.
    #[arg(long, value_name = "DIR|REMOTE:", requires = "run_name",
          conflicts_with_all = ["results", "shard", "image"])]
    pub collect: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ci: super::ciout::CiArgs,
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "changed",
        Some(false) => "same",
        None => "-",
    }
}

/// `median [q1..q3]` in milliseconds, with the sample count.
fn spread_text(s: &Spread) -> String {
    let ms = |ns: u64| format!("{:.3}", ns as f64 / 1e6);
    if s.samples == 1 {
        format!("{}ms x1", ms(s.median_ns))
    } else {
        format!(
            "{} [{}..{}]ms x{}",
            ms(s.median_ns),
            ms(s.q1_ns),
            ms(s.q3_ns),
            s.samples
        )
    }
}

fn time_cells(r: &CheckRow) -> [String; 2] {
    let Some(t) = &r.time else {
        return ["-".into(), "-".into()];
    };
    let flag = match (t.slower, t.confirmed_by) {
        (true, Some(row)) => format!(" SLOWER (confirmed by h:{row})"),
        (true, None) => " SLOWER".to_string(),
        (false, Some(row)) => format!(" (noise: h:{row} was as slow)"),
        _ if t.faster => " faster".to_string(),
        _ if !t.enough_samples => " (too few launches to judge)".to_string(),
        _ => String::new(),
    };
    [
        format!("{:.2}x{flag}", t.ratio),
        format!(
            "{} vs {} ({} run(s))",
            spread_text(&t.run),
            spread_text(&t.baseline),
            t.baseline_rows.len()
        ),
    ]
}

fn cells(r: &CheckRow) -> [String; 9] {
    let [ratio, spreads] = time_cells(r);
    [
        rrstore_report::names::display(&r.kernel).into_owned(),
        r.recording[..12.min(r.recording.len())].to_string(),
        match r.status {
            Status::Regressed => format!("REGRESSED ({})", Shown(&r.run.verdict)),
            Status::Known => format!("{} ({})", r.status.words(), Shown(&r.run.verdict)),
            Status::Nondeterministic => "nondeterministic (stable ranges unchanged)".to_string(),
            Status::Passed => Shown(&r.run.verdict).to_string(),
        },
        yes_no(r.changed_vs_recorded).into(),
        yes_no(r.changed_vs_baseline).into(),
        ratio,
        spreads,
        format!(
            "h:{}{}",
            r.run.row,
            if r.run.cached { " (cached)" } else { "" }
        ),
        // From the recording's maker: escaped (rrstore_report::shown).
        Shown(&r.label).to_string(),
    ]
}

fn no_match(args: &Args) -> String {
    let mut by = Vec::new();
    if let Some(k) = &args.kernel {
        by.push(format!("--kernel '{k}'"));
    }
    if let Some(l) = &args.label {
        by.push(format!("--label '{l}'"));
    }
    if by.is_empty() {
        "the store holds no recording to check; import some first".into()
    } else {
        format!(
            "no stored recording matches {}; `rrstore ls` lists kernels and labels",
            by.join(" and ")
        )
    }
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut store = storeutil::open(globals)?;
    if let (Some(dest), Some(name)) = (&args.collect, &args.run_name) {
        return super::check_collect::run(&store, dest, name, args.json);
    }
    let image = match &args.image {
        Some(spec) => Some(resolve_image(&mut store, spec)?.set),
        None => None,
    };
    let mut run = args.run.options(args.use_cache, globals)?;
    run.replay.repetitions = args.repetitions;
    run.replay.thread_hint = true;
    let mut fleet = args.run.parallel.fleet()?;
    fleet.shard = args.shard.as_deref().map(super::fleet::shard).transpose()?;
    if let Some(n) = &args.run_name {
        if args.results.is_none() {
            return Err(crate::exit::UsageError(
                "--run NAME needs --results DIR|REMOTE: (write this shard's results) or --collect DIR|REMOTE: (gather them)".into(),
            )
            .into());
        }
        // Refused before anything replays.
        if !rrstore_store::remote::runs::valid_run_name(n) {
            let e = rrstore_store::remote::RemoteError::BadRunName(n.clone());
            return Err(super::remote::lift(e));
        }
    }
    let results = match &args.results {
        Some(dest) => Some(super::fleet::dest(&store, dest)?),
        None => None,
    };
    let opts = CheckOptions {
        image,
        filter: LsFilter {
            kernel: args.kernel.clone(),
            label: args.label.clone(),
            sort: rrstore_store::LsSort::Name,
            ..LsFilter::default()
        },
        run,
        fleet,
    };
    let report = check(&mut store, &opts, &mut |_| {}).map_err(regress_err)?;
    if let (Some(dest), Some(name)) = (results, &args.run_name) {
        // An empty shard is a result too: collect counts it as reported.
        let place = super::fleet::open(&store, dest, true)?;
        super::check_collect::write(&place, name, opts.fleet.shard, &report)?;
        // And the shard's replays join the remote's shared history (its
        // recordings are there already: the shard pulled them).
        if let rrstore_replay::fleet::collect::Place::Remote(remote) = &place {
            let ids: Vec<rrstore_format::RecordingId> = report
                .rows
                .iter()
                .filter_map(|r| r.recording.parse().ok())
                .collect();
            let shared = rrstore_store::remote::history::push_rows(&store, remote, &ids)
                .map_err(super::remote::lift)
                .with_context(|| format!("cannot push the history of run `{name}`"))?;
            for w in shared.warnings() {
                eprintln!("warning: {}", Shown(w.to_string()));
            }
            if !args.json {
                eprintln!(
                    "pushed {} history row(s) of run {name} in {} batch(es)",
                    shared.rows, shared.batches
                );
            }
        }
    }
    // Nothing checked must not pass CI: a typo in a glob would. An empty
    // shard of recordings that exist is fine.
    if report.rows.is_empty()
        && (opts.fleet.shard.is_none() || store.list(&opts.filter)?.is_empty())
    {
        return Err(crate::exit::NotFoundError(no_match(&args)).into());
    }
    let now = rrstore_report::time::now_unix();
    args.ci
        .write(&rrstore_report::suite::from_check(&report, now))?;
    if args.json {
        // Each row with what its own runners printed (`kernel_output`).
        let mut json = serde_json::to_value(&report)?;
        if let Some(rows) = json.get_mut("rows").and_then(|r| r.as_array_mut()) {
            for (j, r) in rows.iter_mut().zip(&report.rows) {
                if let Some(o) = j.as_object_mut() {
                    let out = r.runner_output();
                    o.insert(
                        "kernel_output".into(),
                        String::from_utf8_lossy(&out.bytes).into_owned().into(),
                    );
                }
            }
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        // sandbox (hD): what each recording's runners printed, under it,
        // apart from the table.
        super::confine::KernelOutput::print_by_recording(
            opts.run.replay.backends.sandbox,
            report.replays > 0,
            report.rows.iter().map(|r| {
                let heading = format!(
                    "{} ({})",
                    Shown(rrstore_report::names::display(&r.kernel)),
                    &r.recording[..12.min(r.recording.len())]
                );
                (heading, r.runner_output())
            }),
        );
        let head = [
            "kernel",
            "recording",
            "verdict",
            "vs recorded",
            "vs base",
            "time",
            "kernel: run vs base, median [quartiles]",
            "run",
            "label",
        ];
        let rows: Vec<[String; 9]> = report.rows.iter().map(cells).collect();
        let mut w = head.map(str::len);
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.len());
            }
        }
        let line = |c: [&str; 9]| {
            let mut s = String::new();
            for (i, x) in c.iter().enumerate() {
                let cell = format!("{:<width$}", x, width = w[i]);
                s += &match (i, *x) {
                    (2, "verified" | "within-tolerance") => {
                        crate::color::paint(crate::color::Tone::Good, &cell)
                    }
                    (2, v) if v.starts_with("REGRESSED") => {
                        crate::color::paint(crate::color::Tone::Bad, &cell)
                    }
                    (2, v) if v.starts_with("nondeterministic") || v.starts_with("differs") => {
                        crate::color::paint(crate::color::Tone::Warn, &cell)
                    }
                    _ => cell,
                };
                s += "  ";
            }
            println!("{}", s.trim_end());
        };
        line(head);
        for r in &rows {
            line(r.each_ref().map(String::as_str));
        }
        // The thread-count hints of host rows that differed (the rows'
        // `detail` carries them).
        for r in &report.rows {
            for hint in r.run.detail.lines().filter(|l| l.starts_with("hint: ")) {
                println!(
                    "{} ({}): {}",
                    rrstore_report::names::display(&r.kernel),
                    &r.recording[..12.min(r.recording.len())],
                    Shown(hint)
                );
            }
        }
        println!(
            "{} recording(s), {} regressed, {} nondeterministic (stable ranges unchanged), {} differing from the recording as their baseline did, {} slower beyond the noise (median over {:.0}% above every baseline run's, interquartile ranges apart); {} replay(s) run of {} launch(es) each, {} from the history{}",
            report.rows.len(),
            report.regressed,
            report.nondeterministic,
            report.known,
            report.slower,
            SLOWDOWN_THRESHOLD * 100.0,
            report.replays,
            report.repetitions,
            report.cached,
            report
                .image
                .as_ref()
                .map(|h| format!("; image {}", &h[..12]))
                .unwrap_or_default()
        );
    }
    Ok(if report.regressed > 0 {
        ExitCode::from(crate::exit::MISMATCH)
    } else {
        ExitCode::SUCCESS
    })
}
