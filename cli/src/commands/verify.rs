//! `rrstore verify [--full] [ID...]`: index/pack consistency, and with
//! `--full` every chunk re-hashed. Exit code CORRUPT when anything is wrong.

use std::process::ExitCode;

use super::storeutil::{self, bytes};
use crate::exit;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Re-read and re-hash every chunk.
    #[arg(long)]
    pub full: bool,
    /// Recordings to check (default: all).
    pub ids: Vec<String>,
    /// Print the report, every problem included, as JSON (docs/json.md).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = storeutil::open(globals)?;
    let ids = storeutil::resolve_all(&store, &args.ids)?;
    let report = store.verify(&ids, args.full)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for p in &report.problems {
            eprintln!("corrupt: {p}");
        }
        println!(
            "{} recording(s), {} chunk(s){} checked: {}",
            report.recordings,
            report.chunks,
            if args.full {
                format!(" ({} re-hashed)", bytes(report.bytes))
            } else {
                String::new()
            },
            if report.ok() {
                "ok".to_string()
            } else {
                format!("{} problem(s)", report.problems.len())
            }
        );
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::CORRUPT)
    })
}
