//! `rrstore export ID... -o DIR|X.rra`: write stored recordings back as LLVM
//! files (byte-identical to what was imported) or one as a `.rra` archive.
//! Several IDs go into one subdirectory each, named by the short ID, so a
//! whole run is rehydrated by one process.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_format::archive;
use rrstore_format::llvm::{self, Layout};

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
    for id in &ids {
        let mut src = store.part_source(id)?;
        let rec = src.recording().clone();
        if to_archive {
            if args.layout.is_some() {
                return Err(UsageError(
                    "--layout applies to LLVM files, not to a .rra archive: drop it or export to a directory".into(),
                )
                .into());
            }
            archive::write_path(
                &rec,
                &mut src,
                &args.output,
                &archive::WriteOptions::default(),
            )
            .with_context(|| format!("cannot export {} to {}", id, args.output.display()))?;
            println!("{}", args.output.display());
            continue;
        }
        let dir = if ids.len() > 1 {
            args.output.join(id.short())
        } else {
            args.output.clone()
        };
        let files = llvm::export(&rec, &mut src, &dir, args.layout)
            .with_context(|| format!("cannot export {} to {}", id, dir.display()))?;
        for f in files {
            println!("{}", f.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
