//! `rrstore export ID -o DIR|X.rra`: write a stored recording back as LLVM
//! files (byte-identical to what was imported) or as a `.rra` archive.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_format::archive;
use rrstore_format::llvm::{self, Layout};

use super::storeutil;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Recording ID or unique prefix (4+ hex digits).
    pub id: String,
    /// Output directory for LLVM files, or a path ending in .rra.
    #[arg(short = 'o', long = "output", value_name = "DIR|X.rra")]
    pub output: PathBuf,
    /// File layout for LLVM files (default: the one it was recorded in).
    #[arg(long, value_name = "kernel-named|native")]
    pub layout: Option<Layout>,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = storeutil::open(globals)?;
    let id = store.resolve(&args.id)?;
    let mut src = store.part_source(&id)?;
    let rec = src.recording().clone();
    if args
        .output
        .extension()
        .is_some_and(|e| e == archive::EXTENSION)
    {
        if args.layout.is_some() {
            anyhow::bail!("--layout applies to LLVM files, not to a .rra archive");
        }
        archive::write_path(
            &rec,
            &mut src,
            &args.output,
            &archive::WriteOptions::default(),
        )
        .with_context(|| format!("cannot export {} to {}", id, args.output.display()))?;
        println!("{}", args.output.display());
    } else {
        let files = llvm::export(&rec, &mut src, &args.output, args.layout)
            .with_context(|| format!("cannot export {} to {}", id, args.output.display()))?;
        for f in files {
            println!("{}", f.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
