//! `rrstore pack`: one LLVM recording (its `.json`, or a directory holding
//! exactly one) into a single `.rra` archive, which appears only once
//! complete and never replaces a file unless `--force`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use rrstore_format::archive::{self, WriteOptions, LEVELS};
use rrstore_format::llvm;
use rrstore_format::output;

use super::export::output_context;

use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// The recording: its `.json` descriptor, or a directory holding exactly one recording.
    #[arg(value_name = "RECORDING")]
    pub input: PathBuf,
    /// Archive to write; it appears only once complete.
    #[arg(short, long, value_name = "X.rra")]
    pub output: PathBuf,
    /// Replace the archive if it exists (a symbolic link there is replaced
    /// itself, never written through).
    #[arg(long)]
    pub force: bool,
    /// Read part files that are symbolic links leading outside the
    /// recording's directory (refused by default: the target would be archived).
    #[arg(long)]
    pub follow_symlinks: bool,
    /// zstd level, 1 (fastest) to 19 (smallest). Changes the archive's bytes, never its ID.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(*LEVELS.start() as i64..=*LEVELS.end() as i64))]
    pub level: i32,
    /// Compression threads (default: one per core).
    #[arg(long, value_name = "N", default_value_t = 0, hide_default_value = true)]
    pub threads: usize,
}

/// The one descriptor `input` names.
fn descriptor(input: &Path) -> anyhow::Result<PathBuf> {
    let found = llvm::find_recordings(input)
        .with_context(|| format!("cannot look for a recording in {}", input.display()))?;
    match found.len() {
        1 => Ok(found.into_iter().next().unwrap_or_default()),
        0 => Err(anyhow::Error::new(rrstore_format::FormatError::Invalid {
            path: input.to_path_buf(),
            message: llvm::no_recording_here(),
        })),
        n => {
            let list: Vec<String> = found
                .iter()
                .take(5)
                .map(|p| format!("  {}", p.display()))
                .collect();
            Err(anyhow::Error::new(rrstore_format::FormatError::Invalid {
                path: input.to_path_buf(),
                message: format!(
                    "holds {n} recordings; an archive holds one: name its .json, e.g.\n{}{}\nor use `rrstore import` to store them all",
                    list.join("\n"),
                    if n > 5 { "\n  ..." } else { "" }
                ),
            }))
        }
    }
}

pub fn run(args: Args, _globals: &Globals) -> anyhow::Result<ExitCode> {
    let desc = descriptor(&args.input)?;
    // Parts are hashed by the writer in the one pass it makes over them.
    let mut rec = llvm::load_unhashed_links(&desc, args.follow_symlinks).map_err(|e| {
        let hint = match e {
            rrstore_format::FormatError::LinkOutside { .. } => {
                " (give --follow-symlinks to read linked part files anyway)"
            }
            _ => "",
        };
        anyhow::Error::new(e).context(format!(
            "cannot load the recording {}{hint}",
            desc.display()
        ))
    })?;
    for w in &rec.warnings {
        eprintln!("warning: {w}");
    }
    let opts = WriteOptions {
        level: args.level,
        threads: args.threads,
        ..WriteOptions::default()
    };
    let mut recording = rec.recording.clone();
    if bad_output(&args.output) {
        bail!(
            "{} is a directory: give the archive's file name, e.g. -o {}.rra",
            args.output.display(),
            recording.stem
        );
    }
    let (stats, stale) = output::write_one(&args.output, args.force, |w| {
        archive::write_unhashed(&mut recording, &mut rec, w, &opts)
    })
    .map_err(|e| {
        output_context(
            e,
            format!(
                "cannot pack {} into {}",
                desc.display(),
                args.output.display()
            ),
        )
    })?;
    super::export::report_stale(&stale);
    let ratio = if stats.archive_bytes == 0 {
        0.0
    } else {
        stats.part_bytes as f64 / stats.archive_bytes as f64
    };
    println!(
        "{}  {}  {} -> {} bytes ({ratio:.2}x, {} chunks, {} stored)",
        stats.id,
        args.output.display(),
        stats.part_bytes,
        stats.archive_bytes,
        stats.chunks,
        stats.unique_chunks
    );
    Ok(ExitCode::SUCCESS)
}

fn bad_output(p: &Path) -> bool {
    p.is_dir()
}
