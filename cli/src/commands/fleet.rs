//! Fleet flags (issue 21): `--device N|UUID` (replay, check, bisect,
//! diff), `--jobs N` and `--devices LIST|all` (check, bisect --label),
//! `--shard I/N|auto|auto/N|auto/VAR`, `--run NAME`, `--results DEST` and
//! `--collect DEST` (check) become library options here. Logic:
//! rrstore_replay::fleet and rrstore_replay::regress::lanes.

use anyhow::Context;
use rrstore_replay::backend::devices;
use rrstore_replay::fleet::collect::Place;
use rrstore_replay::fleet::devices::{parse_device, parse_devices, pick, pick_one, DeviceRef};
use rrstore_replay::fleet::lookahead::Mode;
use rrstore_replay::fleet::shard::{self, Shard};
use rrstore_replay::regress::lanes::Fleet;
use rrstore_store::Store;

use crate::exit::UsageError;

/// `--device`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct DeviceArgs {
    /// Replay on this device: a CUDA/HIP ordinal or a UUID as `rrstore
    /// devices` lists them; the host backend has device 0, the CPU.
    #[arg(long, value_name = "N|UUID")]
    pub device: Option<String>,
}

impl DeviceArgs {
    /// The device ordinal (0 when not given).
    pub fn ordinal(&self) -> anyhow::Result<u32> {
        let Some(spec) = &self.device else {
            return Ok(0);
        };
        let r = parse_device(spec).map_err(|e| UsageError(format!("--device: {e}")))?;
        if r == DeviceRef::Ordinal(0) {
            return Ok(0);
        }
        // Checked here, before anything replays: a check would otherwise
        // fail every recording on a device that does not exist.
        pick_one(&r, &devices::all())
            .context("--device: `rrstore devices` lists the devices and their UUIDs")
    }
}

/// `--jobs` and `--devices`.
#[derive(clap::Args, Clone, Default)]
pub struct ParallelArgs {
    /// Host: replay N recordings at once, each in its own runner process
    /// (results are printed in the same order as with 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
    /// GPUs: spread the recordings over these devices, one replay per
    /// device at a time: ordinals, ranges and UUIDs (`0,2-3`), or `all`.
    #[arg(long, value_name = "LIST|all", conflicts_with = "device")]
    pub devices: Option<String>,
}

impl ParallelArgs {
    /// The lanes: `--devices` (looked up on this machine), else `--jobs`.
    pub fn fleet(&self) -> anyhow::Result<Fleet> {
        let mut f = Fleet {
            jobs: self.jobs.unwrap_or(1) as usize,
            lookahead: lookahead_mode()?,
            ..Fleet::default()
        };
        if let Some(spec) = &self.devices {
            let list = parse_devices(spec).map_err(|e| UsageError(format!("--devices: {e}")))?;
            f.devices = pick(&list, &devices::all())
                .context("--devices: `rrstore devices` lists the devices")?;
        }
        Ok(f)
    }
}

/// `RRSTORE_LOOKAHEAD`: `gpu` (or unset) prepares a device lane's next
/// recording while its kernel runs, `all` every lane's, `0` none (for
/// measuring the overlap: docs/fleet.md).
fn lookahead_mode() -> anyhow::Result<Option<Mode>> {
    match crate::flags::env::lookahead().as_deref() {
        None | Some("") | Some("gpu") | Some("1") => Ok(Some(Mode::Gpu)),
        Some("all") => Ok(Some(Mode::All)),
        Some("0") | Some("off") => Ok(None),
        Some(other) => {
            Err(UsageError(format!("RRSTORE_LOOKAHEAD={other}: expected gpu, all or 0")).into())
        }
    }
}

/// `--shard`, read from the environment for `auto`.
pub fn shard(spec: &str) -> anyhow::Result<Shard> {
    let s = shard::parse(spec).map_err(|e| UsageError(format!("--shard: {e}")))?;
    let env = |k: &str| std::env::var(k).ok();
    Ok(s.resolve(&env)
        .map_err(|e| UsageError(format!("--shard: {e}")))?)
}

/// Where `--results`/`--collect DEST` points, checked but not opened.
pub enum Dest {
    Remote(String),
    Dir(std::path::PathBuf),
}

/// `NAME:` or the name of a configured remote is a remote (which must be
/// configured), anything else a directory.
pub fn dest(store: &Store, dest: &str) -> anyhow::Result<Dest> {
    let known = rrstore_store::remote::config::list(store.dir()).map_err(super::remote::lift)?;
    let name = dest.strip_suffix(':').unwrap_or(dest);
    if known.contains_key(name) {
        return Ok(Dest::Remote(name.to_string()));
    }
    if dest.ends_with(':') {
        // The usual "no remote named" error, with its hint.
        rrstore_store::remote::config::get(store.dir(), name).map_err(super::remote::lift)?;
    }
    Ok(Dest::Dir(dest.into()))
}

/// Open `d`. A remote starts an I/O runtime with threads, after which the
/// host backend no longer forks its runners: open it after the replays.
pub fn open(store: &Store, d: Dest, create: bool) -> anyhow::Result<Place> {
    match d {
        Dest::Remote(name) => Ok(Place::Remote(Box::new(super::remote::open(
            store, &name, create,
        )?))),
        Dest::Dir(p) => Ok(Place::Dir(p)),
    }
}
