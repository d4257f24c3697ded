//! `rrstore import PATH...`: LLVM recording directories (recursively, any
//! generation) and `.rra` archives into the store, with a progress bar on a
//! terminal and a summary.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use rrstore_store::{find_sources, ImportOptions, ImportReport};

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
        println!(
            "imported {} recording(s), {} already present; read {}, newly stored {} ({} before compression); dedup {}, compression {}",
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

/// Import `paths` into the store; shared with `record`.
pub fn import_paths(
    globals: &Globals,
    paths: &[PathBuf],
    label: &str,
    quiet: bool,
) -> anyhow::Result<Summary> {
    let sources = find_sources(paths)?;
    let mut store = storeutil::open_or_create(globals)?;
    let total: u64 = sources
        .iter()
        .map(|s| std::fs::metadata(s.path()).map(|m| m.len()).unwrap_or(0))
        .sum();
    let bar = if !quiet && std::io::stderr().is_terminal() {
        let b = ProgressBar::new(total.max(1));
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {bytes_per_sec} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    let opts = ImportOptions {
        label: label.to_string(),
        source: String::new(),
    };
    let mut summary = Summary::default();
    let start = std::time::Instant::now();
    let mut seen_total = 0u64;
    for (n, src) in sources.iter().enumerate() {
        let rate = n as f64 / start.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!("{n}/{} recordings ({rate:.1}/s)", sources.len()));
        let (report, warnings) = store
            .import_source(src, &opts, &mut |b| {
                seen_total += b;
                if seen_total > bar.length().unwrap_or(0) {
                    bar.set_length(seen_total);
                }
                bar.inc(b);
            })
            .with_context(|| format!("cannot import {}", src.path().display()))?;
        for w in warnings {
            bar.suspend(|| eprintln!("warning: {}: {w}", src.path().display()));
        }
        summary.add(report);
    }
    bar.finish_and_clear();
    Ok(summary)
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let summary = import_paths(globals, &args.paths, &args.label, args.json)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(ExitCode::SUCCESS);
    }
    for r in &summary.recordings {
        let state = match (r.present, r.healed_chunks) {
            (true, 0) => "present ",
            (true, _) => "healed  ",
            (false, _) => "imported",
        };
        println!("{state} {} {}", &r.id[..12], r.kernel);
    }
    summary.print();
    Ok(ExitCode::SUCCESS)
}
