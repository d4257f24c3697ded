//! `rrstore pull NAME [ID...|--all|--kernel GLOB|--label GLOB] [--images]`:
//! bring recordings (and the image library) from a remote, downloading only
//! the chunks the store lacks.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::remote::list::{select, Selection};

use super::remote::{lift, open, print_report, progress_bar};
use super::storeutil;
use crate::Globals;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(true).args(["ids", "all", "kernel", "label", "images"])))]
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
    /// Also every image of the image library (`rrstore image add`) on the remote
    /// that the other side lacks; alone, only the images.
    #[arg(long)]
    pub images: bool,
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
    let recordings =
        args.all || !args.ids.is_empty() || args.kernel.is_some() || args.label.is_some();
    let wanted = if recordings {
        select(&remote, &sel).map_err(lift).with_context(ctx)?
    } else {
        Vec::new()
    };
    let (bar, mut progress) = progress_bar(args.json);
    let report =
        rrstore_store::remote::pull::pull(&mut store, &remote, wanted, args.images, &mut progress)
            .map_err(lift)
            .with_context(ctx);
    bar.finish_and_clear();
    print_report(&report?, "pulled", args.json)?;
    Ok(ExitCode::SUCCESS)
}
