//! `rrstore repair`: rebuild the store's index from its pack files and its
//! recovery metadata (after the index was lost, emptied or damaged), and
//! report what was recovered and what was not.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::{layout, Store};

use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let dir = layout::resolve_dir(
        globals.store.as_deref(),
        globals.store_settings.dir.as_deref(),
    )
    .context("no store directory: set RRSTORE_DIR or HOME, or pass --store DIR")?;
    let r = Store::repair(&dir).with_context(|| format!("cannot repair {}", dir.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    for p in &r.moved_aside {
        println!("moved the old index aside to {}", p.display());
    }
    for p in &r.pack_problems {
        eprintln!("warning: {p}");
    }
    for l in &r.lost {
        eprintln!(
            "not recovered: recording {} ({}): {}; its metadata is kept in {}",
            &l.id[..l.id.len().min(12)],
            l.kernel,
            l.reason,
            l.metadata.display()
        );
    }
    println!(
        "repaired: {} recording(s) restored with their labels and tags, {} not recovered; {} pack(s), {} chunk(s) indexed, {} damaged chunk(s) skipped",
        r.recordings,
        r.lost.len(),
        r.packs,
        r.chunks,
        r.bad_chunks
    );
    println!("not recoverable from the packs: replay history, stored images (`rrstore image add` them again) and kept replay outputs");
    Ok(ExitCode::SUCCESS)
}
