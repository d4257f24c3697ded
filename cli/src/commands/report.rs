//! `rrstore report [--label GLOB] [--kernel GLOB] [--since DATE] -o FILE`:
//! write the self-contained HTML report (charts of kernel times, output
//! changes, differing arenas, store size by label). Logic:
//! rrstore_report::html.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_report::html::{self, ReportOptions};

use super::storeutil;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Only recordings whose label matches this glob.
    #[arg(long, value_name = "GLOB")]
    pub label: Option<String>,
    /// Only recordings whose kernel name matches this glob.
    #[arg(long, value_name = "GLOB")]
    pub kernel: Option<String>,
    /// Only replays and imports since: YYYY-MM-DD[THH:MM[:SS]] (UTC), or an age (12h, 30d).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let now = rrstore_store::now_unix();
    let since = match &args.since {
        Some(s) => {
            Some(storeutil::parse_since(s, now).map_err(rrstore_store::StoreError::Invalid)?)
        }
        None => None,
    };
    let mut store = storeutil::open(globals)?;
    let opts = ReportOptions {
        label: args.label,
        kernel: args.kernel,
        since,
        now,
    };
    let s = html::write(&mut store, &opts, &args.output)
        .map_err(crate::errors::report_error)
        .with_context(|| format!("writing the report to {}", args.output.display()))?;
    println!(
        "wrote {} ({}): {} recording(s), {} kernel(s), {} replay(s), {} chart(s), {} arena map(s), {} label(s)",
        args.output.display(),
        storeutil::bytes(s.bytes as u64),
        s.recordings,
        s.kernels,
        s.replays,
        s.charts,
        s.arena_maps,
        s.labels
    );
    Ok(ExitCode::SUCCESS)
}
