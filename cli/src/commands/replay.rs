//! `rrstore replay`: re-run one recorded kernel launch (store ID prefix,
//! `.rra` archive or LLVM `.json`), verify it, print what happened and append
//! a row to the replay history. Logic lives in `rrstore_replay`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_replay::verify::tolerance::DType;
use rrstore_replay::{
    BackendKind, RehydratePath, ReplayError, ReplayOptions, ReplayReport, ReplaySource, Verdict,
    VerifyMode,
};
use rrstore_report::shown::Shown;
use rrstore_store::Store;

use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Store ID (or unique prefix), .rra archive, LLVM recording .json, or
    /// a directory holding exactly one recording.
    pub recording: String,
    /// Backend: auto picks it from the image target (x86_64 -> host,
    /// cubin/PTX -> cuda, AMDGPU -> hip).
    #[arg(long, default_value = "auto", value_parser = backend_parser())]
    pub backend: BackendKind,
    /// Compare the arena with the recorded output byte for byte (default
    /// when the recording has an output snapshot; an error when it has none).
    #[arg(long, conflicts_with = "no_verify")]
    pub verify: bool,
    /// Do not compare.
    #[arg(long, conflicts_with = "tolerance")]
    pub no_verify: bool,
    #[command(flatten)]
    pub compare: crate::flags::replay::CompareFlags,
    /// Write the arena after the replay to FILE.
    #[arg(long, value_name = "FILE")]
    pub save_output: Option<PathBuf>,
    /// Which form `--save-output` writes when the arena was relocated: its
    /// pointers translated back to the recorded addresses (recorded,
    /// comparable with the recorded output), or as the device left it at
    /// the relocated address (relocated).
    #[arg(long, value_enum, default_value = "recorded", requires = "save_output")]
    pub save_output_form: SaveForm,
    /// Launch N times (re-uploading the input and globals each time) and
    /// report min/median/mean/standard deviation of the kernel time.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repetitions: u32,
    /// Override the number of teams (host: OMP_NUM_TEAMS); at least 1.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub num_teams: Option<u64>,
    /// Override the number of threads (host: OMP_NUM_THREADS); at least 1.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub num_threads: Option<u64>,
    /// Do not check --num-teams/--num-threads against the recorded limits.
    #[arg(long)]
    pub ignore_limits: bool,
    /// Run this image instead of the recorded one: a stored image's hash
    /// prefix or label, or an image file (added to the store). It must
    /// export the recording's kernel and match the backend's target.
    #[arg(long, value_name = "HASH|FILE")]
    pub image: Option<String>,
    /// Read part files of an LLVM recording that are symbolic links
    /// leading outside its directory (refused otherwise).
    #[arg(long)]
    pub follow_symlinks: bool,
    #[command(flatten)]
    pub run: crate::flags::replay::RunFlags,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ci: super::ciout::CiArgs,
}

/// `--backend`: `auto` or a backend of the table of kinds
/// (`rrstore_replay::backend::kind::KINDS`).
fn backend_parser() -> impl clap::builder::TypedValueParser<Value = BackendKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(BackendKind::names()).try_map(|name: String| {
        BackendKind::named(&name).ok_or_else(|| format!("no backend named {name}"))
    })
}

/// The replay settings ([`crate::flags::replay`]) and what only
/// `replay` has.
fn options(args: &Args, globals: &Globals) -> anyhow::Result<ReplayOptions> {
    let mut opts = crate::flags::replay::replay_options(&args.run, Some(&args.compare), globals)?;
    opts.backend = args.backend;
    opts.verify = if args.no_verify {
        VerifyMode::Off
    } else if args.verify || args.compare.tolerance {
        VerifyMode::On
    } else {
        VerifyMode::Auto
    };
    opts.num_teams = args.num_teams;
    opts.num_threads = args.num_threads;
    opts.ignore_limits = args.ignore_limits;
    opts.repetitions = args.repetitions;
    opts.save_output = args.save_output.clone();
    opts.save_relocated = args.save_output_form == SaveForm::Relocated;
    opts.thread_hint = true;
    Ok(opts)
}

/// The flag that overrides a refused link, when `e` is one.
fn link_hint(e: &ReplayError) -> &'static str {
    match e {
        ReplayError::Format(rrstore_format::FormatError::LinkOutside { .. }) => {
            " (give --follow-symlinks to read linked part files anyway)"
        }
        _ => "",
    }
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// A host replay whose first (fresh-arena) fill was slow, on a machine
/// whose memory explains it, says so on stderr (`host_memory`).
fn slow_fill_hint(r: &ReplayReport) {
    let t = &r.timing;
    let Some(&first) = t.rehydrate_ns.first() else {
        return;
    };
    // A held arena (the arena cache) is not fresh memory: no such cause.
    let held = r.timing.arena_memory == Some(rrstore_replay::backend::rehydrate::ArenaMemory::Held);
    if r.backend != "host" || first == 0 || held {
        return;
    }
    let rate = t.rehydrate_bytes as f64 / (first as f64 / 1e9);
    let probe = crate::flags::env::host_memory;
    if let Some(h) = super::host_memory::slow_fill_hint(probe, r.arena_size, rate) {
        eprintln!("{h}");
    }
}

