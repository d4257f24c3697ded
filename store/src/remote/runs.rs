//! Check results of fleet runs on a remote (issue 21): each shard of run
//! NAME writes one object `runs/NAME/shard-I-of-N.json` (the check report
//! and the shard, JSON; written whole, so a reader sees all of it or
//! none), and collecting lists `runs/NAME/`. The objects are the caller's
//! bytes: this module owns only the keys (spec/REMOTE.md, "Fleet runs").

use super::client::Remote;
use super::error::{RemoteError, Result};

/// The prefix of every run's objects.
pub const RUNS: &str = "runs/";

/// Whether `name` may name a run: letters, digits, `.`, `_`, `-`, at most
/// 128, not starting with `.`.
pub fn valid_run_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `shard-I-of-N.json`.
pub fn shard_file(index: u32, count: u32) -> String {
    format!("shard-{index}-of-{count}.json")
}

/// (I, N) of a `shard-I-of-N.json` name (or key ending in one).
pub fn parse_shard_file(key: &str) -> Option<(u32, u32)> {
    let name = key.rsplit('/').next()?;
    let rest = name.strip_prefix("shard-")?.strip_suffix(".json")?;
    let (i, n) = rest.split_once("-of-")?;
    Some((i.parse().ok()?, n.parse().ok()?))
}

/// `runs/NAME/`, the key prefix of run `run`'s shards.
pub fn run_dir(run: &str) -> Result<String> {
    if !valid_run_name(run) {
        return Err(RemoteError::BadRunName(run.to_string()));
    }
    Ok(format!("{RUNS}{run}/"))
}

/// Store shard `index` of `count`'s results of run `run`.
pub fn put_shard(
    remote: &Remote,
    run: &str,
    index: u32,
    count: u32,
    body: Vec<u8>,
) -> Result<String> {
    let key = format!("{}{}", run_dir(run)?, shard_file(index, count));
    remote.put(&key, body)?;
    Ok(key)
}

/// Every shard results object of run `run`: (key, bytes), by key.
pub fn get_shards(remote: &Remote, run: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let dir = run_dir(run)?;
    let mut keys: Vec<String> = remote
        .list(&dir)?
        .into_iter()
        .filter(|k| parse_shard_file(k).is_some())
        .collect();
    keys.sort();
    let mut out = Vec::new();
    for k in keys {
        // Listed then gone: a concurrent rewrite of the same shard; the
        // next collect sees it.
        if let Some(b) = remote.get(&k)? {
            out.push((k, b));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_round_trip_and_run_names_are_checked() {
        assert_eq!(shard_file(2, 5), "shard-2-of-5.json");
        assert_eq!(parse_shard_file("runs/x/shard-2-of-5.json"), Some((2, 5)));
        assert_eq!(parse_shard_file("runs/x/shard-2-of-5.json.tmp"), None);
        assert_eq!(parse_shard_file("shard-a-of-5.json"), None);
        assert!(valid_run_name("nightly-2026.12.01_a"));
        for bad in ["", ".x", "a/b", "a b", &"x".repeat(129)] {
            assert!(!valid_run_name(bad), "{bad}");
        }
    }
}
