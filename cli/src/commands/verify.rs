//! `rrstore verify [--full] [ID...]`: index/pack consistency, and with
//! `--full` every chunk re-hashed; `rrstore verify NAME: [--read-data]`:
//! a remote (`verify_remote`). Exit code CORRUPT when anything is wrong.

use std::process::ExitCode;

use super::storeutil::{self, bytes};
use crate::exit;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Re-read and re-hash every chunk.
    #[arg(long)]
    pub full: bool,
    /// Recordings to check (default: all), or `NAME:` to check remote NAME.
    pub ids: Vec<String>,
    /// With `NAME:`: read and check every byte on the remote, not only its
    /// structure.
    #[arg(long)]
    pub read_data: bool,
    /// Print the report, every problem included, as JSON (docs/json.md).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = storeutil::open(globals)?;
    if let Some(name) = super::verify_remote::remote_spec(&args.ids) {
        return super::verify_remote::run(&store, name, args.read_data, args.json);
    }
    if args.read_data {
        return Err(crate::exit::UsageError(
            "--read-data checks a remote: give its name with a colon (`rrstore verify NAME: --read-data`); \
             for this store use --full"
                .into(),
        )
        .into());
    }
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
            super::verify::status_words(report.ok(), report.problems.len())
        );
    }
    Ok(super::verify::exit_code(report.ok()))
}

/// The end of a verify summary line: `ok`, or how many problems.
pub(super) fn status_words(ok: bool, problems: usize) -> String {
    if ok {
        "ok".to_string()
    } else {
        format!("{problems} problem(s)")
    }
}

/// A verify's exit status: 0, or exit 5 when anything is damaged.
pub(super) fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::CORRUPT)
    }
}
