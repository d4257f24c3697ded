//! `rrstore image add FILE [--label L]` and `rrstore image ls [--json]`:
//! device images as content-addressed store objects (store/src/images.rs),
//! for `replay --image`, `check --image` and `bisect --images`. Also the
//! helpers the regression commands share (image arguments, error mapping).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_replay::regress::image::{resolve, Resolved};
use rrstore_replay::regress::RegressError;
use rrstore_store::Store;

use super::storeutil;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: ImageCommand,
}

#[derive(clap::Subcommand)]
pub enum ImageCommand {
    /// Store an image file (content-addressed by blake3).
    Add {
        /// The image (x86-64 ELF, cubin, AMDGPU code object, ...).
        file: PathBuf,
        /// A name for it (compiler or runtime version, build ID).
        #[arg(long)]
        label: Option<String>,
    },
    /// List stored images, oldest first.
    Ls {
        /// Print a JSON array of images (docs/json.md).
        #[arg(long)]
        json: bool,
    },
}

/// A regression error as an anyhow error whose chain holds the library error
/// `exit::code_for` maps.
pub fn regress_err(e: RegressError) -> anyhow::Error {
    match e {
        RegressError::Replay(r) => super::replay::into_anyhow(r),
        RegressError::Store(s) => anyhow::Error::new(s),
        other => anyhow::Error::new(other),
    }
}

/// Resolve an image argument (hash prefix, label or file).
pub fn resolve_image(store: &mut Store, spec: &str) -> anyhow::Result<Resolved> {
    let r = resolve(store, spec, None)
        .map_err(regress_err)
        .with_context(|| format!("image `{spec}`"))?;
    if r.added {
        eprintln!(
            "added image {} ({}) to the store",
            r.info.short(),
            r.info.label
        );
    }
    Ok(r)
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut store = match args.command {
        ImageCommand::Add { .. } => storeutil::open_or_create(globals)?,
        _ => storeutil::open(globals)?,
    };
    match args.command {
        ImageCommand::Add { file, label } => {
            let a = store
                .add_image(&file, label.as_deref().unwrap_or(""))
                .with_context(|| format!("adding image {}", file.display()))?;
            println!(
                "{} {} {} {} {}",
                if a.present { "present" } else { "added" },
                a.image.hash,
                a.image.target,
                storeutil::bytes(a.image.len),
                a.image.label
            );
        }
        ImageCommand::Ls { json } => {
            let images = store.images().context("listing images")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&images)?);
                return Ok(ExitCode::SUCCESS);
            }
            if images.is_empty() {
                println!("no images stored (add one with `rrstore image add FILE`)");
                return Ok(ExitCode::SUCCESS);
            }
            let now = rrstore_store::now_unix();
            println!(
                "{:<12}  {:<8} {:>10}  {:<5} {:<24} source",
                "image", "target", "size", "age", "label"
            );
            for i in &images {
                println!(
                    "{:<12}  {:<8} {:>10}  {:<5} {:<24} {}",
                    i.short(),
                    i.target,
                    storeutil::bytes(i.len),
                    storeutil::age(i.added_at, now),
                    i.label,
                    i.source
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
