//! `rrstore push NAME [ID...|--all|--kernel GLOB|--label GLOB] [--images]
//! [--sign KEY]`: send recordings (and the image library) to a remote,
//! uploading only the objects it lacks; with `--sign`, then sign every
//! selected recording there (spec/REMOTE.md, "Signatures").

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_store::remote::signature as sign;
use rrstore_store::LsFilter;

use super::remote::{lift, open, print_report, progress_bar, TransferArgs};
use super::storeutil;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub transfer: TransferArgs,
    /// Sign every selected recording on the remote with this secret key
    /// file (`rrstore key generate`), also those it already had.
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    // A bad key file fails the push before anything is sent.
    let key = args
        .sign
        .as_deref()
        .map(super::key::read_secret)
        .transpose()?;
    let mut args = args.transfer;
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
    let report = report?;
    print_report(&report, "pushed", args.json, args.quiet)?;
    if let Some(key) = key {
        let ids: Vec<_> = report
            .ids
            .iter()
            .chain(&report.present_ids)
            .filter_map(|i| i.parse().ok())
            .collect();
        let signed = sign::sign(&remote, &ids, &key)
            .map_err(lift)
            .with_context(|| format!("cannot sign recordings on remote `{name}`"))?;
        for (id, s) in &signed {
            store.keep_signatures(id, std::slice::from_ref(s))?;
        }
        if !args.json && !args.quiet {
            println!(
                "signed {} recording(s) with key {}",
                signed.len(),
                key.public().key_id()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
