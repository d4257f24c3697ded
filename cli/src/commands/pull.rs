//! `rrstore pull NAME [ID...|--all|--kernel GLOB|--label GLOB] [--images]`:
//! bring recordings (and the image library) from a remote, downloading only
//! the chunks the store lacks. Recordings damaged on the remote are named
//! on stderr and left out; the others are pulled, and the exit code is
//! then CORRUPT.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::remote::list::{select, Selected, Selection};

use super::remote::{lift, open, print_report, progress_bar, TransferArgs};
use super::storeutil;
use crate::Globals;

pub type Args = TransferArgs;

pub fn run(mut args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut store = storeutil::open_or_create(globals)?;
    let name = args.pick_remote(&store, globals.remote.as_deref())?;
    let remote = open(&store, &name, false)?;
    let ctx = || format!("cannot pull from remote `{}`", name);
    let sel = Selection {
        ids: args.ids.clone(),
        all: args.all,
        kernel: args.kernel.clone(),
        label: args.label.clone(),
    };
    let recordings = args.recordings();
    let wanted = if recordings {
        select(&remote, &sel).map_err(lift).with_context(ctx)?
    } else {
        Selected::default()
    };
    let (bar, mut progress) = progress_bar(args.json || args.quiet);
    let report =
        rrstore_store::remote::pull::pull(&mut store, &remote, wanted, args.images, &mut progress)
            .map_err(lift)
            .with_context(ctx);
    bar.finish_and_clear();
    let report = report?;
    print_report(&report, "pulled", args.json, args.quiet)?;
    if report.damaged.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for d in &report.damaged {
        eprintln!("error: recording {} was not pulled: {}", d.id, d.reason);
    }
    eprintln!(
        "error: {} recording(s) on remote `{}` are damaged and were not pulled (the others were); \
         push them again from a store that has them, or leave them out of the pull",
        report.damaged.len(),
        name
    );
    Ok(ExitCode::from(crate::exit::CORRUPT))
}
