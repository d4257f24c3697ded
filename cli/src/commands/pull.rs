//! `rrstore pull NAME [ID...|--all|--kernel GLOB|--label GLOB]`: bring
//! recordings from a remote, downloading only the chunks the store lacks.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::remote::list::{select, Selection};

use super::remote::{lift, open, print_report, progress_bar};
use super::storeutil;
use crate::Globals;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(true).args(["ids", "all", "kernel", "label"])))]
pub struct Args {
    /// Remote name (see `rrstore remote ls`).
    pub remote: String,
    /// Recording IDs or unique prefixes (4+ hex digits) on the remote.
    pub ids: Vec<String>,
    /// Every recording on the remote.
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
    let mut store = storeutil::open(globals)?;
    let remote = open(&store, &args.remote, false)?;
    let ctx = || format!("cannot pull from remote `{}`", args.remote);
    let sel = Selection {
        ids: args.ids.clone(),
        all: args.all,
        kernel: args.kernel.clone(),
        label: args.label.clone(),
    };
    let wanted = select(&remote, &sel).map_err(lift).with_context(ctx)?;
    let (bar, mut progress) = progress_bar(args.json);
    let report = rrstore_store::remote::pull::pull(&mut store, &remote, wanted, &mut progress)
        .map_err(lift)
        .with_context(ctx);
    bar.finish_and_clear();
    print_report(&report?, "pulled", args.json)?;
    Ok(ExitCode::SUCCESS)
}
