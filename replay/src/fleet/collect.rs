//! Shard results of a fleet run, and gathering them: `check --run NAME`
//! writes one [`ShardResults`] per shard (the check report and which shard
//! it is) as `runs/NAME/shard-I-of-N.json`, in a directory or on a remote
//! ([`rrstore_store::remote::runs`]); [`collect`] reads every shard of run
//! NAME back into one report, naming the shards that have not reported.
//!
//! A directory holds the same keys as a `file://` remote, so either can be
//! collected from; files are written to a temporary name and renamed, so a
//! collect never reads half a shard.

use std::path::{Path, PathBuf};

use rrstore_store::remote::{runs, Remote};
use serde::{Deserialize, Serialize};

use super::shard::Shard;
use super::FleetError;

/// What one shard of run `run` writes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShardResults {
    pub run: String,
    pub shard: ShardNumbers,
    /// The machine it ran on (host name).
    pub host: String,
    /// Seconds since the epoch when it finished.
    pub finished_at: i64,
    /// The check report (`check --json`).
    pub report: serde_json::Value,
}

/// [`Shard`] as written in the file.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShardNumbers {
    pub index: u32,
    pub count: u32,
}

impl From<Shard> for ShardNumbers {
    fn from(s: Shard) -> Self {
        ShardNumbers {
            index: s.index,
            count: s.count,
        }
    }
}

/// Where shard results go: a directory or a remote.
pub enum Place {
    Dir(PathBuf),
    Remote(Box<Remote>),
}

impl Place {
    /// Words for messages: the directory, or `remote NAME`.
    pub fn describe(&self) -> String {
        match self {
            Place::Dir(d) => d.display().to_string(),
            Place::Remote(b) => format!("remote `{}` ({})", b.name, b.url),
        }
    }

    /// Write `r` as its shard's file; returns where it went.
    pub fn write(&self, r: &ShardResults) -> Result<String, FleetError> {
        let body = serde_json::to_vec_pretty(r).map_err(|e| FleetError::BadResults {
            what: format!("of run {}", r.run),
            why: e.to_string(),
        })?;
        match self {
            Place::Remote(b) => {
                let key = runs::put_shard(b, &r.run, r.shard.index, r.shard.count, body)?;
                Ok(format!("{}, {key}", self.describe()))
            }
            Place::Dir(d) => {
                let dir = d.join(runs::run_dir(&r.run)?);
                std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
                let name = runs::shard_file(r.shard.index, r.shard.count);
                let path = dir.join(&name);
                let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
                std::fs::write(&tmp, &body).map_err(|e| io(&tmp, e))?;
                std::fs::rename(&tmp, &path).map_err(|e| {
                    let _ = std::fs::remove_file(&tmp);
                    io(&path, e)
                })?;
                Ok(path.display().to_string())
            }
        }
    }

    /// Every shard file of run `run`: (where, bytes), by name.
    pub fn read_all(&self, run: &str) -> Result<Vec<(String, Vec<u8>)>, FleetError> {
        match self {
            Place::Remote(b) => Ok(runs::get_shards(b, run)?),
            Place::Dir(d) => {
                let dir = d.join(runs::run_dir(run)?);
                let entries = match std::fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => return Err(io(&dir, e)),
                };
                let mut paths: Vec<PathBuf> = entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| runs::parse_shard_file(n).is_some())
                    })
                    .collect();
                paths.sort();
                paths
                    .into_iter()
                    .map(|p| {
                        let b = std::fs::read(&p).map_err(|e| io(&p, e))?;
                        Ok((p.display().to_string(), b))
                    })
                    .collect()
            }
        }
    }
}

/// Every shard of a run in one report.
#[derive(Clone, Debug, Serialize)]
pub struct Collected {
    pub run: String,
    /// Shards the run has (N).
    pub shards: u32,
    /// Shards whose results were found, and those missing.
    pub found: Vec<u32>,
    pub missing: Vec<u32>,
    /// The machine each found shard ran on, in the order of `found`.
    pub hosts: Vec<String>,
    /// Every shard's rows, by kernel name then recording ID.
    pub rows: Vec<serde_json::Value>,
    pub replays: u64,
    pub cached: u64,
    pub regressed: u64,
    pub slower: u64,
}

