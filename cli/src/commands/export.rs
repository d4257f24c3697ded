//! `rrstore export ID... -o DIR|X.rra`: write stored recordings back as LLVM
//! files (byte-identical to what was imported) or one as a `.rra` archive.
//! Several IDs go into one subdirectory each, named by the short ID, so a
//! whole run is rehydrated by one process. The files of all the recordings
//! appear together once every one is written, or none does; existing files
//! are kept unless `--force`.

use std::path::PathBuf;
use std::process::ExitCode;

use rrstore_format::archive;
use rrstore_format::llvm::{self, Layout};
use rrstore_format::output::{self, Staging};
use rrstore_format::FormatError;

use super::storeutil;
use crate::exit::UsageError;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Recording IDs or unique prefixes (4+ hex digits).
    #[arg(required = true, num_args = 1..)]
    pub ids: Vec<String>,
    /// Output directory for LLVM files (with several IDs: one subdirectory
    /// per recording, named by its short ID), or a path ending in .rra.
    #[arg(short = 'o', long = "output", value_name = "DIR|X.rra")]
    pub output: PathBuf,
    /// File layout for LLVM files (default: the one it was recorded in).
    #[arg(long, value_name = "kernel-named|native")]
    pub layout: Option<Layout>,
    /// Replace files that exist at the output names (a symbolic link there
    /// is replaced itself, never written through).
    #[arg(long)]
    pub force: bool,
}

/// `what` as the context of an output error, with the hint for the
/// refusals `--force` overrides.
pub fn output_context(e: FormatError, what: String) -> anyhow::Error {
    let hint = match e {
        FormatError::Exists { .. } => " (give --force to replace existing files)",
        FormatError::Symlink { .. } => {
            " (give --force to replace the link itself; it is never written through)"
        }
        _ => "",
    };
    anyhow::Error::new(e).context(format!("{what}{hint}"))
}

/// Say which temporary files of killed runs the output removed (on stderr:
/// stdout lists what was written).
pub fn report_stale(removed: &[std::path::PathBuf]) {
    if removed.is_empty() {
        return;
    }
    eprintln!(
        "removed {} stale temporary file(s) left by interrupted rrstore runs (their processes are gone):",
        removed.len()
    );
    for p in removed {
        eprintln!("  {}", rrstore_report::shown::Shown(p.to_string_lossy()));
    }
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = storeutil::open(globals)?;
    let ids = args
        .ids
        .iter()
        .map(|p| store.resolve(p))
        .collect::<Result<Vec<_>, _>>()?;
    let to_archive = args
        .output
        .extension()
        .is_some_and(|e| e == archive::EXTENSION);
    if to_archive && ids.len() > 1 {
        return Err(UsageError(format!(
            "a .rra archive holds one recording: export the {} recordings to a directory, or one at a time to .rra files",
            ids.len()
        ))
        .into());
    }
    if to_archive && args.layout.is_some() {
        return Err(UsageError(
            "--layout applies to LLVM files, not to a .rra archive: drop it or export to a directory".into(),
        )
        .into());
    }
    if to_archive {
        let id = &ids[0];
        let mut src = store.part_source(id)?;
        let rec = src.recording().clone();
        let (_, stale) = output::write_one(&args.output, args.force, |w| {
            archive::write(&rec, &mut src, w, &archive::WriteOptions::default())
        })
        .map_err(|e| {
            output_context(
                e,
                format!("cannot export {} to {}", id, args.output.display()),
            )
        })?;
        report_stale(&stale);
        println!("{}", args.output.display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut staging = Staging::new(args.force);
    for id in &ids {
        let mut src = store.part_source(id)?;
        let rec = src.recording().clone();
        let dir = if ids.len() > 1 {
            args.output.join(id.short())
        } else {
            args.output.clone()
        };
        llvm::export_into(&mut staging, &rec, &mut src, &dir, args.layout)
            .map_err(|e| output_context(e, format!("cannot export {} to {}", id, dir.display())))?;
    }
    let stale = staging.stale_removed().to_vec();
    let files = staging
        .commit()
        .map_err(|e| output_context(e, format!("cannot export to {}", args.output.display())))?;
    report_stale(&stale);
    for f in files {
        // Named after the recording's kernel: escaped.
        println!("{}", rrstore_report::shown::Shown(f.to_string_lossy()));
    }
    Ok(ExitCode::SUCCESS)
}
