//! Replay outputs kept for `rrstore diff`, and the history lookups of the
//! regression workflow.
//!
//! The history holds only the blake3 of each replay's output arena. `check`
//! and `bisect` keep the output bytes of their runs as stand-alone objects
//! linked to the history row (`saved_outputs`): an output equal to the
//! recorded output just points at the recording's output part, any other
//! is stored chunk-deduplicated (usually only the few chunks that differ
//! are new). The replay cache key is (recording ID, image hash, launch,
//! settings key): a run whose row has an output hash (or crashed / timed
//! out) is not repeated; the caller says which launches are the same and
//! gives the settings key it stored with [`Store::set_run_key`]
//! (`replay_keys`; docs/regress.md "The replay cache"), or none to find a
//! reference run of any settings.

use std::path::Path;

use rrstore_format::RecordingId;
use rusqlite::OptionalExtension;

use crate::error::{Result, StoreError};
use crate::index::{hash32, write};
use crate::objects::PutReport;
use crate::{HistoryEntry, Store};

/// Verdicts whose history row is a reusable result for the cache key.
const CACHEABLE: [&str; 7] = [
    "verified",
    "within-tolerance",
    "mismatch",
    "nondeterministic",
    "unverified",
    "crashed",
    "timed-out",
];

impl Store {
    /// Keep the output arena in `path` for history row `history_id`.
    pub fn save_output_file(&mut self, history_id: i64, path: &Path) -> Result<PutReport> {
        self.put_object(path, &|tx, hash, _| {
            tx.execute(
                "INSERT OR REPLACE INTO saved_outputs (history_id, part) VALUES (?1, ?2)",
                rusqlite::params![history_id, &hash[..]],
            )
            .map(|_| ())
        })
    }

    /// Link history row `history_id` to an already stored part (the
    /// recording's output part, when the replay reproduced it exactly).
    pub fn link_output(&mut self, history_id: i64, part: &[u8; 32]) -> Result<()> {
        let index = self.index_path();
        // One `BEGIN IMMEDIATE` transaction: a deferred one that reads
        // first cannot wait for another writer (`check --jobs` lanes write
        // at the same time) and fails with "database is locked".
        let linked =
            write::in_transaction(&mut self.conn, &index, "linking a saved output", |tx| {
                let exists = tx
                    .prepare_cached("SELECT 1 FROM parts WHERE hash = ?1")?
                    .exists([&part[..]])?;
                if exists {
                    tx.execute(
                        "INSERT OR REPLACE INTO saved_outputs (history_id, part) VALUES (?1, ?2)",
                        rusqlite::params![history_id, &part[..]],
                    )?;
                }
                Ok(exists)
            })?;
        if !linked {
            return Err(StoreError::ObjectNotFound(format!(
                "part {} is not stored",
                rrstore_format::id::hex(part)
            )));
        }
        Ok(())
    }

    /// The stored output part of history row `history_id`, if kept.
    pub fn saved_output(&self, history_id: i64) -> Result<Option<[u8; 32]>> {
        let v: Option<Vec<u8>> = self
            .conn()
            .prepare_cached("SELECT part FROM saved_outputs WHERE history_id = ?1")
            .and_then(|mut s| s.query_row([history_id], |r| r.get(0)).optional())
            .map_err(self.ierr("reading a saved output"))?;
        Ok(v.map(hash32))
    }

    /// History row `id`.
    pub fn history_entry(&self, id: i64) -> Result<HistoryEntry> {
        let rec: Option<Vec<u8>> = self
            .conn()
            .prepare_cached("SELECT recording FROM replay_history WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
            .map_err(self.ierr("reading a history row"))?;
        let rec = rec.ok_or_else(|| {
            StoreError::ObjectNotFound(format!(
                "there is no history row {id} (see `rrstore history`)"
            ))
        })?;
        self.history(Some(RecordingId(hash32(rec))))?
            .into_iter()
            .find(|e| e.id == id)
            .ok_or_else(|| StoreError::ObjectNotFound(format!("there is no history row {id}")))
    }

    /// The newest reusable history row of `recording` run with `image` and
    /// a launch `same_launch` accepts (team/thread counts and overrides).
    pub fn cached_run(
        &self,
        recording: &RecordingId,
        image: &[u8; 32],
        key: Option<&str>,
        same_launch: &dyn Fn(&HistoryEntry) -> bool,
    ) -> Result<Option<HistoryEntry>> {
        for e in self.history(Some(*recording))?.into_iter().rev() {
            let reusable = &e.image_hash == image
                && same_launch(&e)
                && CACHEABLE.contains(&e.verdict.as_str())
                && (e.output_blake3.is_some()
                    || matches!(e.verdict.as_str(), "crashed" | "timed-out"));
            if reusable && (key.is_none() || self.run_key(e.id)?.as_deref() == key) {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    /// Store the settings key of history row `history_id` (what, beyond
    /// the row's own columns, its result depends on).
    pub fn set_run_key(&self, history_id: i64, key: &str) -> Result<()> {
        self.conn()
            .prepare_cached("INSERT OR REPLACE INTO replay_keys (history_id, key) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(rusqlite::params![history_id, key]))
            .map_err(self.ierr("recording a replay's settings key"))?;
        Ok(())
    }

    /// The settings key of history row `history_id`, if it has one.
    pub fn run_key(&self, history_id: i64) -> Result<Option<String>> {
        self.conn()
            .prepare_cached("SELECT key FROM replay_keys WHERE history_id = ?1")
            .and_then(|mut s| s.query_row([history_id], |r| r.get(0)).optional())
            .map_err(self.ierr("reading a replay's settings key"))
    }
}
