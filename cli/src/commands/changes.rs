//! `rrstore history --changes [--json]`: recordings whose completed replays
//! produced more than one output, each output with its runs, launches
//! (team/thread counts and overrides), images (hash and label), backends
//! devices and machines, and which of those differ between the outputs.
//! Logic: rrstore_store::changes.

use rrstore_report::shown::Shown;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::changes::OutputGroup;
use rrstore_store::{HistoryEntry, Store};

use super::storeutil::utc;

const HEAD: [&str; 5] = [
    "output",
    "verdicts",
    "rows",
    "first .. last (UTC)",
    "launch",
];

fn cells(g: &OutputGroup) -> [String; 5] {
    [
        g.output[..12.min(g.output.len())].to_string(),
        if g.recorded {
            format!("{} =recorded", g.verdicts.join(","))
        } else {
            g.verdicts.join(",")
        },
        g.rows
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(","),
        format!("{} .. {}", utc(g.first_at), utc(g.last_at)),
        g.launches.join(" | "),
    ]
}

fn rows_text(rows: &[i64]) -> String {
    rows.iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// `rows`: a remote's history (`history NAME: --changes`), else the
/// store's.
pub fn run(store: &Store, rows: Option<Vec<HistoryEntry>>, json: bool) -> anyhow::Result<ExitCode> {
    let changes = match rows {
        Some(rows) => store.history_changes_of(rows),
        None => store.history_changes(),
    }
    .context("reading the replay history")?;
    if json {
        println!("{}", serde_json::to_string_pretty(&changes)?);
        return Ok(ExitCode::SUCCESS);
    }
    if changes.is_empty() {
        println!("no recording changed its output between completed replays");
        return Ok(ExitCode::SUCCESS);
    }
    for c in &changes {
        println!(
            "{} {}{}: {} different outputs{}{}",
            &c.recording[..12],
            rrstore_report::names::display(&c.kernel),
            if c.label.is_empty() {
                String::new()
            } else {
                format!(" [{}]", Shown(&c.label))
            },
            c.outputs.len(),
            if c.failed_rows.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} failed replay(s) not counted: rows {})",
                    c.failed_rows.len(),
                    rows_text(&c.failed_rows)
                )
            },
            if c.differs.is_empty() {
                String::new()
            } else {
                format!("; the runs differ in {}", c.differs.join(", "))
            }
        );
        let rows: Vec<[String; 5]> = c.outputs.iter().map(cells).collect();
        let mut w = HEAD.map(str::len);
        for r in &rows {
            for (i, x) in r.iter().enumerate() {
                w[i] = w[i].max(x.len());
            }
        }
        let line = |c: [&str; 5]| {
            let mut s = String::from(" ");
            for (i, x) in c.iter().enumerate() {
                s += &format!(" {:<width$} ", x, width = w[i]);
            }
            println!("{}", s.trim_end());
        };
        line(HEAD);
        for (r, g) in rows.iter().zip(&c.outputs) {
            line(r.each_ref().map(String::as_str));
            let images: Vec<String> = g
                .images
                .iter()
                .map(|(h, l)| {
                    if l.is_empty() {
                        h[..12].to_string()
                    } else {
                        format!("{} ({l})", &h[..12])
                    }
                })
                .collect();
            // Labels, devices and machines may come from others' history.
            println!(
                "      images {}; backends {}; devices {}; machines {}",
                Shown(images.join(", ")),
                Shown(g.backends.join(", ")),
                Shown(g.devices.join(" | ")),
                Shown(g.machines.join(", "))
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
