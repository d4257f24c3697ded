//! `rrstore stats [--json]`: recordings, logical and stored bytes, ratios.

use std::process::ExitCode;

use super::storeutil::{self, bytes};
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Print the sizes and ratios as JSON (docs/json.md).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = storeutil::open(globals)?;
    let s = store.stats()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("store             {}", store.dir().display());
    println!("recordings        {}", s.recordings);
    println!(
        "logical bytes     {} ({})",
        s.logical_bytes,
        bytes(s.logical_bytes)
    );
    println!(
        "unique bytes      {} ({})",
        s.unique_bytes,
        bytes(s.unique_bytes)
    );
    println!(
        "stored bytes      {} ({})",
        s.chunk_bytes,
        bytes(s.chunk_bytes)
    );
    println!("pack files        {} ({})", s.packs, bytes(s.pack_bytes));
    println!("index             {}", bytes(s.index_bytes));
    println!("chunks            {}", s.chunks);
    println!("parts             {}", s.parts);
    println!("dedup ratio       {:.2}x", s.dedup_ratio);
    println!("compression ratio {:.2}x", s.compression_ratio);
    Ok(ExitCode::SUCCESS)
}
