//! `rrstore image add FILE [--label L]`, `rrstore image ls [--json]` and
//! `rrstore image rm IMAGE... [--json]`:
//! device images as content-addressed store objects (store/src/images.rs),
//! for `replay --image`, `check --image` and `bisect --images`. Also the
//! helpers the regression commands share (image arguments, error mapping).

use rrstore_report::shown::Shown;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rrstore_replay::regress::image::{resolve, Resolved};
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
        /// The image (x86-64 ELF, cubin, AMDGPU code object, ...), or an
        /// application, shared library or object built with offloading:
        /// each device image it carries is stored.
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
    /// Remove images from the library (`rrstore gc` then frees their bytes
    /// unless a recording or a saved output shares them).
    Rm {
        /// Image hash prefixes (4+ hex digits) or labels.
        #[arg(required = true, value_name = "IMAGE")]
        images: Vec<String>,
        /// Print the removed images as a JSON object (docs/json.md).
        #[arg(long)]
        json: bool,
    },
}

/// What `image rm --json` prints.
#[derive(serde::Serialize)]
struct Removed<'a> {
    removed: &'a [rrstore_store::images::ImageInfo],
}

/// Resolve an image argument (hash prefix, label or file).
pub fn resolve_image(store: &mut Store, spec: &str) -> anyhow::Result<Resolved> {
    let r = resolve(store, spec, None)
        .map_err(crate::errors::regress_error)
        .with_context(|| format!("image `{spec}`"))?;
    for i in &r.added {
        eprintln!(
            "added image {} {} ({}) to the store",
            i.short(),
            i.target,
            Shown(&i.label)
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
        ImageCommand::Rm { images, json } => {
            let mut found = Vec::new();
            for spec in &images {
                // A label names every device image added under it.
                for i in store
                    .resolve_image_set(spec)
                    .with_context(|| format!("image `{spec}`"))?
                {
                    if !found.contains(&i) {
                        found.push(i);
                    }
                }
            }
            store.remove_images(&found).context("removing images")?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&Removed { removed: &found })?
                );
                return Ok(ExitCode::SUCCESS);
            }
            for i in &found {
                println!("removed image {} {}", i.short(), Shown(&i.label));
            }
            eprintln!(
                "{} image(s) removed; run `rrstore gc` to free their space",
                found.len()
            );
        }
        ImageCommand::Add { file, label } => {
            let added = store
                .add_image_file(&file, label.as_deref().unwrap_or(""))
                .with_context(|| format!("adding image {}", file.display()))?;
            for a in &added.images {
                println!(
                    "{} {} {} {} {}",
                    if a.present { "present" } else { "added" },
                    a.image.hash,
                    a.image.target,
                    storeutil::bytes(a.image.len),
                    Shown(&a.image.label)
                );
            }
            if added.offload {
                eprintln!(
                    "{} device image(s) from the offload binaries of {}",
                    added.images.len(),
                    file.display()
                );
            }
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
                    Shown(&i.label),
                    Shown(&i.source)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
