//! `rrstore history [ID|NAME:[ID]] [--since DATE] [--limit N] [--kernel
//! GLOB] [--label GLOB] [--json] [--changes]`: the replay history rows of
//! the store, oldest first, with the machine each ran on; ID is a hex
//! prefix of a recording ID, or a `.json`/`.rra` file whose recording ID
//! is computed. `NAME:` reads remote NAME's shared history instead
//! (spec/REMOTE.md, "Shared history"), without pulling anything.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_format::id::hex;
use rrstore_replay::ReplaySource;
use rrstore_report::shown::{self, Shown};
use rrstore_store::{HistoryEntry, HistoryFilter, Store};

use super::storeutil::utc;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Recording ID prefix, or a .json/.rra recording (all rows when
    /// absent); `NAME:` or `NAME:ID`: the shared history of remote NAME.
    pub recording: Option<String>,
    /// Print a JSON array of rows.
    #[arg(long)]
    pub json: bool,
    /// Only recordings whose output differs between completed replays,
    /// grouped by output, with the launches (team/thread counts, overrides
    /// such as OMP_NUM_THREADS), images, backends, devices and machines
    /// involved (of a remote's shared history with `NAME:`).
    #[arg(long)]
    pub changes: bool,
    /// Only replays started since: YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] (UTC),
    /// or an age (12h, 7d).
    #[arg(long, value_name = "DATE", conflicts_with = "changes")]
    pub since: Option<String>,
    /// Only the N most recent of the rows chosen (still oldest first).
    #[arg(long, value_name = "N", conflicts_with = "changes")]
    pub limit: Option<u64>,
    /// Only replays of recordings whose kernel name matches this shell glob.
    #[arg(long, value_name = "GLOB", conflicts_with = "changes")]
    pub kernel: Option<String>,
    /// Only replays of recordings whose label matches this shell glob.
    #[arg(long, value_name = "GLOB", conflicts_with = "changes")]
    pub label: Option<String>,
}

fn filter_prefix(spec: &str) -> anyhow::Result<String> {
    let p = Path::new(spec);
    if p.is_file() {
        // Only the recording's ID is taken from the files (nothing is
        // replayed or stored), so linked part files are read.
        let src = ReplaySource::open(spec, true, unreachable_store)
            .map_err(crate::errors::replay_error)
            .with_context(|| format!("cannot open recording `{spec}`"))?;
        return Ok(src.id.to_hex());
    }
    if spec.is_empty() || !spec.bytes().all(|b| b.is_ascii_hexdigit()) {
        anyhow::bail!("`{spec}` is neither a recording file nor a hexadecimal ID prefix");
    }
    Ok(spec.to_ascii_lowercase())
}

fn unreachable_store() -> Result<Store, rrstore_replay::ReplayError> {
    Err(rrstore_replay::ReplayError::BadSpec(
        "(no store lookup for a file)".into(),
    ))
}

/// Kernel time (fastest repetition, and the count) and wall time; `-` for
/// what a failed replay did not measure.
fn times(e: &HistoryEntry) -> (String, String) {
    let kernel = match e.kernel_ns.iter().min() {
        None => "-".to_string(),
        Some(k) if e.kernel_ns.len() > 1 => {
            format!("{:.3}ms x{}", *k as f64 / 1e6, e.kernel_ns.len())
        }
        Some(k) => format!("{:.3}ms", *k as f64 / 1e6),
    };
    let wall = if e.wall_ns == 0 || (e.kernel_ns.is_empty() && e.verdict == "error") {
        "-".to_string()
    } else {
        format!("{:.1}ms", e.wall_ns as f64 / 1e6)
    };
    (kernel, wall)
}

fn text_row(e: &HistoryEntry) -> String {
    let (kernel, wall) = times(e);
    // Relocated replays say so (`relocated 0xADDR`); recorded ones, the
    // usual case, keep the line as it was.
    let placement = match e.placement.split(' ').take(2).collect::<Vec<_>>()[..] {
        ["relocated", addr] => format!("  relocated {}", Shown(addr)),
        _ => String::new(),
    };
    let row = format!(
        "{:<5} {}  {}  {:<12} {:<7} {:<16} {:>14} {:>11}  {:<12}  {}",
        e.id,
        utc(e.started_at),
        &e.recording.to_hex()[..12],
        // A remote's history is written by others: every text escaped.
        Shown(if e.machine.is_empty() {
            "-"
        } else {
            &e.machine
        }),
        Shown(if e.backend.is_empty() {
            "-"
        } else {
            &e.backend
        }),
        Shown(&e.verdict),
        kernel,
        wall,
        e.output_blake3
            .map(|h| hex(&h)[..12].to_string())
            .unwrap_or_else(|| "-".into()),
        Shown(e.launch_text()),
    );
    // An image compiled from IR: a second, indented line says from what,
    // by which compiler and flags (the row's own record of it).
    let compiled = match &e.compiled {
        Some(c) => format!("\n      compiled {}", Shown(c.summary())),
        None => String::new(),
    };
    row + &placement + &compiled
}

