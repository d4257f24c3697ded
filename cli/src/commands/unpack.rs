//! `rrstore unpack`: a `.rra` archive back into LLVM recording files, in the
//! layout it was packed from or converted to another. All files appear
//! together or none does; existing files are kept unless `--force`.

use rrstore_report::shown::Shown;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_format::archive::Reader;
use rrstore_format::llvm::{self, Layout};
use rrstore_format::output::Staging;

use super::export::output_context;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// The archive.
    #[arg(value_name = "X.rra")]
    pub archive: PathBuf,
    /// Directory to write the recording's files into (created if needed).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// File layout: `kernel-named` (LLVM 16-22) or `native` (LLVM 23+).
    /// Default: the layout the recording was packed from, byte for byte.
    #[arg(long, value_name = "LAYOUT")]
    pub layout: Option<Layout>,
    /// Replace files that exist at the output names (a symbolic link there
    /// is replaced itself, never written through).
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args, _globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut reader = Reader::open(&args.archive)
        .with_context(|| format!("cannot open the archive {}", args.archive.display()))?;
    let rec = reader.recording().clone();
    let what = || {
        format!(
            "cannot unpack {} into {}",
            args.archive.display(),
            args.output.display()
        )
    };
    let mut staging = Staging::new(args.force);
    llvm::export_into(&mut staging, &rec, &mut reader, &args.output, args.layout)
        .map_err(|e| output_context(e, what()))?;
    let stale = staging.stale_removed().to_vec();
    let written = staging.commit().map_err(|e| output_context(e, what()))?;
    super::export::report_stale(&stale);
    println!("{}  {}", reader.id(), Shown(&rec.kernel));
    for p in written {
        println!("  {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
