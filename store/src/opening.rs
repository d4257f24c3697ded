//! Opening a store: [`Store::open`] and its variants, is the directory a
//! store (marker, index, packs), is its index usable, and creating one
//! (spec/STORE.md, "Opening").

use std::path::{Path, PathBuf};

use rrstore_format::chunk::ChunkParams;
use rusqlite::Connection;

use crate::error::{Result, StoreError};
use crate::{index, layout, marker, recovery, Store};

impl Store {
    /// Open the store at `dir`, creating it (directory, marker, packs,
    /// index) when the directory holds no store.
    pub fn open(dir: impl AsRef<Path>) -> Result<Store> {
        Store::open_mode(dir.as_ref(), true)
    }

    /// Open the existing store at `dir`: [`StoreError::NotAStore`] when the
    /// directory is not one (nothing is created).
    pub fn open_existing(dir: impl AsRef<Path>) -> Result<Store> {
        Store::open_mode(dir.as_ref(), false)
    }

    fn open_mode(dir: &Path, create: bool) -> Result<Store> {
        let opened = open(dir, create)?;
        Ok(Store {
            dir: dir.to_path_buf(),
            conn: opened.conn,
            writers: Vec::new(),
            chunk_params: ChunkParams::default(),
            zstd_level: 3,
            read_only: opened.read_only,
            machine: None,
            meta_sync: crate::recovery::MetaSync::new(dir),
            known: Default::default(),
        })
    }

    /// Open the store at `explicit` (which must be a store already), else
    /// at `settings.dir` or the XDG data directory (created on first use;
    /// see [`layout::resolve_dir`]); its history rows name
    /// `settings.machine`.
    pub fn open_default(explicit: Option<&Path>, settings: &StoreSettings) -> Result<Store> {
        let mut store = match explicit {
            Some(dir) => Store::open_existing(dir)?,
            None => Store::open(default_dir(settings)?)?,
        };
        store.machine = settings.machine.clone();
        Ok(store)
    }

    /// [`Store::open_default`] for commands that write: the store at
    /// `explicit` is created too when it does not exist.
    pub fn open_default_create(explicit: Option<&Path>, settings: &StoreSettings) -> Result<Store> {
        let mut store = match explicit {
            Some(dir) => Store::open(dir)?,
            None => Store::open(default_dir(settings)?)?,
        };
        store.machine = settings.machine.clone();
        Ok(store)
    }
}

/// What the caller sets for the stores it opens by default (the CLI fills
/// it from `RRSTORE_DIR` and `RRSTORE_MACHINE`; the library reads no
/// `RRSTORE_*` variable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreSettings {
    /// The store directory when none is named explicitly (before the XDG
    /// data directory).
    pub dir: Option<PathBuf>,
    /// The machine name history rows get; `None`: the host name.
    pub machine: Option<String>,
}

fn default_dir(settings: &StoreSettings) -> Result<PathBuf> {
    layout::resolve_dir(None, settings.dir.as_deref()).ok_or(StoreError::NoStoreDir)
}

/// An opened index and whether the store is read-only.
pub(crate) struct Opened {
    pub conn: Connection,
    pub read_only: bool,
}

/// Open the store at `dir`; with `create`, make one there when the
/// directory holds no store.
pub(crate) fn open(dir: &Path, create: bool) -> Result<Opened> {
    let not_a_store = |reason: &str| StoreError::NotAStore {
        path: dir.to_path_buf(),
        reason: reason.to_string(),
    };
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => return Err(not_a_store("it is not a directory")),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !create {
                return Err(not_a_store("no such directory"));
            }
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        Err(source) => {
            return Err(StoreError::Dir {
                path: dir.to_path_buf(),
                source,
            })
        }
    }
    let index_path = dir.join(layout::INDEX_FILE);
    let read_only = !index::writable(&index_path);
    let found = marker::read(dir)?;
    let index_exists = std::fs::symlink_metadata(&index_path).is_ok();
    // Without pack files and recording metadata nothing can be lost: an
    // index that is missing, empty or without tables is (re)created, which
    // also finishes a store whose creation was interrupted.
    let nothing_to_lose = !opening_has_data(dir)?;
    if let Some(m) = found {
        let conn = index::open_store_index(&index_path, nothing_to_lose && !read_only)?;
        match index::store_id(&conn, &index_path)? {
            Some(id) if id != m.id => {
                return Err(StoreError::IndexUnusable {
                    path: index_path,
                    reason: format!(
                        "it belongs to another store (ID {id:016x}; this store's is {})",
                        m.id_hex()
                    ),
                })
            }
            None if !read_only => {
                index::set_store_id(&conn, &index_path, m.id)?;
            }
            _ => {}
        }
        ensure_dirs(dir, read_only)?;
        return Ok(Opened { conn, read_only });
    }
    if nothing_to_lose && !index_exists && !create {
        return Err(not_a_store(
            "it has no store marker (config), no index and no pack files",
        ));
    }
    if nothing_to_lose && !read_only {
        ensure_dirs(dir, false)?;
    }
    let conn = match index::open_store_index(&index_path, nothing_to_lose && !read_only) {
        Err(StoreError::IndexUnusable { reason, .. }) if nothing_to_lose => {
            return Err(not_a_store(&format!(
                "it has no store marker and its index.sqlite cannot be used: {reason}"
            )))
        }
        other => other?,
    };
    // A new store, or one from before the marker: recovery metadata for
    // every recording, then the store ID and the marker, last, so an
    // interrupted adoption is redone.
    if !read_only {
        recovery::write_all(&conn, dir, &recovery::MetaSync::new(dir))?;
        let id = index::set_store_id(&conn, &index_path, marker::new_id())?;
        marker::create(dir, id)?;
    }
    ensure_dirs(dir, read_only)?;
    Ok(Opened { conn, read_only })
}

/// Whether the store holds data an index must account for: pack files or
/// recording metadata.
fn opening_has_data(dir: &Path) -> Result<bool> {
    Ok(packs_present(dir) || !recovery::list(dir, layout::META_RECORDINGS)?.is_empty())
}

fn ensure_dirs(dir: &Path, read_only: bool) -> Result<()> {
    if read_only {
        return Ok(());
    }
    let packs = dir.join(layout::PACKS_DIR);
    std::fs::create_dir_all(&packs).map_err(|source| StoreError::Dir {
        path: packs.clone(),
        source,
    })
}

/// Whether `packs/` holds at least one pack file.
pub(crate) fn packs_present(dir: &Path) -> bool {
    layout::pack_files(dir).next().is_some()
}