fn print_text(
    r: &ReplayReport,
    history_row: Option<i64>,
    kernel_output: &super::confine::KernelOutput,
) {
    println!(
        "replay {} ({}) from {}",
        Shown(&r.kernel),
        Shown(&r.recording_id[..12.min(r.recording_id.len())]),
        Shown(&r.source)
    );
    if !r.backend.is_empty() {
        println!("  backend {}: {}", r.backend, Shown(&r.device));
    }
    if let Some(base) = r.arena_base {
        println!(
            "  arena {:#x}..{:#x} ({} bytes), {} args, teams {} threads {}",
            base,
            base + r.arena_size,
            r.arena_size,
            r.args.len(),
            r.num_teams,
            r.num_threads
        );
    }
    if let Some(p) = &r.placement {
        println!("  placement {}", p.summary());
    }
    if let Some(c) = &r.compiled {
        println!(
            "  compiled IR {} for {} by {} ({}){}",
            &c.ir_blake3[..12.min(c.ir_blake3.len())],
            c.target,
            Shown(&c.compiler_version),
            Shown(c.flags.join(" ")),
            if c.cached {
                ", cached".to_string()
            } else {
                format!(", {:.0} ms", c.compile_ns as f64 / 1e6)
            }
        );
    }
    if !r.recorded_environment.is_empty() {
        println!(
            "  environment {} (recorded with it; --num-teams/--num-threads override)",
            Shown(rrstore_format::environment::text(&r.recorded_environment))
        );
    }
    if !r.runtime_libraries.is_empty() {
        println!("  runtime {}", Shown(r.runtime_libraries.join(", ")));
    }
    let t = &r.timing;
    if let (Some(min), Some(med)) = (t.kernel_min_ns(), t.kernel_median_ns()) {
        if t.kernel_ns.len() > 1 {
            println!(
                "  kernel min {} median {} mean {} sd {} over {} launches",
                ms(min),
                ms(med),
                ms(t.kernel_mean_ns().unwrap_or(0.0).round() as u64),
                ms(t.kernel_sd_ns().unwrap_or(0.0).round() as u64),
                t.kernel_ns.len()
            );
        } else {
            println!("  kernel {}", ms(min));
        }
        let rate = t
            .rehydrate_bytes_per_s()
            .map(|b| match t.rehydrate_path {
                Some(RehydratePath::Files) => {
                    format!(" ({:.2} GB/s, read from its files by the backend)", b / 1e9)
                }
                _ => format!(" ({:.2} GB/s)", b / 1e9),
            })
            .unwrap_or_default();
        println!(
            "  rehydrate {} bytes in {}{rate}, load image {}, verify {}, wall {}",
            t.rehydrate_bytes,
            ms(t.rehydrate_ns.iter().copied().min().unwrap_or(0)),
            ms(t.load_image_ns),
            ms(t.verify_ns),
            ms(t.wall_ns)
        );
        slow_fill_hint(r);
    }
    if let Some(m) = &r.mismatch {
        for line in m.describe(r.arena_base) {
            println!("  {}", Shown(line));
        }
    }
    if let Some(c) = &r.confirmation {
        for line in c.describe(r.arena_base) {
            println!("  {}", Shown(line));
        }
    }
    if let Some(h) = &r.thread_hint {
        println!("  {}", h.describe());
    }
    if let Some(tr) = &r.tolerance {
        println!(
            "  tolerance ({}): {} of {} elements differ, {} out of bounds; max abs error {:e}, max rel error {:e}, max ULP {}",
            if tr.dtype == DType::F32 { "f32" } else { "f64" },
            tr.differing,
            tr.elements,
            tr.out_of_bounds,
            tr.max_abs_error,
            tr.max_rel_error,
            tr.max_ulp
        );
        if let Some(o) = tr.first_out_of_bounds {
            println!("  first element out of bounds at arena+{o:#x}");
        }
        if tr.tail_bytes_differing > 0 {
            println!("  {} trailing bytes differ", tr.tail_bytes_differing);
        }
    }
    if let Some(p) = &r.saved_output {
        let form = match r.saved_output_form {
            Some("relocated") => " (as the device left it, at the relocated address)",
            Some(_) => " (pointers at their recorded addresses)",
            None => "",
        };
        println!("  output saved to {}{form}", p.display());
    }
    // sandbox (hD): the runner's own lines, after it ended, before the verdict.
    kernel_output.print();
    let verdict = match r.verdict {
        Verdict::Verified => "VERIFIED (byte-identical to the recorded output)".to_string(),
        Verdict::WithinTolerance => "VERIFIED within tolerance".to_string(),
        Verdict::Mismatch => "MISMATCH".to_string(),
        Verdict::Nondeterministic => {
            "NONDETERMINISTIC (differs from the recorded output, and the replays disagree)"
                .to_string()
        }
        Verdict::Unverified => "ran (not verified)".to_string(),
        Verdict::Crashed { signal } => format!("CRASHED (signal {signal})"),
        Verdict::TimedOut => "TIMED OUT".to_string(),
        Verdict::Error => "ERROR".to_string(),
    };
    let tone = match r.verdict {
        Verdict::Verified | Verdict::WithinTolerance | Verdict::Unverified => {
            crate::color::Tone::Good
        }
        Verdict::Mismatch => crate::color::Tone::Bad,
        Verdict::Nondeterministic => crate::color::Tone::Warn,
        _ => crate::color::Tone::Warn,
    };
    println!("{}", crate::color::paint(tone, &verdict));
    if let Some(row) = history_row {
        println!("  history row {row}");
    }
}

