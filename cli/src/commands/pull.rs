//! `rrstore pull NAME [ID...|--all|--kernel GLOB|--label GLOB] [--images]`:
//! bring recordings (and the image library) from a remote, downloading only
//! the chunks the store lacks. Recordings damaged on the remote are named
//! on stderr and left out; the others are pulled, and the exit code is
//! then CORRUPT. With `--require-signed-by PUBKEY` (or the configuration's
//! `require_signed_by`), every selected recording must carry a valid
//! signature by one of those keys, checked before anything is transferred
//! (else exit code SIGNATURE). The valid signatures of the recordings
//! pulled are kept in the store, for `show`.

use rrstore_report::shown::Shown;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_format::RecordingId;
use rrstore_store::remote::list::{select, Selected, Selection};
use rrstore_store::remote::signature as sign;
use rrstore_store::signing::PublicKey;

use super::remote::{lift, open, print_report, progress_bar, TransferArgs};
use super::storeutil;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub transfer: TransferArgs,
    /// Of the selected recordings, only those of shard I of N (`I/N`,
    /// counted from 0; `auto`, `auto/N`, `auto/VAR` from Slurm or
    /// Kubernetes), the same subset `check --shard` replays (docs/fleet.md).
    #[arg(long, value_name = "I/N|auto")]
    pub shard: Option<String>,
    /// Pull only recordings signed by one of these public keys
    /// (`ed25519:HEX`, as `rrstore key show` prints; repeat the flag or
    /// separate keys with commas); default: the configuration's
    /// `require_signed_by`.
    #[arg(long, value_name = "PUBKEY", value_delimiter = ',')]
    pub require_signed_by: Vec<String>,
    /// Ignore the configuration's `require_signed_by` for this pull.
    #[arg(long, conflicts_with = "require_signed_by")]
    pub allow_unsigned: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let required = args
        .require_signed_by
        .iter()
        .map(|k| PublicKey::parse(k))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| crate::exit::UsageError(format!("--require-signed-by: {e}")))?;
    let shard = args.shard.as_deref().map(super::fleet::shard).transpose()?;
    let mut args = args.transfer;
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
    let mut wanted = if recordings {
        select(&remote, &sel).map_err(lift).with_context(ctx)?
    } else {
        Selected::default()
    };
    if let Some(s) = &shard {
        wanted.recordings.retain(|(id, _)| s.contains(id));
    }
    let ids: Vec<RecordingId> = wanted.recordings.iter().map(|(id, _)| *id).collect();
    // Signatures of every chosen recording when keys are required (those
    // the store has included); otherwise only of those the pull brings, so
    // a pull of what the store already has costs no request per recording.
    let to_check: Vec<RecordingId> = if required.is_empty() {
        let mut new = Vec::new();
        for id in &ids {
            if !store.contains(id)? {
                new.push(*id);
            }
        }
        new
    } else {
        ids.clone()
    };
    let found = sign::fetch(&remote, &to_check)
        .map_err(lift)
        .with_context(ctx)?;
    if !required.is_empty() {
        if let Err(e) = sign::require(&remote, &ids, &found, &required) {
            let e = match e {
                sign::SignatureError::Remote(r) => return Err(lift(r).context(ctx())),
                refused => anyhow::Error::new(refused).context(ctx()),
            };
            let code = crate::exit::report(&e);
            eprintln!(
                "hint: pull only recordings signed by a key you trust (the publisher signs them with \
                 `rrstore push --sign KEY`), or leave the others out of the pull"
            );
            return Ok(code);
        }
    }
    let (bar, mut progress) = progress_bar(args.json || args.quiet);
    let report =
        rrstore_store::remote::pull::pull(&mut store, &remote, wanted, args.images, &mut progress)
            .map_err(lift)
            .with_context(ctx);
    bar.finish_and_clear();
    let report = report?;
    for id in report.ids.iter().chain(&report.present_ids) {
        let Ok(id) = id.parse::<RecordingId>() else {
            continue;
        };
        if let Some(f) = found.get(&id) {
            store.keep_signatures(&id, &f.valid)?;
        }
    }
    store
        .sync_meta()
        .context("cannot make the store's recovery metadata durable")?;
    print_report(&report, "pulled", args.json, args.quiet)?;
    if report.damaged.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for d in &report.damaged {
        eprintln!(
            "error: recording {} was not pulled: {}",
            Shown(&d.id),
            Shown(&d.reason)
        );
    }
    eprintln!(
        "error: {} recording(s) on remote `{}` are damaged and were not pulled (the others were); \
         push them again from a store that has them, or leave them out of the pull",
        report.damaged.len(),
        name
    );
    Ok(ExitCode::from(crate::exit::CORRUPT))
}
