//! `rrstore verify NAME: [--read-data]`: check a remote's structure (and
//! with `--read-data` every byte) without pulling it.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::Store;

use super::remote::{lift, open, progress_bar};
use super::storeutil::bytes;

/// The remote name of `verify NAME:` (one argument ending in a colon).
pub fn remote_spec(ids: &[String]) -> Option<&str> {
    match ids {
        [one] => one.strip_suffix(':'),
        _ => None,
    }
}

pub fn run(store: &Store, name: &str, read_data: bool, json: bool) -> anyhow::Result<ExitCode> {
    let r = open(store, name, false)?;
    let (bar, mut progress) = progress_bar(json);
    let report = rrstore_store::remote::check::check(store.dir(), &r, read_data, &mut progress)
        .map_err(lift)
        .with_context(|| format!("cannot verify remote `{name}`"));
    bar.finish_and_clear();
    let report = report?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for p in &report.problems {
            eprintln!(
                "corrupt: remote `{name}`: {}",
                rrstore_report::shown::Shown(p.to_string())
            );
        }
        println!(
            "remote {name} (layout {}): {} recording(s), {} image(s), {} part(s), {} chunk(s), {} pack(s){}{} checked: {}",
            report.layout,
            report.recordings,
            report.images,
            report.parts,
            report.chunks,
            report.packs,
            if report.unindexed_packs > 0 {
                format!(
                    " ({} unindexed, left by interrupted pushes)",
                    report.unindexed_packs
                )
            } else {
                String::new()
            },
            if read_data {
                format!(", {} read", bytes(report.bytes_read))
            } else {
                String::new()
            },
            super::verify::status_words(report.ok(), report.problems.len())
        );
    }
    Ok(super::verify::exit_code(report.ok()))
}