/// `--save-output-form`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SaveForm {
    Recorded,
    Relocated,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut opts = options(&args, globals)?;
    // Before the store is opened: the host backend's runner is forked now,
    // while this process is small, and loads the OpenMP runtime while the
    // store and the recording are read (unused when the recording needs
    // another backend).
    opts.start_backend_early();
    let mut store = Store::open_default_create(globals.store.as_deref(), &globals.store_settings)
        .context("opening the store (replays record their history there)")?;
    let image = match &args.image {
        Some(spec) => Some(super::image::resolve_image(&mut store, spec)?.set),
        None => None,
    };
    // A directory holding one recording names it (as for inspect and pack).
    let spec = if std::path::Path::new(&args.recording).is_dir() {
        let desc = rrstore_format::llvm::single_recording(std::path::Path::new(&args.recording))
            .with_context(|| format!("cannot open recording `{}`", args.recording))?;
        desc.to_string_lossy().into_owned()
    } else {
        args.recording.clone()
    };
    let mut src = ReplaySource::open_in(&spec, args.follow_symlinks, &store).map_err(|e| {
        let hint = link_hint(&e);
        crate::errors::replay_error(e)
            .context(format!("cannot open recording `{}`{hint}", args.recording))
    })?;
    if let Some(set) = &image {
        // An application's device images: the one built for this recording.
        opts.image = Some(
            set.pick(&src.recording)
                .map_err(crate::errors::regress_error)?,
        );
    }
    let mut report = rrstore_replay::replay(&mut src, &opts);
    let kernel_output = super::confine::KernelOutput::new(
        &report.runner_output,
        opts.backends.sandbox,
        report.sandbox,
    );
    let row = match rrstore_replay::history::record_for(&store, src.id, &report, &opts) {
        Ok(row) => Some(row),
        // A read-only store is read, not written: the verdict still stands.
        Err(e) if store.is_read_only() => {
            eprintln!(
                "warning: the replay's history row could not be written: the store {} is read-only ({e})",
                store.dir().display()
            );
            None
        }
        Err(e) => {
            return Err(crate::errors::replay_error(e)).with_context(|| {
                format!(
                    "the replay ran ({}) but its history row could not be written to {}",
                    report.verdict.as_str(),
                    store.dir().display()
                )
            })
        }
    };
    if args.ci.wanted() {
        let label = store.recording_label(&src.id).unwrap_or_default();
        let suite = rrstore_report::suite::from_replay(&report, &label, row);
        args.ci.write(&suite)?;
    }
    if args.json {
        let mut v = serde_json::to_value(&report)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("history_row".into(), row.into());
            let t = &report.timing;
            o.insert(
                "rehydrate_bytes_per_s".into(),
                t.rehydrate_bytes_per_s().into(),
            );
            o.insert("kernel_min_ns".into(), t.kernel_min_ns().into());
            o.insert("kernel_median_ns".into(), t.kernel_median_ns().into());
            o.insert("kernel_mean_ns".into(), t.kernel_mean_ns().into());
            o.insert("kernel_sd_ns".into(), t.kernel_sd_ns().into());
            kernel_output.insert_json(o);
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_text(&report, row, &kernel_output);
    }
    drop(src);
    if row.is_some() {
        // The compiled image joins the image library, labelled with where
        // it came from (a failure costs only the label).
        if let Err(e) = rrstore_replay::history::register_compiled(&mut store, &report) {
            eprintln!("warning: the compiled image could not be added to the image library: {e}");
        }
    }
    // The index's log, when due (every ~8 replays), is folded back once the
    // result is out.
    store.fold_history_log();
    if let Some(e) = report.error.take() {
        return Err(crate::errors::replay_error(e));
    }
    Ok(match report.verdict {
        Verdict::Mismatch => ExitCode::from(crate::exit::MISMATCH),
        Verdict::Nondeterministic => ExitCode::from(crate::exit::NONDETERMINISTIC),
        _ => ExitCode::SUCCESS,
    })
}
