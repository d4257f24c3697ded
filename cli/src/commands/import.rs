//! `rrstore import PATH...`: LLVM recording directories (recursively, any
//! generation) and `.rra` archives into the store, with a progress bar on a
//! terminal and a summary. A recording that fails is reported and the run
//! goes on to the next (unless `--fail-fast`); the exit code is the first
//! failure's. Partial LLVM recordings found in directories are named as
//! skipped.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use rrstore_format::FormatError;
use rrstore_report::shown::{self, Shown};
use rrstore_store::{find_sources_skipped, ImportOptions, ImportReport};

use super::storeutil::{self, bytes, ratio};
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// LLVM recording directories or descriptors, and .rra archives.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Free-form label (program, run) stored with each recording.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub label: String,
    /// Print the per-recording results and the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print only errors, warnings and the final summary line: no progress
    /// bar and no line per recording.
    #[arg(long, short = 'q', conflicts_with = "json")]
    pub quiet: bool,
    /// Stop at the first recording that fails (the ones before it stay
    /// imported) instead of going on with the rest.
    #[arg(long)]
    pub fail_fast: bool,
    /// Read part files that are symbolic links leading outside their
    /// recording's directory (refused by default: the target would be stored
    /// and shared).
    #[arg(long)]
    pub follow_symlinks: bool,
}

/// How [`import_paths_with`] treats failures and links.
#[derive(Clone, Copy, Default)]
pub struct RunOptions {
    pub fail_fast: bool,
    pub follow_symlinks: bool,
    /// Print each failure as it happens (off when the caller returns it).
    pub print_failures: bool,
}

/// A recording that could not be imported.
#[derive(serde::Serialize)]
pub struct Failure {
    pub path: PathBuf,
    pub error: String,
    pub exit_code: u8,
    #[serde(skip)]
    pub cause: Option<anyhow::Error>,
}

/// A descriptor passed over because it is not a complete recording.
#[derive(serde::Serialize)]
pub struct SkippedFile {
    pub path: PathBuf,
    pub reason: String,
}

/// Totals over an import run.
#[derive(Default, serde::Serialize)]
pub struct Summary {
    pub imported: u64,
    pub present: u64,
    pub bytes_read: u64,
    pub bytes_new: u64,
    pub bytes_stored: u64,
    pub recordings: Vec<ImportReport>,
    pub failed: Vec<Failure>,
    pub skipped: Vec<SkippedFile>,
}

impl Summary {
    pub fn add(&mut self, r: ImportReport) {
        if r.present {
            self.present += 1;
        } else {
            self.imported += 1;
        }
        self.bytes_read += r.logical_bytes;
        self.bytes_new += r.new_bytes;
        self.bytes_stored += r.stored_bytes;
        self.recordings.push(r);
    }

    pub fn print(&self) {
        let failed = match self.failed.len() {
            0 => String::new(),
            n => format!(", failed {n}"),
        };
        println!(
            "imported {} recording(s), {} already present{failed}; read {}, newly stored {} ({} before compression); dedup {}, compression {}",
            self.imported,
            self.present,
            bytes(self.bytes_read),
            bytes(self.bytes_stored),
            bytes(self.bytes_new),
            ratio(self.bytes_read, self.bytes_new),
            ratio(self.bytes_new, self.bytes_stored),
        );
    }
}

