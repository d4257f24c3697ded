//! `rrstore check [--image HASH|FILE] [--kernel GLOB] [--label GLOB]
//! [--tolerance --dtype f32|f64 --rtol X --atol Y] [--json]`: replay every
//! matching recording and print one aligned line per recording; exit 1
//! (MISMATCH) when any regressed. Logic: rrstore_replay::regress::check.

use std::process::ExitCode;
use std::time::Duration;

use rrstore_replay::regress::check::{check, CheckOptions, CheckRow};
use rrstore_replay::regress::run::RunOptions;
use rrstore_replay::verify::tolerance::{DType, Tolerance};
use rrstore_replay::{ReplayOptions, VerifyMode};
use rrstore_store::LsFilter;

use super::image::{regress_err, resolve_image};
use super::storeutil;
use crate::Globals;

/// Replay options shared by check and bisect.
#[derive(clap::Args, Clone)]
pub struct RunArgs {
    /// Compare as floating-point elements within --rtol/--atol instead of
    /// byte for byte; needs --dtype.
    #[arg(long, requires = "dtype")]
    pub tolerance: bool,
    /// Element type for --tolerance.
    #[arg(long, value_parser = ["f32", "f64"])]
    pub dtype: Option<String>,
    #[arg(long, default_value_t = 1e-5)]
    pub rtol: f64,
    #[arg(long, default_value_t = 1e-8)]
    pub atol: f64,
    /// Kill a kernel after SECS seconds (counts as a regression).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Do not keep replay outputs in the store (then `diff h:ROW` re-runs).
    #[arg(long)]
    pub no_keep_outputs: bool,
}

impl RunArgs {
    pub fn options(&self, use_cache: bool) -> anyhow::Result<RunOptions> {
        let timeout = match self.timeout {
            Some(s) if s > 0.0 && s.is_finite() => Some(Duration::from_secs_f64(s)),
            Some(s) => anyhow::bail!("--timeout must be a positive number of seconds, got {s}"),
            None => None,
        };
        let tolerance = self.tolerance.then(|| Tolerance {
            dtype: if self.dtype.as_deref() == Some("f64") {
                DType::F64
            } else {
                DType::F32
            },
            rtol: self.rtol,
            atol: self.atol,
            max_ulp: None,
        });
        Ok(RunOptions {
            replay: ReplayOptions {
                verify: if tolerance.is_some() {
                    VerifyMode::On
                } else {
                    VerifyMode::Auto
                },
                tolerance,
                timeout,
                ..ReplayOptions::default()
            },
            use_cache,
            keep_output: !self.no_keep_outputs,
        })
    }
}

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
    #[command(flatten)]
    pub run: RunArgs,
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

fn cells(r: &CheckRow) -> [String; 8] {
    [
        r.kernel.clone(),
        r.recording[..12.min(r.recording.len())].to_string(),
        if r.regressed {
            format!("REGRESSED ({})", r.run.verdict)
        } else {
            r.run.verdict.clone()
        },
        yes_no(r.changed_vs_recorded).into(),
        yes_no(r.changed_vs_baseline).into(),
        r.time_ratio
            .map(|t| format!("{t:.2}x"))
            .unwrap_or_else(|| "-".into()),
        format!(
            "h:{}{}",
            r.run.row,
            if r.run.cached { " (cached)" } else { "" }
        ),
        r.label.clone(),
    ]
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut store = storeutil::open(globals)?;
    let image = match &args.image {
        Some(spec) => Some(resolve_image(&mut store, spec)?.image),
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
        run: args.run.options(args.use_cache)?,
    };
    let report = check(&mut store, &opts, &mut |_| {}).map_err(regress_err)?;
    let now = rrstore_report::time::now_unix();
    args.ci
        .write(&rrstore_report::suite::from_check(&report, now))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if report.rows.is_empty() {
        println!("no recording matches");
    } else {
        let head = [
            "kernel",
            "recording",
            "verdict",
            "vs recorded",
            "vs base",
            "time",
            "run",
            "label",
        ];
        let rows: Vec<[String; 8]> = report.rows.iter().map(cells).collect();
        let mut w = head.map(str::len);
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.len());
            }
        }
        let line = |c: [&str; 8]| {
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
        println!(
            "{} recording(s), {} regressed; {} replay(s) run, {} from the history{}",
            report.rows.len(),
            report.regressed,
            report.replays,
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
