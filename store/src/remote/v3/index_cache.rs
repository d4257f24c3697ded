//! The local cache of a version 3 remote's index objects
//! (`DIR/remote-cache/<name>.sqlite`, spec/REMOTE.md "The local index
//! cache"): which blobs the remote has and where. Refreshed incrementally:
//! only index objects not yet cached are fetched, rows of index objects
//! gone from the remote are dropped. Only a copy: deleting it costs one
//! full refresh.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use crate::remote::client::Remote;
use crate::remote::error::{RemoteError, Result};
use crate::remote::v3::{self, Entry, Kind};

pub(crate) struct Cache {
    conn: Connection,
    path: PathBuf,
}

/// An index object listed on the remote and not cached yet.
#[derive(Clone, Debug)]
pub struct Uncached {
    pub key: String,
    pub size: u64,
}

/// An index object that could not be used, and why.
#[derive(Clone, Debug)]
pub struct BadIndex {
    pub key: String,
    pub reason: String,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS idx (id INTEGER PRIMARY KEY, name BLOB NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS blobs (
  kind INTEGER NOT NULL, name BLOB NOT NULL, idx INTEGER NOT NULL,
  pack BLOB NOT NULL, offset INTEGER NOT NULL, len INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS blobs_name ON blobs (name, kind);
CREATE INDEX IF NOT EXISTS blobs_idx ON blobs (idx);
";

/// Open (or create) `DIR/remote-cache/<remote name>.<suffix>`, a local
/// copy of what `remote` holds, for the index cache here and the history
/// cache (`history_cache.rs`): WAL without fsyncs (a copy is rebuilt from
/// the remote when lost), `pragmas` and `schema` applied, and `clear` run
/// when the copy was filled from another URL.
pub(crate) fn open_copy(
    dir: &Path,
    remote: &Remote,
    suffix: &str,
    pragmas: &str,
    schema: &str,
    clear: &str,
) -> Result<(Connection, PathBuf)> {
    let cdir = dir.join("remote-cache");
    let path = cdir.join(format!("{}.{suffix}", remote.name));
    let err = |e: String| RemoteError::Cache {
        path: path.clone(),
        reason: e,
    };
    std::fs::create_dir_all(&cdir).map_err(|e| err(e.to_string()))?;
    let conn = Connection::open(&path).map_err(|e| err(e.to_string()))?;
    conn.busy_timeout(Duration::from_secs(60))
        .map_err(|e| err(e.to_string()))?;
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;")
        .and_then(|()| conn.execute_batch(pragmas))
        .and_then(|()| conn.execute_batch(schema))
        .map_err(|e| err(e.to_string()))?;
    let url: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'url'", [], |r| r.get(0))
        .optional()
        .map_err(|e| err(e.to_string()))?;
    if url.as_deref() != Some(remote.url.as_str()) {
        conn.execute_batch(clear).map_err(|e| err(e.to_string()))?;
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('url', ?1)",
            [&remote.url],
        )
        .map_err(|e| err(e.to_string()))?;
    }
    Ok((conn, path))
}

impl Cache {
    /// Open (or create) the cache of `remote` in store directory `dir`,
    /// emptied when it was filled from another URL.
    pub fn open(dir: &Path, remote: &Remote) -> Result<Cache> {
        // A page cache large enough that a million random-keyed rows do
        // not thrash it.
        let (conn, path) = open_copy(
            dir,
            remote,
            "sqlite",
            "PRAGMA cache_size = -65536;",
            SCHEMA,
            "DELETE FROM blobs; DELETE FROM idx;",
        )?;
        Ok(Cache { conn, path })
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> RemoteError + '_ {
        move |e| RemoteError::Cache {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }

    /// Bring the cache up to date with the remote's `index/`: one LIST, a
    /// GET per index object not cached yet. Returns the index objects that
    /// are damaged (left out).
    pub fn refresh(&mut self, remote: &Remote) -> Result<Vec<BadIndex>> {
        let new = self.sync_listing(remote)?;
        let keys: Vec<String> = new.into_iter().map(|n| n.key).collect();
        self.fetch_whole(remote, keys)
    }

    /// LIST `index/`, drop the rows of cached index objects no longer
    /// listed, and return the listed ones not cached yet (a pull reads
    /// those lazily, `cold_lookup`), sorted by key.
    pub fn sync_listing(&mut self, remote: &Remote) -> Result<Vec<Uncached>> {
        let listed = remote.list_sized(v3::INDEX)?;
        self.sync_listed(&listed)
    }

    /// [`Cache::sync_listing`] with the LIST of `index/` made already.
    pub fn sync_listed(&mut self, listed: &[(String, u64)]) -> Result<Vec<Uncached>> {
        let listed: HashMap<[u8; 32], u64> = listed
            .iter()
            .filter_map(|(k, n)| Some((v3::index_of_key(k)?, *n)))
            .collect();
        let cached: Vec<(i64, [u8; 32])> = {
            let mut st = self
                .conn
                .prepare("SELECT id, name FROM idx")
                .map_err(self.err())?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, crate::index::hash32(r.get(1)?))))
                .map_err(self.err())?;
            rows.collect::<rusqlite::Result<_>>().map_err(self.err())?
        };
        let have: HashSet<[u8; 32]> = cached.iter().map(|c| c.1).collect();
        let gone: Vec<i64> = cached
            .iter()
            .filter(|c| !listed.contains_key(&c.1))
            .map(|c| c.0)
            .collect();
        if !gone.is_empty() {
            let tx = self.conn.transaction().map_err(|e| RemoteError::Cache {
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
            for id in &gone {
                tx.execute("DELETE FROM blobs WHERE idx = ?1", [id])
                    .and_then(|_| tx.execute("DELETE FROM idx WHERE id = ?1", [id]))
                    .map_err(|e| RemoteError::Cache {
                        path: self.path.clone(),
                        reason: e.to_string(),
                    })?;
            }
            tx.commit().map_err(|e| RemoteError::Cache {
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
        }
        let mut new: Vec<Uncached> = listed
            .iter()
            .filter(|(h, _)| !have.contains(*h))
            .map(|(h, n)| Uncached {
                key: v3::index_key(h),
                size: *n,
            })
            .collect();
        new.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(new)
    }

    /// GET index objects `keys` whole and cache them; returns those that
    /// are damaged (left out).
    pub fn fetch_whole(&self, remote: &Remote, keys: Vec<String>) -> Result<Vec<BadIndex>> {
        self.fetch_whole_with(remote, keys, &mut |_| {})
    }

    /// [`Cache::fetch_whole`], handing `seen` the entries of each object
    /// cached.
    pub fn fetch_whole_with(
        &self,
        remote: &Remote,
        keys: Vec<String>,
        seen: &mut dyn FnMut(&[Entry]),
    ) -> Result<Vec<BadIndex>> {
        let mut bad = Vec::new();
        remote.get_all(keys.into_iter(), &mut |key, body| {
            let Some(name) = v3::index_of_key(&key) else {
                return Ok(());
            };
            // Removed by a prune since the listing: nothing to cache.
            let Some(body) = body else { return Ok(()) };
            match v3::decode_index(&body, &name) {
                Ok(entries) => {
                    seen(&entries);
                    self.add(&name, &entries)
                }
                Err(reason) => {
                    bad.push(BadIndex { key, reason });
                    Ok(())
                }
            }
        })?;
        Ok(bad)
    }

    /// Record index object `name` with its entries (one transaction): it
    /// is then cached whole, so only ever with all of its entries.
    pub fn add(&self, name: &[u8; 32], entries: &[Entry]) -> Result<()> {
        let path = self.path.clone();
        let err = |e: rusqlite::Error| RemoteError::Cache {
            path: path.clone(),
            reason: e.to_string(),
        };
        // `&self`: the cache is used from one thread, and a pull adds index
        // objects while it looks blobs up.
        let tx = self.conn.unchecked_transaction().map_err(err)?;
        let fresh = tx
            .execute("INSERT OR IGNORE INTO idx (name) VALUES (?1)", [&name[..]])
            .map_err(err)?;
        if fresh == 1 {
            let id = tx.last_insert_rowid();
            let mut ins = tx
                .prepare(
                    "INSERT INTO blobs (kind, name, idx, pack, offset, len) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(err)?;
            for e in entries {
                ins.execute(params![
                    e.kind as u8,
                    &e.name[..],
                    id,
                    &e.pack[..],
                    e.offset as i64,
                    e.len
                ])
                .map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    /// Where blob `name` of `kind` is, if any index object lists it.
    pub fn lookup(&self, kind: Kind, name: &[u8; 32]) -> Result<Option<Entry>> {
        self.conn
            .prepare_cached(
                "SELECT pack, offset, len FROM blobs WHERE name = ?1 AND kind = ?2 LIMIT 1",
            )
            .and_then(|mut st| {
                st.query_row(params![&name[..], kind as u8], |r| {
                    Ok(Entry {
                        kind,
                        name: *name,
                        pack: crate::index::hash32(r.get(0)?),
                        offset: r.get::<_, i64>(1)? as u64,
                        len: r.get(2)?,
                    })
                })
                .optional()
            })
            .map_err(self.err())
    }
}

impl Cache {
    /// Every cached entry, in pack order (for `verify NAME:`).
    pub fn each(&self, f: &mut dyn FnMut(Entry) -> Result<()>) -> Result<()> {
        let mut st = self
            .conn
            .prepare("SELECT kind, name, pack, offset, len FROM blobs ORDER BY pack, offset")
            .map_err(self.err())?;
        let mut rows = st.query([]).map_err(self.err())?;
        while let Some(r) = rows.next().map_err(self.err())? {
            let kind: u8 = r.get(0).map_err(self.err())?;
            let e = Entry {
                kind: Kind::from_u8(kind).unwrap_or(Kind::Chunk),
                name: crate::index::hash32(r.get(1).map_err(self.err())?),
                pack: crate::index::hash32(r.get(2).map_err(self.err())?),
                offset: r.get::<_, i64>(3).map_err(self.err())? as u64,
                len: r.get(4).map_err(self.err())?,
            };
            f(e)?;
        }
        Ok(())
    }
}
