//! `rrstore gc`: remove chunks no recording references, rewrite mostly-dead
//! packs; safe while other processes import.

use std::process::ExitCode;

use super::storeutil::{self, bytes};
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Print what was removed and the pack bytes before and after as JSON (docs/json.md).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut store = storeutil::open(globals)?;
    let r = store.gc()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "removed {} chunk(s) of {} part(s); deleted {} pack(s), rewrote {}, {} orphan(s){}; packs {} -> {}",
            r.chunks_removed,
            r.parts_removed,
            r.packs_deleted,
            r.packs_rewritten,
            r.orphans_deleted,
            if r.packs_busy > 0 {
                format!(", {} busy pack(s) left for later", r.packs_busy)
            } else {
                String::new()
            },
            bytes(r.bytes_before),
            bytes(r.bytes_after)
        );
    }
    Ok(ExitCode::SUCCESS)
}
