//! `rrstore gc [--dry-run] [--max-unused PERCENT] [--json]`: remove chunks
//! no recording references, rewrite packs whose unused share exceeds
//! PERCENT; safe while other processes import. Logic: rrstore_store::gc.

use std::process::ExitCode;

use rrstore_store::gc::{GcOptions, GcReport, DEFAULT_MAX_UNUSED_PERCENT};

use super::storeutil::{self, bytes};
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Print what would be removed, deleted and rewritten; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Rewrite a pack when more than PERCENT of its bytes are unused
    /// (0: any unused byte; 100: only delete packs with nothing live).
    #[arg(long, value_name = "PERCENT", default_value_t = DEFAULT_MAX_UNUSED_PERCENT)]
    pub max_unused: f64,
    /// Print what was removed and the pack bytes before and after as JSON (docs/json.md).
    #[arg(long)]
    pub json: bool,
}

/// Why packs with unused bytes were (or would be) left as they are.
fn kept_text(r: &GcReport) -> String {
    if r.packs_kept_with_unused == 0 {
        return String::new();
    }
    let verb = if r.dry_run { "would keep" } else { "kept" };
    format!(
        "\n{verb} {} pack(s) holding {} unused: the emptiest is {:.1}% unused, and gc rewrites only \
         packs more than {}% unused (--max-unused); `rrstore gc --max-unused 0` rewrites every pack with unused bytes",
        r.packs_kept_with_unused,
        bytes(r.unused_bytes_kept),
        r.max_unused_kept_percent,
        r.max_unused_percent,
    )
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    if !(0.0..=100.0).contains(&args.max_unused) {
        return Err(crate::exit::UsageError(format!(
            "--max-unused must be a percentage from 0 to 100, got {}; nothing was collected",
            args.max_unused
        ))
        .into());
    }
    let mut store = storeutil::open(globals)?;
    let r = store.gc_with(&GcOptions {
        dry_run: args.dry_run,
        max_unused_percent: args.max_unused,
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    let busy = if r.packs_busy > 0 {
        format!(", {} busy pack(s) left for later", r.packs_busy)
    } else {
        String::new()
    };
    if r.dry_run {
        println!(
            "dry run, nothing changed: would remove {} chunk(s) of {} part(s); would delete {} pack(s), rewrite {}, {} orphan(s), {} recovery list(s); packs {} -> about {}{}",
            r.chunks_removed,
            r.parts_removed,
            r.packs_deleted,
            r.packs_rewritten,
            r.orphans_deleted,
            r.part_lists_removed,
            bytes(r.bytes_before),
            bytes(r.bytes_after),
            kept_text(&r)
        );
    } else {
        println!(
            "removed {} chunk(s) of {} part(s); deleted {} pack(s), rewrote {}, {} orphan(s), {} recovery list(s){busy}; packs {} -> {}{}",
            r.chunks_removed,
            r.parts_removed,
            r.packs_deleted,
            r.packs_rewritten,
            r.orphans_deleted,
            r.part_lists_removed,
            bytes(r.bytes_before),
            bytes(r.bytes_after),
            kept_text(&r)
        );
    }
    Ok(ExitCode::SUCCESS)
}
