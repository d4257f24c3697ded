//! `rrstore push NAME [ID...|--all|--kernel GLOB|--label GLOB] [--images]`:
//! send recordings (and the image library) to a remote, uploading only the
//! objects it lacks.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::LsFilter;

use super::remote::{lift, open, print_report, progress_bar, TransferArgs};
use super::storeutil;
use crate::Globals;

pub type Args = TransferArgs;

pub fn run(mut args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = storeutil::open(globals)?;
    let name = args.pick_remote(&store, globals.remote.as_deref())?;
    let remote = open(&store, &name, true)?;
    let recordings = args.recordings();
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
    let (bar, mut progress) = progress_bar(args.json || args.quiet);
    let report =
        rrstore_store::remote::push::push(&store, &remote, &ids, args.images, &mut progress)
            .map_err(lift)
            .with_context(|| format!("cannot push to remote `{}`", name));
    bar.finish_and_clear();
    print_report(&report?, "pushed", args.json, args.quiet)?;
    Ok(ExitCode::SUCCESS)
}
