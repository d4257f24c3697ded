//! The local cache of a version 3 remote's index objects
//! (`DIR/remote-cache/<name>.sqlite`, spec/REMOTE.md "The local index
//! cache"): which blobs the remote has and where. A [`LocalCopy`] (its
//! refresh by names, its file): only index objects not yet cached are
//! fetched, rows of index objects gone from the remote are dropped.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{params, OptionalExtension};

use crate::remote::client::Remote;
use crate::remote::error::Result;
use crate::remote::local_copy::{fetch, Layout, LocalCopy};
use crate::remote::v3::{self, Entry, Kind};

/// The copy: blobs by index object.
pub(crate) struct Cache(LocalCopy);

/// An index object listed on the remote and not cached yet.
#[derive(Clone, Debug)]
pub struct Uncached {
    pub key: String,
    pub size: u64,
}

/// An index object that could not be used, and why.
pub type BadIndex = crate::remote::local_copy::BadObject;

const LAYOUT: Layout = Layout {
    suffix: "sqlite",
    // A page cache large enough that a million random-keyed rows do not
    // thrash it.
    pragmas: "PRAGMA cache_size = -65536;",
    schema: "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS idx (id INTEGER PRIMARY KEY, name BLOB NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS blobs (
  kind INTEGER NOT NULL, name BLOB NOT NULL, idx INTEGER NOT NULL,
  pack BLOB NOT NULL, offset INTEGER NOT NULL, len INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS blobs_name ON blobs (name, kind);
CREATE INDEX IF NOT EXISTS blobs_idx ON blobs (idx);
",
    objects: "idx",
    rows: "blobs",
    link: "idx",
};

impl Cache {
    /// Open (or create) the cache of `remote` in store directory `dir`,
    /// emptied when it was filled from another URL.
    pub fn open(dir: &Path, remote: &Remote) -> Result<Cache> {
        LocalCopy::open(dir, remote, &LAYOUT).map(Cache)
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
        let have = self.0.drop_unlisted(&|h| listed.contains_key(h))?;
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
        fetch(
            remote,
            keys,
            v3::index_of_key,
            v3::decode_index,
            &mut |name, entries| {
                seen(&entries);
                self.add(name, &entries)
            },
        )
    }

    /// Record index object `name` with its entries (one transaction): it
    /// is then cached whole, so only ever with all of its entries.
    pub fn add(&self, name: &[u8; 32], entries: &[Entry]) -> Result<()> {
        let err = self.0.err();
        self.0.add(name, &mut |tx, id| {
            let mut ins = tx
                .prepare(
                    "INSERT INTO blobs (kind, name, idx, pack, offset, len) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(&err)?;
            for e in entries {
                ins.execute(params![
                    e.kind as u8,
                    &e.name[..],
                    id,
                    &e.pack[..],
                    e.offset as i64,
                    e.len
                ])
                .map_err(&err)?;
            }
            Ok(())
        })
    }

    /// Where blob `name` of `kind` is, if any index object lists it.
    pub fn lookup(&self, kind: Kind, name: &[u8; 32]) -> Result<Option<Entry>> {
        self.0
            .conn
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
            .map_err(self.0.err())
    }
}

impl Cache {
    /// Every cached entry, in pack order (for `verify NAME:`).
    pub fn each(&self, f: &mut dyn FnMut(Entry) -> Result<()>) -> Result<()> {
        let err = self.0.err();
        let mut st = self
            .0
            .conn
            .prepare("SELECT kind, name, pack, offset, len FROM blobs ORDER BY pack, offset")
            .map_err(&err)?;
        let mut rows = st.query([]).map_err(&err)?;
        while let Some(r) = rows.next().map_err(&err)? {
            let kind: u8 = r.get(0).map_err(&err)?;
            let e = Entry {
                kind: Kind::from_u8(kind).unwrap_or(Kind::Chunk),
                name: crate::index::hash32(r.get(1).map_err(&err)?),
                pack: crate::index::hash32(r.get(2).map_err(&err)?),
                offset: r.get::<_, i64>(3).map_err(&err)? as u64,
                len: r.get(4).map_err(&err)?,
            };
            f(e)?;
        }
        Ok(())
    }
}
