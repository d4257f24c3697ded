//! `rrstore push NAME [ID...|--all|--kernel GLOB|--label GLOB]`: send
//! recordings to a remote, uploading only the objects it lacks.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::LsFilter;

use super::remote::{lift, open, print_report, progress_bar};
use super::storeutil;
use crate::Globals;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(true).args(["ids", "all", "kernel", "label"])))]
pub struct Args {
    /// Remote name (see `rrstore remote ls`).
    pub remote: String,
    /// Recording IDs or unique prefixes (4+ hex digits).
    pub ids: Vec<String>,
    /// Every recording in the store.
    #[arg(long)]
    pub all: bool,
    /// Recordings whose kernel name matches this shell glob.
    #[arg(long, value_name = "GLOB")]
    pub kernel: Option<String>,
    /// Recordings whose label matches this shell glob.
    #[arg(long, value_name = "GLOB")]
    pub label: Option<String>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = storeutil::open(globals)?;
    let remote = open(&store, &args.remote, true)?;
    let ids = storeutil::resolve_all(&store, &args.ids)?;
    let filter = LsFilter {
        kernel: args.kernel,
        label: args.label,
        ids,
        ..Default::default()
    };
    let ids: Vec<_> = store
        .list(&filter)?
        .iter()
        .filter_map(|r| r.id.parse().ok())
        .collect();
    let (bar, mut progress) = progress_bar(args.json);
    let report = rrstore_store::remote::push::push(&store, &remote, &ids, &mut progress)
        .map_err(lift)
        .with_context(|| format!("cannot push to remote `{}`", args.remote));
    bar.finish_and_clear();
    print_report(&report?, "pushed", args.json)?;
    Ok(ExitCode::SUCCESS)
}
