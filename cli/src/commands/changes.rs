//! `rrstore history --changes [--json]`: recordings whose replays produced
//! more than one output, each output with its runs, images (hash and
//! label), backends and devices. Logic: rrstore_store::changes.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::Store;

use super::storeutil::utc;

pub fn run(store: &Store, json: bool) -> anyhow::Result<ExitCode> {
    let changes = store
        .history_changes()
        .context("reading the replay history")?;
    if json {
        println!("{}", serde_json::to_string_pretty(&changes)?);
        return Ok(ExitCode::SUCCESS);
    }
    if changes.is_empty() {
        println!("no recording changed its output between replays");
        return Ok(ExitCode::SUCCESS);
    }
    for c in &changes {
        println!(
            "{} {} {}: {} different outputs",
            &c.recording[..12],
            c.kernel,
            if c.label.is_empty() {
                String::new()
            } else {
                format!("[{}]", c.label)
            },
            c.outputs.len()
        );
        for g in &c.outputs {
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
            println!(
                "  output {:<14} {:<18} rows {:<14} {} .. {}",
                g.output.as_deref().map(|h| &h[..12]).unwrap_or("none"),
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
                utc(g.first_at),
                utc(g.last_at)
            );
            println!("      images {}", images.join(", "));
            println!(
                "      backends {}; devices {}",
                g.backends.join(", "),
                g.devices.join(" | ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
