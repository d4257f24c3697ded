//! The configuration file, `$XDG_CONFIG_HOME/rrstore/config.toml` (else
//! `~/.config/rrstore/config.toml`; `$RRSTORE_CONFIG` names another file):
//!
//! ```toml
//! store = "/data/rrstore"   # default store (after --store and $RRSTORE_DIR)
//! timeout = 30              # default --timeout of replay, check, bisect and diff, seconds
//! remote = "lab"            # default remote of push, pull and `ls :`
//! require_signed_by = ["ed25519:…"]  # default --require-signed-by of pull
//! sandbox = "strict"        # default --sandbox of replay, check, bisect and diff
//! ```
//!
//! A missing file is no configuration. An unknown key or a value of the
//! wrong type is an error naming the file and the line (exit code 4), so a
//! typo is not silently ignored.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use crate::{Cli, Command};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub store: Option<PathBuf>,
    pub timeout: Option<f64>,
    pub remote: Option<String>,
    /// Public keys `pull` requires a signature by (any of them), unless
    /// the command line gives its own or `--allow-unsigned`.
    pub require_signed_by: Option<Vec<String>>,
    /// The default `--sandbox` (`auto`, `strict`, `off`).
    pub sandbox: Option<crate::commands::confine::SandboxArg>,
}

/// Where the configuration file is looked for.
pub fn path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = var("RRSTORE_CONFIG") {
        return Some(p.into());
    }
    let base = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".config")))?;
    Some(base.join("rrstore/config.toml"))
}

/// Read the configuration file (none: the defaults).
pub fn load() -> anyhow::Result<Config> {
    let Some(p) = path() else {
        return Ok(Config::default());
    };
    // A file that is not there, or behind a directory this user cannot
    // enter (another user's HOME under `sudo -u`), is no configuration; a
    // file that is there but unreadable is an error (exit 3).
    match p.try_exists() {
        Ok(true) => {}
        Ok(false) | Err(_) => return Ok(Config::default()),
    }
    let text = std::fs::read_to_string(&p)
        .map_err(|source| rrstore_format::FormatError::Io {
            path: p.clone(),
            source,
        })
        .context("cannot read the configuration file: make it readable or remove it")?;
    let c: Config = toml::from_str(&text).map_err(|e| {
        rrstore_store::StoreError::Invalid(format!(
            "the configuration file {} is not valid: {}fix or remove it",
            p.display(),
            e
        ))
    })?;
    if let Some(t) = c.timeout {
        if !crate::commands::confine::valid_timeout(t) {
            return Err(rrstore_store::StoreError::Invalid(format!(
                "the configuration file {} sets timeout = {t}: it must be a number of seconds, at least 0.001 (1 ms)",
                p.display()
            ))
            .into());
        }
    }
    for k in c.require_signed_by.iter().flatten() {
        if let Err(e) = rrstore_store::signing::PublicKey::parse(k) {
            return Err(rrstore_store::StoreError::Invalid(format!(
                "the configuration file {} sets require_signed_by: {e}; fix or remove it",
                p.display()
            ))
            .into());
        }
    }
    Ok(c)
}

/// Fill in what the command line left to the configuration.
pub fn apply(c: &Config, cli: &mut Cli) {
    if cli.store.is_none() && std::env::var_os("RRSTORE_DIR").is_none_or(|v| v.is_empty()) {
        cli.store = c.store.clone();
    }
    if let Command::Pull(a) = &mut cli.command {
        if a.require_signed_by.is_empty() && !a.allow_unsigned {
            a.require_signed_by = c.require_signed_by.clone().unwrap_or_default();
        }
    }
    let confine = match &mut cli.command {
        Command::Replay(a) => &mut a.confine,
        Command::Check(a) => &mut a.run.confine,
        Command::Bisect(a) => &mut a.run.confine,
        Command::Diff(a) => &mut a.confine,
        _ => return,
    };
    if confine.timeout.is_none() {
        confine.timeout = c.timeout.map(crate::commands::confine::Timeout::Secs);
    }
    if confine.sandbox.is_none() {
        confine.sandbox = c.sandbox;
    }
}
