//! `rrstore push NAME [ID...|--all|--kernel GLOB|--label GLOB] [--images]`:
//! send recordings (and the image library) to a remote, uploading only the
//! objects it lacks.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::LsFilter;

use super::remote::{lift, open, print_report, progress_bar};
use super::storeutil;
use crate::Globals;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(true).args(["ids", "all", "kernel", "label", "images"])))]
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
    /// Also every image of the image library (`rrstore image add`) in the store
    /// that the other side lacks; alone, only the images.
    #[arg(long)]
    pub images: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = storeutil::open(globals)?;
    let remote = open(&store, &args.remote, true)?;
    let recordings =
        args.all || !args.ids.is_empty() || args.kernel.is_some() || args.label.is_some();
    let ids: Vec<_> = if recordings {
        let ids = storeutil::resolve_all(&store, &args.ids)?;
        let filter = LsFilter {
            kernel: args.kernel,
            label: args.label,
            ids,
            ..Default::default()
        };
        store
            .list(&filter)?
            .iter()
            .filter_map(|r| r.id.parse().ok())
            .collect()
    } else {
        Vec::new()
    };
    let (bar, mut progress) = progress_bar(args.json);
    let report =
        rrstore_store::remote::push::push(&store, &remote, &ids, args.images, &mut progress)
            .map_err(lift)
            .with_context(|| format!("cannot push to remote `{}`", args.remote));
    bar.finish_and_clear();
    print_report(&report?, "pushed", args.json)?;
    Ok(ExitCode::SUCCESS)
}
