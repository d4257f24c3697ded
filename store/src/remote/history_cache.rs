//! The local copy of a remote's shared history
//! (`DIR/remote-cache/<name>.history.sqlite`, spec/REMOTE.md "Shared
//! history"): the names of the history batches read and their rows, by
//! identity. A [`LocalCopy`] like the index cache (its refresh by names,
//! its file): one LIST of `history/`, a GET per batch not read yet, the
//! rows of batches gone from the remote dropped.

use std::collections::HashSet;
use std::path::Path;

use rusqlite::params;

use super::client::Remote;
use super::error::Result;
use super::history::{batch_key, batch_of_key, decode_batch, HISTORY};
use super::local_copy::{fetch, Layout, LocalCopy};
use crate::HistoryEntry;

/// The copy: history rows by batch.
pub(crate) struct HistoryCache(LocalCopy);

/// A history batch that could not be read, and why (left out).
pub type BadBatch = super::local_copy::BadObject;

const LAYOUT: Layout = Layout {
    suffix: "history.sqlite",
    pragmas: "",
    schema: "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (id INTEGER PRIMARY KEY, name BLOB NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS rows (
  uid TEXT PRIMARY KEY, recording TEXT NOT NULL, batch INTEGER NOT NULL,
  started_at INTEGER NOT NULL, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS rows_recording ON rows (recording);
CREATE INDEX IF NOT EXISTS rows_batch ON rows (batch);
",
    objects: "batches",
    rows: "rows",
    link: "batch",
};

impl HistoryCache {
    /// Open (or create) the history cache of `remote` in store directory
    /// `dir`, emptied when it was filled from another URL.
    pub fn open(dir: &Path, remote: &Remote) -> Result<HistoryCache> {
        LocalCopy::open(dir, remote, &LAYOUT).map(HistoryCache)
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
        let have = self.0.drop_unlisted(&|h| listed.contains(h))?;
        let mut new: Vec<String> = listed
            .iter()
            .filter(|h| !have.contains(*h))
            .map(batch_key)
            .collect();
        new.sort();
        fetch(
            remote,
            new,
            batch_of_key,
            decode_batch,
            &mut |name, rows| self.add(name, &rows),
        )
    }

    /// Record batch `name` with its rows (one transaction). A row already
    /// cached from another batch keeps that one.
    pub fn add(&self, name: &[u8; 32], rows: &[HistoryEntry]) -> Result<()> {
        let err = self.0.err();
        self.0.add(name, &mut |tx, id| {
            let mut ins = tx
                .prepare(
                    "INSERT OR IGNORE INTO rows (uid, recording, batch, started_at, body) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(&err)?;
            for e in rows {
                // Encoding a row that was just decoded does not fail;
                // one that did would only be missing from the copy.
                let Ok(body) = rmp_serde::to_vec_named(e) else {
                    continue;
                };
                ins.execute(params![e.uid, e.recording.to_hex(), id, e.started_at, body])
                    .map_err(&err)?;
            }
            Ok(())
        })
    }

    /// The identities of the cached rows among `uids`.
    pub fn known(&self, uids: &[&str]) -> Result<HashSet<String>> {
        let mut st = self
            .0
            .conn
            .prepare_cached("SELECT 1 FROM rows WHERE uid = ?1")
            .map_err(self.0.err())?;
        let mut out = HashSet::new();
        for u in uids {
            if st.exists([u]).map_err(self.0.err())? {
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
                    .0
                    .conn
                    .prepare(&format!("{sql} WHERE recording = ?1"))
                    .map_err(self.0.err())?;
                for id in ids {
                    let mut q = st.query([id]).map_err(self.0.err())?;
                    while let Some(r) = q.next().map_err(self.0.err())? {
                        take(r).map_err(self.0.err())?;
                    }
                }
            }
            None => {
                let mut st = self.0.conn.prepare(sql).map_err(self.0.err())?;
                let mut q = st.query([]).map_err(self.0.err())?;
                while let Some(r) = q.next().map_err(self.0.err())? {
                    take(r).map_err(self.0.err())?;
                }
            }
        }
        out.sort_by_key(|(at, n, _)| (*at, *n));
        Ok(out.into_iter().map(|(_, _, e)| e).collect())
    }

    /// The names of the cached batches.
    pub fn batches(&self) -> Result<Vec<[u8; 32]>> {
        self.0.names()
    }
}
