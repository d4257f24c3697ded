//! `rrstore check --run NAME --results DEST` (write this shard's report)
//! and `rrstore check --collect DEST --run NAME` (gather every shard's
//! into one table and one exit status: 1 when a recording regressed, else
//! 3 when a shard has not reported). Logic: rrstore_replay::fleet::collect.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_replay::fleet::collect::{collect, Place, ShardResults};
use rrstore_replay::fleet::shard::Shard;
use rrstore_replay::regress::check::CheckReport;
use rrstore_report::shown::shown;
use rrstore_store::Store;

/// Write `report` as shard `shard` (None: the only one) of run `name`.
pub fn write(
    place: &Place,
    name: &str,
    shard: Option<Shard>,
    report: &CheckReport,
) -> anyhow::Result<()> {
    let shard = shard.unwrap_or(Shard { index: 0, count: 1 });
    let r = ShardResults {
        run: name.to_string(),
        shard: shard.into(),
        host: rrstore_format::output::host_name(),
        finished_at: rrstore_report::time::now_unix(),
        report: serde_json::to_value(report)?,
    };
    let at = place.write(&r).with_context(|| {
        format!(
            "cannot write the results of shard {shard} to {}",
            place.describe()
        )
    })?;
    eprintln!("shard {shard} of run {name}: results written to {at}");
    Ok(())
}

pub fn run(store: &Store, dest: &str, name: &str, json: bool) -> anyhow::Result<ExitCode> {
    let d = super::fleet::dest(store, dest)?;
    let place = super::fleet::open(store, d, false)?;
    let files = place
        .read_all(name)
        .with_context(|| format!("cannot read the results of run {name}"))?;
    let c = collect(name, files, &place.describe()).with_context(|| {
        format!("collecting run {name}: each shard writes its results with `rrstore check --run {name} --results {dest}`")
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        let s = |v: &serde_json::Value, k: &str| {
            v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string()
        };
        let rows: Vec<[String; 4]> = c
            .rows
            .iter()
            .map(|r| {
                // Shards' results come from a remote: every text escaped.
                let verdict = r.get("run").map(|x| s(x, "verdict")).unwrap_or_default();
                let verdict = shown(&verdict).into_owned();
                let regressed = r.get("regressed").and_then(|x| x.as_bool()) == Some(true);
                let id: String = s(r, "recording").chars().take(12).collect();
                [
                    rrstore_report::names::display(&s(r, "kernel")).into_owned(),
                    shown(&id).into_owned(),
                    match (regressed, r.get("status").and_then(|x| x.as_str())) {
                        (true, _) => format!("REGRESSED ({verdict})"),
                        (false, Some("known")) => {
                            format!("differs from recording (known) ({verdict})")
                        }
                        (false, Some("nondeterministic")) => {
                            "nondeterministic (stable ranges unchanged)".to_string()
                        }
                        _ => verdict,
                    },
                    shown(&s(r, "label")).into_owned(),
                ]
            })
            .collect();
        let head = ["kernel", "recording", "verdict", "label"].map(String::from);
        let mut w = [0usize; 4];
        for r in std::iter::once(&head).chain(&rows) {
            for (i, x) in r.iter().enumerate() {
                w[i] = w[i].max(x.len());
            }
        }
        for r in std::iter::once(&head).chain(&rows) {
            let line: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(i, x)| format!("{:<width$}", x, width = w[i]))
                .collect();
            println!("{}", line.join("  ").trim_end());
        }
        println!(
            "run {name}: {} of {} shard(s) reported{}; {} recording(s), {} regressed, {} slower beyond the noise; {} replay(s) run, {} from the history",
            c.found.len(),
            c.shards,
            if c.missing.is_empty() { String::new() } else { format!(", missing: {}", list(&c.missing)) },
            c.rows.len(),
            c.regressed,
            c.slower,
            c.replays,
            c.cached
        );
    }
    if c.regressed > 0 {
        return Ok(ExitCode::from(crate::exit::MISMATCH));
    }
    if !c.missing.is_empty() {
        return Err(crate::exit::NotFoundError(format!(
            "run {name} is incomplete: shard(s) {} of {} have not written their results to {}; rerun them (or wait for them) and collect again",
            list(&c.missing),
            c.shards,
            place.describe()
        ))
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

fn list(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}
