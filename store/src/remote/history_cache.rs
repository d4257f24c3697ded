//! The local copy of a remote's shared history
//! (`DIR/remote-cache/<name>.history.sqlite`, spec/REMOTE.md "Shared
//! history"): the names of the history batches read and their rows, by
//! identity. Refreshed incrementally like the index cache: one LIST of
//! `history/`, a GET per batch not read yet, the rows of batches gone from
//! the remote dropped. Only a copy: deleting it costs one full refresh.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

use super::client::Remote;
use super::error::{RemoteError, Result};
use super::history::{batch_key, batch_of_key, decode_batch, HISTORY};
use crate::HistoryEntry;

pub(crate) struct HistoryCache {
    conn: Connection,
    path: PathBuf,
}

/// A history batch that could not be read, and why (left out).
#[derive(Clone, Debug)]
pub struct BadBatch {
    pub key: String,
    pub reason: String,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (id INTEGER PRIMARY KEY, name BLOB NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS rows (
  uid TEXT PRIMARY KEY, recording TEXT NOT NULL, batch INTEGER NOT NULL,
  started_at INTEGER NOT NULL, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS rows_recording ON rows (recording);
CREATE INDEX IF NOT EXISTS rows_batch ON rows (batch);
";

impl HistoryCache {
    /// Open (or create) the history cache of `remote` in store directory
    /// `dir`, emptied when it was filled from another URL.
    pub fn open(dir: &Path, remote: &Remote) -> Result<HistoryCache> {
        let (conn, path) = super::v3::index_cache::open_copy(
            dir,
            remote,
            "history.sqlite",
            "",
            SCHEMA,
            "DELETE FROM rows; DELETE FROM batches;",
        )?;
        Ok(HistoryCache { conn, path })
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> RemoteError + '_ {
        move |e| RemoteError::Cache {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }

    /// Bring the cache up to date with the remote's `history/`: one LIST
    /// (per 1,000 batches), a GET per batch not cached yet; rows of cached
    /// batches no longer listed are dropped first, so a row that moved
    /// into another batch (prune) is read again from it. Returns the
    /// damaged batches (left out, read again by the next refresh).
    pub fn refresh(&mut self, remote: &Remote) -> Result<Vec<BadBatch>> {
        let listed: HashSet<[u8; 32]> = remote
            .list(HISTORY)?
            .iter()
            .filter_map(|k| batch_of_key(k))
            .collect();
        let cached: Vec<(i64, [u8; 32])> = {
            let mut st = self
                .conn
                .prepare("SELECT id, name FROM batches")
                .map_err(self.err())?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, crate::index::hash32(r.get(1)?))))
                .map_err(self.err())?;
            rows.collect::<rusqlite::Result<_>>().map_err(self.err())?
        };
        let have: HashSet<[u8; 32]> = cached.iter().map(|c| c.1).collect();
        let gone: Vec<i64> = cached
            .iter()
            .filter(|c| !listed.contains(&c.1))
            .map(|c| c.0)
            .collect();
        if !gone.is_empty() {
            let tx = self.conn.unchecked_transaction().map_err(self.err())?;
            for id in &gone {
                tx.execute("DELETE FROM rows WHERE batch = ?1", [id])
                    .and_then(|_| tx.execute("DELETE FROM batches WHERE id = ?1", [id]))
                    .map_err(self.err())?;
            }
            tx.commit().map_err(self.err())?;
        }
        let mut new: Vec<String> = listed
            .iter()
            .filter(|h| !have.contains(*h))
            .map(batch_key)
            .collect();
        new.sort();
        let mut bad = Vec::new();
        remote.get_all(new.into_iter(), &mut |key, body| {
            let Some(name) = batch_of_key(&key) else {
                return Ok(());
            };
            // Removed by a prune since the listing: its rows are in the
            // batch that replaced it.
            let Some(body) = body else { return Ok(()) };
            match decode_batch(&body, &name) {
                Ok(rows) => self.add(&name, &rows),
                Err(reason) => {
                    bad.push(BadBatch { key, reason });
                    Ok(())
                }
            }
        })?;
        Ok(bad)
    }

    /// Record batch `name` with its rows (one transaction). A row already
    /// cached from another batch keeps that one.
    pub fn add(&mut self, name: &[u8; 32], rows: &[HistoryEntry]) -> Result<()> {
        let tx = self.conn.unchecked_transaction().map_err(self.err())?;
        let fresh = tx
            .execute(
                "INSERT OR IGNORE INTO batches (name) VALUES (?1)",
                [&name[..]],
            )
            .map_err(self.err())?;
        if fresh == 1 {
            let id = tx.last_insert_rowid();
            let mut ins = tx
                .prepare(
                    "INSERT OR IGNORE INTO rows (uid, recording, batch, started_at, body) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(self.err())?;
            for e in rows {
                // Encoding a row that was just decoded does not fail;
                // one that did would only be missing from the copy.
                let Ok(body) = rmp_serde::to_vec_named(e) else {
                    continue;
                };
                ins.execute(params![e.uid, e.recording.to_hex(), id, e.started_at, body])
                    .map_err(self.err())?;
            }
        }
        tx.commit().map_err(self.err())
    }

    /// The identities of the cached rows among `uids`.
    pub fn known(&self, uids: &[&str]) -> Result<HashSet<String>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT 1 FROM rows WHERE uid = ?1")
            .map_err(self.err())?;
        let mut out = HashSet::new();
        for u in uids {
            if st.exists([u]).map_err(self.err())? {
                out.insert(u.to_string());
            }
        }
        Ok(out)
    }

    /// Cached rows, oldest first (by start, then by the order they were
    /// cached), of the recordings `ids` (hex) or of all. Each row's `id`
    /// is its number in this copy.
    pub fn rows(&self, ids: Option<&[String]>) -> Result<Vec<HistoryEntry>> {
        let mut out: Vec<(i64, i64, HistoryEntry)> = Vec::new();
        let mut take = |r: &rusqlite::Row| -> rusqlite::Result<()> {
            let body: Vec<u8> = r.get(2)?;
            // Written by `add` from a decoded row; a row that no longer
            // decodes (a cache from another build) is left out.
            if let Ok(mut e) = rmp_serde::from_slice::<HistoryEntry>(&body) {
                e.id = r.get(0)?;
                out.push((r.get(1)?, e.id, e));
            }
            Ok(())
        };
        let sql = "SELECT rowid, started_at, body FROM rows";
        match ids {
            Some(ids) => {
                let mut st = self
                    .conn
                    .prepare(&format!("{sql} WHERE recording = ?1"))
                    .map_err(self.err())?;
                for id in ids {
                    let mut q = st.query([id]).map_err(self.err())?;
                    while let Some(r) = q.next().map_err(self.err())? {
                        take(r).map_err(self.err())?;
                    }
                }
            }
            None => {
                let mut st = self.conn.prepare(sql).map_err(self.err())?;
                let mut q = st.query([]).map_err(self.err())?;
                while let Some(r) = q.next().map_err(self.err())? {
                    take(r).map_err(self.err())?;
                }
            }
        }
        out.sort_by_key(|(at, n, _)| (*at, *n));
        Ok(out.into_iter().map(|(_, _, e)| e).collect())
    }

    /// The names of the cached batches.
    pub fn batches(&self) -> Result<Vec<[u8; 32]>> {
        let mut st = self
            .conn
            .prepare("SELECT name FROM batches ORDER BY name")
            .map_err(self.err())?;
        let rows = st
            .query_map([], |r| Ok(crate::index::hash32(r.get(0)?)))
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.err())
    }
}