/// Gather the shard files `files` (where, bytes) of run `run`.
pub fn collect(
    run: &str,
    files: Vec<(String, Vec<u8>)>,
    place: &str,
) -> Result<Collected, FleetError> {
    if files.is_empty() {
        return Err(FleetError::NoResults {
            run: run.to_string(),
            place: place.to_string(),
        });
    }
    let mut shards: Vec<(String, ShardResults)> = Vec::new();
    for (what, bytes) in files {
        let r: ShardResults =
            serde_json::from_slice(&bytes).map_err(|e| FleetError::BadResults {
                what: what.clone(),
                why: format!("{e}; write that shard again (rerun its check)"),
            })?;
        shards.push((what, r));
    }
    let count = shards[0].1.shard.count;
    if let Some((what, r)) = shards
        .iter()
        .find(|(_, r)| r.shard.count != count || r.run != run)
    {
        return Err(FleetError::BadResults {
            what: what.clone(),
            why: format!(
                "it is shard {}/{} of run `{}`, but {} is of {count} shards of run `{run}`: a run name was reused with another shard count; remove the older files or use a new run name",
                r.shard.index, r.shard.count, r.run, shards[0].0
            ),
        });
    }
    shards.sort_by_key(|(_, r)| r.shard.index);
    let found: Vec<u32> = shards.iter().map(|(_, r)| r.shard.index).collect();
    let mut out = Collected {
        run: run.to_string(),
        shards: count,
        missing: (0..count).filter(|i| !found.contains(i)).collect(),
        found,
        hosts: shards.iter().map(|(_, r)| r.host.clone()).collect(),
        rows: Vec::new(),
        replays: 0,
        cached: 0,
        regressed: 0,
        slower: 0,
    };
    for (what, r) in shards {
        let num = |k: &str| r.report.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        out.replays += num("replays");
        out.cached += num("cached");
        out.regressed += num("regressed");
        out.slower += num("slower");
        match r.report.get("rows").and_then(|v| v.as_array()) {
            Some(rows) => out.rows.extend(rows.iter().cloned()),
            None => {
                return Err(FleetError::BadResults {
                    what,
                    why: "its report has no rows".into(),
                })
            }
        }
    }
    let key = |v: &serde_json::Value| {
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
        (s("kernel"), s("recording"))
    };
    out.rows.sort_by_key(key);
    Ok(out)
}

fn io(path: &Path, e: std::io::Error) -> FleetError {
    FleetError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(run: &str, index: u32, count: u32, rows: &[(&str, &str, bool)]) -> ShardResults {
        let rows: Vec<_> = rows
            .iter()
            .map(|(k, id, reg)| serde_json::json!({"kernel": k, "recording": id, "regressed": reg}))
            .collect();
        let regressed = rows.iter().filter(|r| r["regressed"] == true).count();
        ShardResults {
            run: run.into(),
            shard: ShardNumbers { index, count },
            host: format!("node{index}"),
            finished_at: 0,
            report: serde_json::json!({"rows": rows, "replays": rows.len(), "cached": 0, "regressed": regressed, "slower": 0}),
        }
    }

    #[test]
    fn a_directory_round_trips_and_missing_shards_are_named() {
        let d = tempfile::tempdir().unwrap();
        let place = Place::Dir(d.path().to_path_buf());
        place
            .write(&shard("n1", 2, 3, &[("b", "22", true)]))
            .unwrap();
        place
            .write(&shard(
                "n1",
                0,
                3,
                &[("c", "33", false), ("a", "11", false)],
            ))
            .unwrap();
        place
            .write(&shard("other", 0, 1, &[("z", "99", false)]))
            .unwrap();
        let files = place.read_all("n1").unwrap();
        assert_eq!(files.len(), 2);
        let c = collect("n1", files, &place.describe()).unwrap();
        assert_eq!(
            (c.shards, c.found.clone(), c.missing.clone()),
            (3, vec![0, 2], vec![1])
        );
        assert_eq!(c.hosts, ["node0", "node2"]);
        let kernels: Vec<_> = c
            .rows
            .iter()
            .map(|r| r["kernel"].as_str().unwrap())
            .collect();
        assert_eq!(kernels, ["a", "b", "c"]);
        assert_eq!((c.replays, c.regressed), (3, 1));
        assert!(matches!(
            collect("none", place.read_all("none").unwrap(), "x"),
            Err(FleetError::NoResults { .. })
        ));
    }

    #[test]
    fn a_reused_run_name_with_another_count_and_damaged_files_are_errors() {
        let d = tempfile::tempdir().unwrap();
        let place = Place::Dir(d.path().to_path_buf());
        place.write(&shard("r", 0, 2, &[])).unwrap();
        place.write(&shard("r", 0, 3, &[])).unwrap();
        let e = collect("r", place.read_all("r").unwrap(), "d").unwrap_err();
        assert!(e.to_string().contains("reused"), "{e}");
        let e = collect("r", vec![("f".into(), b"{".to_vec())], "d").unwrap_err();
        assert!(matches!(e, FleetError::BadResults { .. }), "{e}");
        assert!(place.read_all("../x").is_err());
    }
}
