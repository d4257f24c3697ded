//! The configuration file, `$XDG_CONFIG_HOME/rrstore/config.toml` (else
//! `~/.config/rrstore/config.toml`; `$RRSTORE_CONFIG` names another file):
//!
//! ```toml
//! store = "/data/rrstore"   # default store (after --store and $RRSTORE_DIR)
//! timeout = 30              # default --timeout of replay, check, bisect and diff, seconds
//! remote = "lab"            # default remote of push, pull and `ls :`
//! require_signed_by = ["ed25519:…"]  # default --require-signed-by of pull
//! sandbox = "strict"        # default --sandbox of replay, check, bisect and diff
//! arena_cache = "256MiB"    # keep up to this much host arena memory between replays (docs/replay.md)
//! toolchain = "clang-22"    # default --toolchain for IR images (docs/compile.md)
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
    /// At most this much host arena memory is kept on tmpfs between
    /// replays (`rrstore_replay::backend::host::held`); none by default.
    pub arena_cache: Option<ByteSize>,
    /// The default `--toolchain` for IR images.
    pub toolchain: Option<String>,
}

/// A number of bytes: an integer, or a string of a number and a unit,
/// `B`, `KiB`, `MiB`, `GiB`, `TiB` (`K`, `M`, `G`, `T` mean the same) or
/// `kB`, `MB`, `GB`, `TB` (powers of 1000).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawSize")]
pub struct ByteSize(pub u64);

#[derive(Deserialize)]
#[serde(untagged)]
enum RawSize {
    Bytes(u64),
    Text(String),
}

impl TryFrom<RawSize> for ByteSize {
    type Error = String;
    fn try_from(raw: RawSize) -> Result<ByteSize, String> {
        match raw {
            RawSize::Bytes(n) => Ok(ByteSize(n)),
            RawSize::Text(t) => parse_size(&t).map(ByteSize),
        }
    }
}

/// Parse [`ByteSize`]'s text form.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let not_a_size =
        || format!("`{text}` is not a size: expected a number and a unit, as `256MiB`");
    if num.is_empty() {
        return Err(not_a_size());
    }
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "`{text}`: unknown unit `{other}` (use B, KiB, MiB, GiB or TiB)"
            ))
        }
    };
    let n: f64 = num.parse().map_err(|_| not_a_size())?;
    let bytes = n * scale as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is too large"));
    }
    Ok(bytes as u64)
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
                "the configuration file {} sets timeout = {t:?}: it must be a number of seconds, at least 0.001 (1 ms) and below 2^64 ({} s); fix or remove it",
                p.display(),
                std::time::Duration::MAX.as_secs(),
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

/// Fill in what the command line left to the configuration (the replay
/// settings' defaults are merged where the replay options are made,
/// [`crate::flags::replay`]).
pub fn apply(c: &Config, cli: &mut Cli) {
    if cli.store.is_none() && crate::flags::env::store_dir().is_none() {
        cli.store = c.store.clone();
    }
    if let Command::Pull(a) = &mut cli.command {
        if a.require_signed_by.is_empty() && !a.allow_unsigned {
            a.require_signed_by = c.require_signed_by.clone().unwrap_or_default();
        }
    }
}

impl Config {
    /// What the configuration sets for replays: merged with the replay
    /// flags in [`crate::flags::replay::replay_options`].
    pub fn replay(&self) -> crate::flags::replay::Configured {
        crate::flags::replay::Configured {
            timeout: self.timeout,
            sandbox: self.sandbox,
            arena_cache: self.arena_cache.map_or(0, |s| s.0),
            toolchain: self.toolchain.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_and_decimal_units() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1.5 GiB"), Ok(3 << 29));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("0"), Ok(0));
        let e = parse_size("12 parsecs").unwrap_err();
        assert!(e.contains("unknown unit `parsecs`"), "{e}");
        assert!(parse_size("MiB").unwrap_err().contains("not a size"));
        assert!(parse_size("1e30TiB").is_err());
        let c: Config = toml::from_str("arena_cache = 1048576").unwrap();
        assert_eq!(c.arena_cache, Some(ByteSize(1 << 20)));
        let c: Config = toml::from_str("arena_cache = \"1GiB\"").unwrap();
        assert_eq!(c.arena_cache, Some(ByteSize(1 << 30)));
        let e = toml::from_str::<Config>("arena_cache = \"lots\"").unwrap_err();
        assert!(e.to_string().contains("not a size"), "{e}");
    }
}