/// `NAME:` or `NAME:ID` (a remote's history), unless `spec` is a file.
fn remote_spec(spec: &str) -> Option<(&str, &str)> {
    if Path::new(spec).is_file() {
        return None;
    }
    spec.split_once(':')
}

/// The rows of remote `name`'s shared history; damaged batches are named
/// on stderr and left out.
fn remote_rows(store: &Store, name: &str) -> anyhow::Result<Vec<HistoryEntry>> {
    let remote = super::remote::open(store, name, false)?;
    let (rows, bad) = rrstore_store::remote::history::rows(store.dir(), &remote)
        .map_err(super::remote::lift)
        .with_context(|| format!("cannot read the history of remote `{name}`"))?;
    for b in &bad {
        eprintln!(
            "warning: history batch {} left out: {}",
            Shown(&b.key),
            Shown(&b.reason)
        );
    }
    Ok(rows)
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = Store::open_default(globals.store.as_deref(), &globals.store_settings)
        .context("opening the store")?;
    let remote = args.recording.as_deref().and_then(remote_spec);
    if args.changes {
        let rows = match (remote, &args.recording) {
            (Some((name, "")), _) => Some(remote_rows(&store, name)?),
            (None, None) => None,
            _ => {
                return Err(crate::exit::UsageError(
                    "--changes takes no recording: it looks at every recording (of a remote's history with `NAME:`)".into(),
                )
                .into())
            }
        };
        return super::changes::run(&store, rows, args.json);
    }
    let (all, prefix) = match remote {
        Some((name, id)) => {
            let p = (!id.is_empty()).then(|| filter_prefix(id)).transpose()?;
            (remote_rows(&store, name)?, p)
        }
        None => (
            store.history(None).context("reading the replay history")?,
            args.recording.as_deref().map(filter_prefix).transpose()?,
        ),
    };
    let filter = HistoryFilter {
        kernel: args.kernel,
        label: args.label,
        since: match &args.since {
            Some(s) => Some(
                super::storeutil::parse_since(s, rrstore_store::now_unix())
                    .map_err(crate::exit::UsageError)?,
            ),
            None => None,
        },
        limit: args.limit,
    };
    let rows: Vec<HistoryEntry> = all
        .into_iter()
        .filter(|e| {
            prefix
                .as_ref()
                .is_none_or(|p| e.recording.to_hex().starts_with(p))
        })
        .collect();
    let rows = store
        .history_query(rows, &filter)
        .context("choosing replay history rows")?;
    if let (Some(spec), Some(p), true, None) = (&args.recording, &prefix, rows.is_empty(), remote) {
        // No row: fine for a recording that exists but never ran; an ID
        // that names nothing is a typo (exit 3, like every other command).
        if !Path::new(spec).is_file() {
            use rrstore_store::StoreError as S;
            match store.resolve(p) {
                Ok(_) | Err(S::Ambiguous { .. }) => {}
                Err(S::NotFound(_) | S::BadPrefix(_)) => {
                    return Err(crate::exit::NotFoundError(format!(
                        "no stored recording and no replay history row matches `{spec}`; `rrstore ls` lists the stored recordings"
                    ))
                    .into())
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    // Written through a checked handle: a closed pipe (`| head`) is an
    // error that `main` turns into a quiet exit, not a panic.
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        writeln!(
            out,
            "no replays recorded{}",
            match &prefix {
                Some(p) => format!(" for {p}"),
                None => String::new(),
            }
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:<5} {:<19}  {:<12}  {:<12} {:<7} {:<16} {:>14} {:>11}  {:<12}  launch",
        "row",
        "started (UTC)",
        "recording",
        "machine",
        "backend",
        "verdict",
        "kernel",
        "wall",
        "output"
    )?;
    for e in &rows {
        writeln!(out, "{}", text_row(e))?;
        if !e.detail.is_empty() && e.verdict != "verified" {
            let head: Vec<&str> = e.detail.lines().take(3).collect();
            write!(
                out,
                "{}",
                shown::lines(&head.join("\n"), "      ", "      ")
            )?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