/// Import `paths` into the store, stopping at the first failure, which is
/// returned as the error; used by `record`.
/// `environment`: the launch environment stored with each recording.
pub fn import_paths(
    globals: &Globals,
    paths: &[PathBuf],
    label: &str,
    quiet: bool,
    environment: Vec<(String, String)>,
) -> anyhow::Result<Summary> {
    let run = RunOptions {
        fail_fast: true,
        follow_symlinks: false,
        print_failures: false,
    };
    let opts = ImportOptions {
        label: label.to_string(),
        source: String::new(),
        environment: Some(environment),
    };
    let mut summary = import_with(globals, paths, &opts, quiet, run)?;
    match summary.failed.pop().and_then(|f| f.cause) {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// Import `paths` into the store: every recording is tried (unless
/// `run.fail_fast`), failures are printed as they happen and kept in the
/// summary; partial recordings found are printed as skipped.
pub fn import_paths_with(
    globals: &Globals,
    paths: &[PathBuf],
    label: &str,
    quiet: bool,
    run: RunOptions,
) -> anyhow::Result<Summary> {
    let opts = ImportOptions {
        label: label.to_string(),
        ..ImportOptions::default()
    };
    import_with(globals, paths, &opts, quiet, run)
}

fn import_with(
    globals: &Globals,
    paths: &[PathBuf],
    opts: &ImportOptions,
    quiet: bool,
    run: RunOptions,
) -> anyhow::Result<Summary> {
    let (sources, skipped) = find_sources_skipped(paths)?;
    let mut summary = Summary::default();
    for s in skipped {
        eprintln!(
            "warning: skipped {}: {}",
            Shown(s.path.to_string_lossy()),
            Shown(&s.reason)
        );
        summary.skipped.push(SkippedFile {
            path: s.path,
            reason: s.reason,
        });
    }
    let mut store = storeutil::open_or_create(globals)?;
    let total: u64 = sources
        .iter()
        .map(|s| std::fs::metadata(s.path()).map(|m| m.len()).unwrap_or(0))
        .sum();
    let bar = super::storeutil::bytes_bar(quiet, total.max(1));
    let start = std::time::Instant::now();
    let mut seen_total = 0u64;
    for (n, src) in sources.iter().enumerate() {
        let rate = n as f64 / start.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!("{n}/{} recordings ({rate:.1}/s)", sources.len()));
        let imported = store
            .import_source_links(src, opts, run.follow_symlinks, &mut |b| {
                seen_total += b;
                if seen_total > bar.length().unwrap_or(0) {
                    bar.set_length(seen_total);
                }
                bar.inc(b);
            })
            .map_err(|e| import_context(e, src.path()));
        match imported {
            Ok((report, warnings)) => {
                for w in warnings {
                    bar.suspend(|| {
                        eprintln!(
                            "warning: {}: {}",
                            Shown(src.path().to_string_lossy()),
                            Shown(w.to_string())
                        )
                    });
                }
                summary.add(report);
            }
            Err(e) => {
                if run.print_failures {
                    bar.suspend(|| eprint!("{}", shown::lines(&format!("{e:#}"), "error: ", "  ")));
                }
                summary.failed.push(Failure {
                    path: src.path().to_path_buf(),
                    error: format!("{e:#}"),
                    exit_code: crate::exit::code_for(&e),
                    cause: Some(e),
                });
                if run.fail_fast {
                    break;
                }
            }
        }
    }
    bar.finish_and_clear();
    // The recovery metadata of every imported recording becomes durable
    // here, in one sync (spec/STORE.md, "Recovery metadata").
    store
        .sync_meta()
        .context("cannot make the store's recovery metadata durable")?;
    Ok(summary)
}

/// The error of importing `path`, with the flag that overrides a refused link.
fn import_context(e: rrstore_store::StoreError, path: &std::path::Path) -> anyhow::Error {
    let link = matches!(
        &e,
        rrstore_store::StoreError::Format(FormatError::LinkOutside { .. })
    );
    let hint = if link {
        " (give --follow-symlinks to read linked part files anyway)"
    } else {
        ""
    };
    anyhow::Error::new(e).context(format!("cannot import {}{hint}", path.display()))
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let run = RunOptions {
        fail_fast: args.fail_fast,
        follow_symlinks: args.follow_symlinks,
        print_failures: true,
    };
    let started = std::time::Instant::now();
    let summary = import_paths_with(
        globals,
        &args.paths,
        &args.label,
        args.json || args.quiet,
        run,
    )?;
    if crate::flags::env::import_stages() {
        // Bench instrumentation (docs/store.md): where the time went.
        eprint!(
            "import wall {:.4} s\n{}",
            started.elapsed().as_secs_f64(),
            rrstore_format::stages::report()
        );
    }
    let code = match summary.failed.first() {
        Some(f) => ExitCode::from(f.exit_code),
        None => ExitCode::SUCCESS,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(code);
    }
    for r in summary.recordings.iter().filter(|_| !args.quiet) {
        let state = match (r.present, r.healed_chunks) {
            (true, 0) => "present ",
            (true, _) => "healed  ",
            (false, _) => "imported",
        };
        println!("{state} {} {}", &r.id[..12], Shown(&r.kernel));
    }
    summary.print();
    Ok(code)
}
