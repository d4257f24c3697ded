//! Named remotes of a store, kept in `DIR/remotes.json` (written atomically
//! under `DIR/remotes.lock`). Secrets are never stored: credentials come
//! from the AWS environment variables when a remote is used.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{RemoteError, Result};
use super::url::RemoteUrl;
use crate::lock::{LockFile, Mode};

/// File name of the remote list inside the store directory.
pub const REMOTES_FILE: &str = "remotes.json";
const REMOTES_LOCK: &str = "remotes.lock";

/// One configured remote.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RemoteConfig {
    pub url: String,
    /// S3 endpoint (e.g. `http://127.0.0.1:9000`); else `AWS_ENDPOINT_URL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// S3 region; else `AWS_REGION` / `AWS_DEFAULT_REGION`, else us-east-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Allow plain http endpoints; else `AWS_ALLOW_HTTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_http: Option<bool>,
    /// Version 3 pack target size in MiB (16 to 64); else 32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_size_mib: Option<u32>,
}

/// The pack target sizes `remote add --pack-size` accepts, in MiB.
pub const PACK_SIZE_MIB: std::ops::RangeInclusive<u32> = 16..=64;
/// The default pack target size in MiB.
pub const DEFAULT_PACK_SIZE_MIB: u32 = 32;

#[derive(Default, Serialize, Deserialize)]
struct RemotesFile {
    remotes: BTreeMap<String, RemoteConfig>,
}

fn path(dir: &Path) -> PathBuf {
    dir.join(REMOTES_FILE)
}

fn load(dir: &Path) -> Result<RemotesFile> {
    let p = path(dir);
    match std::fs::read(&p) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| RemoteError::Config {
            path: p.clone(),
            reason: format!("does not parse ({e}); fix or delete it"),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RemotesFile::default()),
        Err(e) => Err(RemoteError::Config {
            path: p,
            reason: e.to_string(),
        }),
    }
}

fn save(dir: &Path, f: &RemotesFile) -> Result<()> {
    let p = path(dir);
    let tmp = dir.join(format!("{REMOTES_FILE}.tmp.{}", std::process::id()));
    let cfg_err = |e: std::io::Error| RemoteError::Config {
        path: p.clone(),
        reason: e.to_string(),
    };
    let body = serde_json::to_vec_pretty(f).map_err(|e| RemoteError::Config {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    std::fs::write(&tmp, body).map_err(cfg_err)?;
    std::fs::rename(&tmp, &p).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        cfg_err(e)
    })
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(RemoteError::BadName(name.to_string()))
    }
}

/// Add remote `name` to the store at `dir` (the URL is checked first).
pub fn add(dir: &Path, name: &str, cfg: RemoteConfig) -> Result<()> {
    check_name(name)?;
    RemoteUrl::parse(&cfg.url)?;
    let _lock = LockFile::acquire(&dir.join(REMOTES_LOCK), Mode::Exclusive, true)?;
    let mut f = load(dir)?;
    if f.remotes.contains_key(name) {
        return Err(RemoteError::RemoteExists(name.to_string()));
    }
    f.remotes.insert(name.to_string(), cfg);
    save(dir, &f)
}

/// Remove remote `name` (its objects are left where they are).
pub fn remove(dir: &Path, name: &str) -> Result<()> {
    let _lock = LockFile::acquire(&dir.join(REMOTES_LOCK), Mode::Exclusive, true)?;
    let mut f = load(dir)?;
    if f.remotes.remove(name).is_none() {
        return Err(RemoteError::UnknownRemote(name.to_string()));
    }
    save(dir, &f)?;
    // Its index cache is a copy of what is on the remote: useless now (and
    // emptied anyway if a remote of this name is added with another URL).
    let _ = std::fs::remove_file(dir.join("remote-cache").join(format!("{name}.sqlite")));
    Ok(())
}

/// All remotes, sorted by name.
pub fn list(dir: &Path) -> Result<BTreeMap<String, RemoteConfig>> {
    Ok(load(dir)?.remotes)
}

/// One remote's configuration.
pub fn get(dir: &Path, name: &str) -> Result<RemoteConfig> {
    load(dir)?
        .remotes
        .remove(name)
        .ok_or_else(|| RemoteError::UnknownRemote(name.to_string()))
}
