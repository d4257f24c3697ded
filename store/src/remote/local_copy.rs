//! A local SQLite copy of a set of a remote's content-named objects
//! (`DIR/remote-cache/<remote name>.<suffix>`): the index objects of a
//! version 3 remote (`v3::index_cache`) and the history batches
//! (`history_cache`). One table lists the objects cached (`id`, `name`),
//! another holds their rows, each naming its object by `id`. An object is
//! cached whole (with all its rows, one transaction) or not at all, so the
//! copy is refreshed by names alone: one LIST, the rows of objects no
//! longer listed dropped, a GET per listed object not cached yet. Only a
//! copy: deleting it costs one full refresh; a copy filled from another
//! URL is emptied when opened.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Transaction};

use super::client::Remote;
use super::error::{RemoteError, Result};

/// Where a kind of copy lives and its tables.
pub(crate) struct Layout {
    /// The file: `<remote name>.<suffix>`.
    pub suffix: &'static str,
    /// Applied after WAL mode (a page cache size, ...).
    pub pragmas: &'static str,
    /// The tables; `meta (key, value)` among them, for the URL.
    pub schema: &'static str,
    /// The table of objects cached (`id`, `name`).
    pub objects: &'static str,
    /// The table of their rows, and its column naming the object's `id`.
    pub rows: &'static str,
    pub link: &'static str,
}

/// An object listed on the remote that could not be used (left out), and
/// why.
#[derive(Clone, Debug)]
pub struct BadObject {
    pub key: String,
    pub reason: String,
}

/// An open copy.
pub(crate) struct LocalCopy {
    pub conn: Connection,
    pub path: PathBuf,
    layout: &'static Layout,
}

impl LocalCopy {
    /// Open (or create) the copy of `remote` in store directory `dir`: WAL
    /// without fsyncs (a copy is rebuilt from the remote when lost), the
    /// layout's pragmas and schema applied, emptied when it was filled
    /// from another URL.
    pub fn open(dir: &Path, remote: &Remote, layout: &'static Layout) -> Result<LocalCopy> {
        let cdir = dir.join("remote-cache");
        let path = cdir.join(format!("{}.{}", remote.name, layout.suffix));
        let err = |e: String| RemoteError::Cache {
            path: path.clone(),
            reason: e,
        };
        std::fs::create_dir_all(&cdir).map_err(|e| err(e.to_string()))?;
        let conn = Connection::open(&path).map_err(|e| err(e.to_string()))?;
        conn.busy_timeout(Duration::from_secs(60))
            .map_err(|e| err(e.to_string()))?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;")
            .and_then(|()| conn.execute_batch(layout.pragmas))
            .and_then(|()| conn.execute_batch(layout.schema))
            .map_err(|e| err(e.to_string()))?;
        let url: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'url'", [], |r| r.get(0))
            .optional()
            .map_err(|e| err(e.to_string()))?;
        if url.as_deref() != Some(remote.url.as_str()) {
            let clear = format!(
                "DELETE FROM {}; DELETE FROM {};",
                layout.rows, layout.objects
            );
            conn.execute_batch(&clear).map_err(|e| err(e.to_string()))?;
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('url', ?1)",
                [&remote.url],
            )
            .map_err(|e| err(e.to_string()))?;
        }
        Ok(LocalCopy { conn, path, layout })
    }

    /// A SQLite error, as an error about this copy.
    pub fn err(&self) -> impl Fn(rusqlite::Error) -> RemoteError + '_ {
        move |e| RemoteError::Cache {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }

    /// Drop the cached objects that `listed` says the remote no longer
    /// lists, with their rows (one transaction); the names of those kept.
    pub fn drop_unlisted(&self, listed: &dyn Fn(&[u8; 32]) -> bool) -> Result<HashSet<[u8; 32]>> {
        let Layout {
            objects,
            rows,
            link,
            ..
        } = self.layout;
        let cached: Vec<(i64, [u8; 32])> = {
            let mut st = self
                .conn
                .prepare(&format!("SELECT id, name FROM {objects}"))
                .map_err(self.err())?;
            let found = st
                .query_map([], |r| Ok((r.get(0)?, crate::index::hash32(r.get(1)?))))
                .map_err(self.err())?;
            found.collect::<rusqlite::Result<_>>().map_err(self.err())?
        };
        let (kept, gone): (Vec<_>, Vec<_>) = cached.into_iter().partition(|c| listed(&c.1));
        if !gone.is_empty() {
            let tx = self.conn.unchecked_transaction().map_err(self.err())?;
            for (id, _) in &gone {
                tx.execute(&format!("DELETE FROM {rows} WHERE {link} = ?1"), [id])
                    .and_then(|_| tx.execute(&format!("DELETE FROM {objects} WHERE id = ?1"), [id]))
                    .map_err(self.err())?;
            }
            tx.commit().map_err(self.err())?;
        }
        Ok(kept.into_iter().map(|c| c.1).collect())
    }

    /// Cache object `name` with the rows `fill(transaction, its id)`
    /// inserts, in one transaction; an object cached already is left as
    /// it is.
    pub fn add(
        &self,
        name: &[u8; 32],
        fill: &mut dyn FnMut(&Transaction, i64) -> Result<()>,
    ) -> Result<()> {
        // `&self`: a copy is used from one thread, and a pull adds index
        // objects while it looks blobs up.
        let tx = self.conn.unchecked_transaction().map_err(self.err())?;
        let fresh = tx
            .execute(
                &format!(
                    "INSERT OR IGNORE INTO {} (name) VALUES (?1)",
                    self.layout.objects
                ),
                [&name[..]],
            )
            .map_err(self.err())?;
        if fresh == 1 {
            fill(&tx, tx.last_insert_rowid())?;
        }
        tx.commit().map_err(self.err())
    }

    /// The names of the cached objects, sorted.
    pub fn names(&self) -> Result<Vec<[u8; 32]>> {
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT name FROM {} ORDER BY name",
                self.layout.objects
            ))
            .map_err(self.err())?;
        let found = st
            .query_map([], |r| Ok(crate::index::hash32(r.get(0)?)))
            .map_err(self.err())?;
        found.collect::<rusqlite::Result<_>>().map_err(self.err())
    }
}

/// GET the objects `keys` (named by `name_of` their key) and hand each
/// that `decode` reads to `keep`; returns those that it cannot read (left
/// out). An object removed since the listing (by a prune, which wrote
/// what it held elsewhere) is passed over.
pub(crate) fn fetch<T>(
    remote: &Remote,
    keys: Vec<String>,
    name_of: fn(&str) -> Option<[u8; 32]>,
    decode: fn(&[u8], &[u8; 32]) -> std::result::Result<T, String>,
    keep: &mut dyn FnMut(&[u8; 32], T) -> Result<()>,
) -> Result<Vec<BadObject>> {
    let mut bad = Vec::new();
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let Some(name) = name_of(&key) else {
            return Ok(());
        };
        let Some(body) = body else { return Ok(()) };
        match decode(&body, &name) {
            Ok(rows) => keep(&name, rows),
            Err(reason) => {
                bad.push(BadObject { key, reason });
                Ok(())
            }
        }
    })?;
    Ok(bad)
}
