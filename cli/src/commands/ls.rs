//! `rrstore ls`: one aligned line per stored recording, filtered and sorted
//! from the index alone.

use std::io::Write;
use std::process::ExitCode;

use rrstore_store::recordings::parse_tag;
use rrstore_store::{LsFilter, LsSort};

use super::storeutil::{self, age, bytes};
use crate::Globals;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Sort {
    Time,
    Size,
    Name,
}

#[derive(clap::Args)]
pub struct Args {
    /// `NAME:` lists what remote NAME holds (from its manifests, no pull).
    #[arg(value_name = "NAME:")]
    pub remote: Option<String>,
    /// Shell glob on the kernel name.
    #[arg(long, value_name = "GLOB")]
    pub kernel: Option<String>,
    /// Image target: sm_90, gfx942, x86_64, ...
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,
    /// Only recordings with this tag (repeatable).
    #[arg(long = "tag", value_name = "K=V")]
    pub tags: Vec<String>,
    /// Shell glob on the label.
    #[arg(long, value_name = "GLOB")]
    pub label: Option<String>,
    /// Imported since: YYYY-MM-DD[THH:MM[:SS]] (UTC) or an age (12h, 7d).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    #[arg(long, value_enum, default_value = "time")]
    pub sort: Sort,
    /// JSON array of recordings.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let now = rrstore_store::now_unix();
    let since = match &args.since {
        Some(s) => {
            Some(storeutil::parse_since(s, now).map_err(rrstore_store::StoreError::Invalid)?)
        }
        None => None,
    };
    let filter = LsFilter {
        kernel: args.kernel,
        target: args.target,
        tags: args
            .tags
            .iter()
            .map(|t| parse_tag(t))
            .collect::<Result<_, _>>()?,
        label: args.label,
        since,
        sort: match args.sort {
            Sort::Time => LsSort::Time,
            Sort::Size => LsSort::Size,
            Sort::Name => LsSort::Name,
        },
        ..Default::default()
    };
    let store = storeutil::open(globals)?;
    let rows = match &args.remote {
        Some(spec) => super::remote::list_remote(&store, spec, &filter)?,
        None => store.list(&filter)?,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    if args.json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let kw = rows
        .iter()
        .map(|r| r.kernel.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let tw = rows
        .iter()
        .map(|r| r.target.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let lw = rows.iter().map(|r| r.label.len()).max().unwrap_or(5).max(5);
    writeln!(
        out,
        "{:<12}  {:<kw$}  {:<tw$}  {:>10}  {:>4}  {:<lw$}  {:>4}",
        "ID", "KERNEL", "TARGET", "SNAPSHOT", "ARGS", "LABEL", "AGE"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<12}  {:<kw$}  {:<tw$}  {:>10}  {:>4}  {:<lw$}  {:>4}",
            &r.id[..12],
            r.kernel,
            r.target,
            bytes(r.input_size.unwrap_or(0)),
            r.num_args,
            r.label,
            age(r.imported_at, now)
        )?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
