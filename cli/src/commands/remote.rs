//! `rrstore remote add NAME URL` / `remote ls` / `remote rm NAME`, and the
//! helpers `push`, `pull` and `ls NAME:` share: opening a remote, the
//! progress bar, the transfer summary.

use std::process::ExitCode;

use anyhow::Context;
use indicatif::ProgressBar;
use rrstore_store::remote::{
    self, Damaged, Event, Remote, RemoteConfig, RemoteError, TransferReport,
};
use rrstore_store::{LsFilter, RecordingSummary, Store};

use super::storeutil::{self, bytes, ratio};
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(clap::Subcommand)]
pub enum Sub {
    /// Add a remote: s3://BUCKET[/PREFIX] or file:///PATH.
    Add(AddArgs),
    /// List the remotes of this store.
    Ls(LsArgs),
    /// Forget a remote (its objects stay where they are).
    Rm(RmArgs),
    /// Convert a layout 2 remote to layout 3 (pack and index objects), in place.
    Migrate(MigrateArgs),
    /// Delete what no manifest on a layout 3 remote needs any more (after
    /// `rrstore rm NAME:ID`), safely while other machines push.
    Prune(MigrateArgs),
}

#[derive(clap::Args)]
pub struct MigrateArgs {
    pub name: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct AddArgs {
    pub name: String,
    /// s3://BUCKET[/PREFIX] or file:///PATH.
    pub url: String,
    /// S3 endpoint URL (MinIO, Ceph RGW, ...); default: $AWS_ENDPOINT_URL, else AWS.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// S3 region; default: $AWS_REGION, else us-east-1.
    #[arg(long)]
    pub region: Option<String>,
    /// Allow a plain http:// endpoint; default: $AWS_ALLOW_HTTP.
    #[arg(long)]
    pub allow_http: bool,
    /// Target size of pack objects (layout 3), in MiB: 16 to 64; default 32.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(16..=64))]
    pub pack_size: Option<u32>,
}

#[derive(clap::Args)]
pub struct LsArgs {
    /// Print the remotes as a JSON object keyed by name (docs/json.md).
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct RmArgs {
    pub name: String,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = match args.command {
        Sub::Add(_) => storeutil::open_or_create(globals)?,
        _ => storeutil::open(globals)?,
    };
    match args.command {
        Sub::Add(a) => {
            let cfg = RemoteConfig {
                url: a.url,
                endpoint: a.endpoint,
                region: a.region,
                allow_http: a.allow_http.then_some(true),
                pack_size_mib: a.pack_size,
            };
            remote::config::add(store.dir(), &a.name, cfg.clone()).map_err(lift)?;
            println!("added remote {} {}", a.name, cfg.url);
        }
        Sub::Ls(a) => {
            let all = remote::config::list(store.dir()).map_err(lift)?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else {
                let w = all.keys().map(|k| k.len()).max().unwrap_or(4).max(4);
                for (name, c) in &all {
                    let mut extra = String::new();
                    if let Some(e) = &c.endpoint {
                        extra += &format!("  endpoint={e}");
                    }
                    if let Some(r) = &c.region {
                        extra += &format!("  region={r}");
                    }
                    if c.allow_http == Some(true) {
                        extra += "  allow-http";
                    }
                    if let Some(p) = c.pack_size_mib {
                        extra += &format!("  pack-size={p}MiB");
                    }
                    println!("{name:<w$}  {}{extra}", c.url);
                }
            }
        }
        Sub::Rm(a) => {
            remote::config::remove(store.dir(), &a.name).map_err(lift)?;
            println!("removed remote {}", a.name);
        }
        Sub::Migrate(a) => return migrate(&store, &a),
        Sub::Prune(a) => return prune(&store, &a),
    }
    Ok(ExitCode::SUCCESS)
}

fn prune(store: &Store, a: &MigrateArgs) -> anyhow::Result<ExitCode> {
    let r = open(store, &a.name, false)?;
    let (bar, mut progress) = progress_bar(a.json);
    let report = remote::prune::prune(store.dir(), &r, &mut progress)
        .map_err(lift)
        .with_context(|| format!("cannot prune remote `{}`", a.name));
    bar.finish_and_clear();
    let report = report?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "pruned remote {}: {} dead object(s) dropped, {} pack(s) deleted, {} repacked into {}; \
             freed {}, wrote {}",
            a.name,
            report.dead_blobs,
            report.packs_deleted,
            report.packs_repacked,
            report.packs_written,
            bytes(report.bytes_freed),
            bytes(report.bytes_written)
        );
        if report.history_batches_deleted > 0 {
            println!(
                "history: {} row(s) kept, {} of removed recordings dropped; {} batch(es) compacted into {}",
                report.history_rows_kept,
                report.history_rows_dropped,
                report.history_batches_deleted,
                report.history_batches_written
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `rrstore rm NAME:ID...`: delete recordings' manifests on remotes.
pub fn remove_remote(store: &Store, specs: &[String]) -> anyhow::Result<ExitCode> {
    let mut by_remote: Vec<(String, Vec<String>)> = Vec::new();
    for s in specs {
        let Some((name, id)) = s.split_once(':') else {
            return Err(crate::exit::UsageError(format!(
                "`{s}` names no remote: give every recording as NAME:ID, or run `rrstore rm` \
                 for this store and for remotes separately"
            ))
            .into());
        };
        match by_remote.iter_mut().find(|(n, _)| n == name) {
            Some((_, ids)) => ids.push(id.to_string()),
            None => by_remote.push((name.to_string(), vec![id.to_string()])),
        }
    }
    for (name, prefixes) in by_remote {
        let r = open(store, &name, false)?;
        let ctx = || format!("cannot remove recordings from remote `{name}`");
        let sel = remote::list::Selection {
            ids: prefixes,
            all: false,
            kernel: None,
            label: None,
        };
        let chosen = remote::list::select(&r, &sel)
            .map_err(lift)
            .with_context(ctx)?;
        let mut ids: Vec<_> = chosen.recordings.iter().map(|(id, _)| *id).collect();
        ids.extend(
            chosen
                .damaged
                .iter()
                .filter_map(|d| d.id.parse::<rrstore_format::RecordingId>().ok()),
        );
        let gone = remote::prune::remove(&r, &ids)
            .map_err(lift)
            .with_context(ctx)?;
        for id in &gone {
            println!("removed {name}:{}", id.short());
        }
        eprintln!(
            "{} recording(s) removed from remote `{name}`; run `rrstore remote prune {name}` to free their space",
            gone.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn migrate(store: &Store, a: &MigrateArgs) -> anyhow::Result<ExitCode> {
    let r = open(store, &a.name, false)?;
    let (bar, mut progress) = progress_bar(a.json);
    let report = remote::migrate::migrate(store.dir(), &r, &mut progress)
        .map_err(lift)
        .with_context(|| format!("cannot migrate remote `{}`", a.name));
    bar.finish_and_clear();
    let report = report?;
    for d in &report.damaged {
        eprintln!(
            "error: damaged object left out: {}",
            rrstore_report::shown::Shown(d.to_string())
        );
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if report.from == 3 {
        println!("remote {} is already layout 3", a.name);
    } else {
        println!(
            "migrated remote {} to layout 3: {} objects into {} pack(s) and {} index object(s), \
             {} manifest(s) and {} image entr(ies) rewritten, {} layout 2 object(s) deleted",
            a.name,
            report.blobs,
            report.packs,
            report.index_objects,
            report.manifests,
            report.images,
            report.deleted
        );
    }
    if report.damaged.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "error: {} damaged object(s) on remote `{}` were left as they are; the recordings that \
             use them stay damaged: push them again from a store that has them",
            report.damaged.len(),
            a.name
        );
        Ok(ExitCode::from(crate::exit::CORRUPT))
    }
}

/// Open remote `name` of `store` (`create`: make a file:// directory).
/// What `push` and `pull` transfer: recordings chosen by ID, glob or
/// `--all` (on the sending side: the store for push, the remote for pull),
/// and/or the image library.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(true).args(["remote", "ids", "all", "kernel", "label", "images"])))]
pub struct TransferArgs {
    /// Remote name (see `rrstore remote ls`); default: the configuration
    /// file's `remote`, and then a first word that names no remote is an ID.
    pub remote: Option<String>,
    /// Recording IDs or unique prefixes (4+ hex digits) on the sending side.
    pub ids: Vec<String>,
    /// Every recording on the sending side.
    #[arg(long)]
    pub all: bool,
    /// Recordings whose kernel name matches this shell glob.
    #[arg(long, value_name = "GLOB")]
    pub kernel: Option<String>,
    /// Recordings whose label matches this shell glob.
    #[arg(long, value_name = "GLOB")]
    pub label: Option<String>,
    /// Also every image of the image library (`rrstore image add`) on the
    /// sending side that the other side lacks; alone, only the images.
    #[arg(long)]
    pub images: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print only errors and the final summary line: no progress bar and no
    /// line per recording or image.
    #[arg(long, short = 'q', conflicts_with = "json")]
    pub quiet: bool,
}

impl TransferArgs {
    /// Whether any recording is selected (else only images move).
    pub fn recordings(&self) -> bool {
        self.all || !self.ids.is_empty() || self.kernel.is_some() || self.label.is_some()
    }

    /// The remote to use, the configured default (`default`) unless the
    /// first word names a remote of `store`; a first word that does not is
    /// then taken as a recording ID. Fails when no remote is named or
    /// configured, or nothing is selected.
    pub fn pick_remote(&mut self, store: &Store, default: Option<&str>) -> anyhow::Result<String> {
        let named = match (self.remote.take(), default) {
            (Some(r), None) => r,
            (Some(r), Some(d)) => {
                let known = remote::config::list(store.dir()).map_err(lift)?;
                if known.contains_key(&r) {
                    r
                } else {
                    self.ids.insert(0, r);
                    d.to_string()
                }
            }
            (None, Some(d)) => d.to_string(),
            (None, None) => {
                return Err(crate::exit::UsageError(
                    "no remote named: give its name (`rrstore remote ls` lists them) or set \
                     `remote = \"NAME\"` in the configuration file"
                        .into(),
                )
                .into())
            }
        };
        if !self.recordings() && !self.images {
            return Err(crate::exit::UsageError(format!(
                "nothing to transfer with remote `{named}`: give recording IDs, --all, --kernel GLOB, \
                 --label GLOB or --images"
            ))
            .into());
        }
        Ok(named)
    }
}

pub fn open(store: &Store, name: &str, create: bool) -> anyhow::Result<Remote> {
    let cfg = remote::config::get(store.dir(), name).map_err(lift)?;
    Remote::open(name, &cfg, create, crate::flags::env::remote_options()).map_err(|e| {
        let plain_http = matches!(&e, RemoteError::Setup { reason, .. }
            if reason.starts_with(remote::client::PLAIN_HTTP));
        let e = lift(e);
        if plain_http {
            e.context(format!(
                "remote `{name}` uses a plain-HTTP endpoint without `--allow-http`: add it again with \
                 `rrstore remote rm {name}` and `rrstore remote add {name} {} --endpoint {} --allow-http`, \
                 or set AWS_ALLOW_HTTP=true",
                cfg.url,
                cfg.endpoint.as_deref().unwrap_or("$AWS_ENDPOINT_URL")
            ))
        } else {
            e
        }
    })
}

/// A remote error as an `anyhow::Error`, with a wrapped store error put
/// first in the chain so it keeps its own exit code.
pub fn lift(e: RemoteError) -> anyhow::Error {
    match e {
        RemoteError::Store(s) => s.into(),
        other => other.into(),
    }
}

/// `rrstore ls NAME:`: what remote NAME holds, from its manifests, and the
/// recordings whose manifest is damaged.
pub fn list_remote(
    store: &Store,
    spec: &str,
    filter: &LsFilter,
) -> anyhow::Result<(Vec<RecordingSummary>, Vec<Damaged>)> {
    let name = spec.strip_suffix(':').unwrap_or(spec);
    let r = open(store, name, false)?;
    remote::list::summaries(&r, filter)
        .map_err(lift)
        .with_context(|| format!("cannot list remote `{name}`"))
}

/// A progress bar on a terminal (hidden otherwise) fed by transfer events.
pub fn progress_bar(quiet: bool) -> (ProgressBar, impl FnMut(Event)) {
    let bar = super::storeutil::bytes_bar(quiet, 0);
    let b = bar.clone();
    let f = move |e: Event| match e {
        Event::Start { what, total } => {
            b.set_length(total);
            b.set_position(0);
            b.set_message(what);
        }
        Event::Bytes(n) => b.inc(n),
        Event::Phase(what) => b.set_message(what),
        // Shown whatever `quiet` says: a wait must not look like a hang.
        Event::Notice(line) => b.suspend(|| eprintln!("note: {line}")),
    };
    (bar, f)
}

/// Print a transfer summary (`verb`: "pushed" / "pulled"); `quiet`: only
/// the final line.
pub fn print_report(r: &TransferReport, verb: &str, json: bool, quiet: bool) -> anyhow::Result<()> {
    for w in &r.warnings {
        eprintln!("warning: {}", rrstore_report::shown::Shown(w.to_string()));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    if !quiet {
        print_details(r, verb);
    }
    let dir = if verb == "pushed" { "sent" } else { "received" };
    println!(
        "{verb} {} recording(s), {} already present; {dir} {} ({} chunks: {}, metadata: {}) for {} logical ({})",
        r.recordings,
        r.present,
        bytes(r.bytes),
        r.chunks,
        bytes(r.chunk_bytes),
        bytes(r.metadata_bytes),
        bytes(r.logical_bytes),
        ratio(r.logical_bytes, r.bytes),
    );
    if r.history_rows > 0 {
        let what = if verb == "pushed" { "sent" } else { "merged" };
        println!("{what} {} history row(s)", r.history_rows);
    }
    Ok(())
}

/// The lines per recording and image before a transfer's summary line.
fn print_details(r: &TransferReport, verb: &str) {
    for id in &r.ids {
        println!("{verb} {}", &id[..12.min(id.len())]);
    }
    for id in &r.present_ids {
        println!("present {}", &id[..12.min(id.len())]);
    }
    for h in &r.image_hashes {
        println!("{verb} image {}", &h[..12.min(h.len())]);
    }
    if r.images + r.images_present > 0 {
        println!(
            "{verb} {} image(s), {} already present",
            r.images, r.images_present
        );
    }
    if r.temporaries_removed > 0 {
        println!(
            "removed {} stale temporary file(s) left by interrupted pushes",
            r.temporaries_removed
        );
    }
}
