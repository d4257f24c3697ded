//! The SQLite index: opening it (WAL, busy timeout, migrations; read-only
//! on a store that cannot be written; space kept for the `-shm` file so
//! that a store on a full disk opens, [`shm_reserve`]; checked to be
//! an rrstore index when a store is opened), typed row lookups
//! ([`lookup`]) and the one path that writes stored data into it
//! ([`write`], [`recording_rows`]).
//!
//! Invariant: chunks, parts and the rows that keep them (recordings,
//! images, object links) enter the index only through [`write::commit`]:
//! one transaction that re-checks every reused row gc may have deleted and
//! inserts all rows or none (spec/STORE.md, "Index writes").

pub(crate) mod lookup;
pub(crate) mod recording_rows;
pub mod schema;
mod shm_reserve;
pub(crate) mod write;

pub(crate) use shm_reserve::is_shm_full;

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Result, StoreError};

/// Open (creating and migrating when `create`) the index at `path`. A
/// store whose directory cannot be written (read-only mount) is opened
/// read-only instead (see [`open_read_only`]).
pub fn open(path: &Path, create: bool) -> Result<Connection> {
    if !writable(path) {
        return open_read_only(path);
    }
    let conn = connect(path, create)?;
    configure(&conn, path)?;
    migrate(&conn, path)?;
    Ok(conn)
}

/// Open the index of an existing store, checking first that it is one:
/// a missing, empty, non-SQLite or foreign index is
/// [`StoreError::IndexUnusable`] (nothing is created over it). With
/// `fresh`, an index without tables gets the schema (a store being
/// created).
pub(crate) fn open_store_index(path: &Path, fresh: bool) -> Result<Connection> {
    let unusable = |reason: String| StoreError::IndexUnusable {
        path: path.to_path_buf(),
        reason,
    };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !fresh => {
            return Err(unusable("it is missing".into()))
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(StoreError::io(path, e)),
        Ok(m) if m.len() == 0 && !fresh => return Err(unusable("it is empty (0 bytes)".into())),
        _ => {}
    }
    let read_only = !writable(path);
    let conn = if read_only {
        read_only_connection(path)?
    } else {
        connect(path, fresh)?
    };
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => {
                unusable("it is not an SQLite database".into())
            }
            _ => StoreError::Index {
                path: path.to_path_buf(),
                context: "listing its tables".into(),
                source: e,
            },
        })?;
    let ours = tables.iter().any(|t| t == "meta") && tables.iter().any(|t| t == "recordings");
    let acceptable = ours || (fresh && tables.is_empty());
    if !acceptable {
        return Err(unusable(if tables.is_empty() {
            "it holds no tables".into()
        } else {
            format!(
                "it is not an rrstore index (its tables are {})",
                tables.join(", ")
            )
        }));
    }
    if read_only {
        check_version_read_only(&conn, path)?;
    } else {
        configure(&conn, path)?;
        migrate(&conn, path)?;
    }
    Ok(conn)
}

/// Whether the index at `path` (and the store directory holding it) can be
/// written. `access` is used rather than the permission bits because root
/// passes those but not a read-only mount.
pub fn writable(path: &Path) -> bool {
    use rustix::fs::{access, Access};
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    access(dir, Access::WRITE_OK).is_ok()
        && (access(path, Access::EXISTS).is_err() || access(path, Access::WRITE_OK).is_ok())
}

fn connect(path: &Path, create: bool) -> Result<Connection> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    shm_reserve::open(path, flags).map_err(|source| StoreError::Index {
        path: path.to_path_buf(),
        context: "cannot open".into(),
        source,
    })
}

fn configure(conn: &Connection, path: &Path) -> Result<()> {
    let err = |context: &str, source| StoreError::Index {
        path: path.to_path_buf(),
        context: context.to_string(),
        source,
    };
    conn.busy_timeout(Duration::from_secs(60))
        .map_err(|e| err("setting the busy timeout", e))?;
    conn.pragma_update(None, "journal_mode", "wal")
        .map_err(|e| err("switching to WAL mode", e))?;
    conn.pragma_update(None, "synchronous", "full")
        .map_err(|e| err("setting synchronous=full", e))?;
    conn.pragma_update(None, "foreign_keys", "off")
        .map_err(|e| err("pragma", e))?;
    read_tuning(conn, path)
}

/// Reads through a memory map and a 64 MiB page cache: `ls` over 100,000
/// recordings and chunk lookups on import avoid a syscall per page.
fn read_tuning(conn: &Connection, path: &Path) -> Result<()> {
    let err = |context: &str, source| StoreError::Index {
        path: path.to_path_buf(),
        context: context.to_string(),
        source,
    };
    conn.pragma_update(None, "mmap_size", 1i64 << 30)
        .map_err(|e| err("setting mmap_size", e))?;
    conn.pragma_update(None, "cache_size", -65536)
        .map_err(|e| err("setting cache_size", e))?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// Open the index of a store that cannot be written. SQLite needs to write
/// the `-shm` file of a WAL database even to read it, so: `mode=ro` when a
/// `-wal` (with its `-shm`) is there to be read, else `immutable=1` (there
/// is no log to miss, and no lock or `-shm` file is created).
pub fn open_read_only(path: &Path) -> Result<Connection> {
    let conn = read_only_connection(path)?;
    check_version_read_only(&conn, path)?;
    Ok(conn)
}

fn read_only_connection(path: &Path) -> Result<Connection> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let has_wal = std::fs::metadata(&wal)
        .map(|m| m.len() > 0)
        .unwrap_or(false);
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let try_open = |query: &str| -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags(format!("file:{}?{query}", uri_path(path)), flags)?;
        conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))?;
        Ok(conn)
    };
    let conn = if has_wal {
        // Without a readable `-shm` the log cannot be used; the database
        // file alone is then the best there is.
        try_open("mode=ro").or_else(|_| try_open("immutable=1"))
    } else {
        try_open("immutable=1")
    }
    .map_err(|source| StoreError::Index {
        path: path.to_path_buf(),
        context: "cannot open read-only".into(),
        source,
    })?;
    conn.busy_timeout(Duration::from_secs(60))
        .map_err(|source| StoreError::Index {
            path: path.to_path_buf(),
            context: "setting the busy timeout".into(),
            source,
        })?;
    read_tuning(&conn, path)?;
    Ok(conn)
}

/// A read-only index cannot be migrated: it must have this build's schema.
fn check_version_read_only(conn: &Connection, path: &Path) -> Result<()> {
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|source| StoreError::Index {
            path: path.to_path_buf(),
            context: "reading the schema version".into(),
            source,
        })?;
    if version > schema::SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            supported: schema::SCHEMA_VERSION,
        });
    }
    if version < schema::SCHEMA_VERSION {
        return Err(StoreError::OldSchemaReadOnly {
            path: path.to_path_buf(),
            found: version,
            supported: schema::SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// A path as the file part of an SQLite URI (percent-encoded).
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/._-~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The store ID recorded in the index (`meta.store_id`), if any.
pub(crate) fn store_id(conn: &Connection, path: &Path) -> Result<Option<u64>> {
    use rusqlite::OptionalExtension;
    conn.query_row("SELECT value FROM meta WHERE key = 'store_id'", [], |r| {
        r.get::<_, i64>(0)
    })
    .optional()
    .map(|v| v.map(u))
    .map_err(|source| StoreError::Index {
        path: path.to_path_buf(),
        context: "reading the store ID".into(),
        source,
    })
}

/// Record `id` as the store ID unless one is there; returns the one kept.
pub(crate) fn set_store_id(conn: &Connection, path: &Path, id: u64) -> Result<u64> {
    conn.execute(
        "INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?1)",
        [i(id)],
    )
    .map_err(|source| StoreError::Index {
        path: path.to_path_buf(),
        context: "recording the store ID".into(),
        source,
    })?;
    Ok(store_id(conn, path)?.unwrap_or(id))
}

fn migrate(conn: &Connection, path: &Path) -> Result<()> {
    let err = |context: &str, source| StoreError::Index {
        path: path.to_path_buf(),
        context: context.to_string(),
        source,
    };
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| err("reading the schema version", e))?;
    if version > schema::SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            supported: schema::SCHEMA_VERSION,
        });
    }
    if version == schema::SCHEMA_VERSION {
        return Ok(());
    }
    // Serialize concurrent first opens: the write lock is taken up front and
    // the version re-read under it.
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| err("locking the index to create its schema", e))?;
    let result = (|| {
        let mut v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        while v < schema::SCHEMA_VERSION {
            conn.execute_batch(schema::MIGRATIONS[v as usize])?;
            v += 1;
            conn.pragma_update(None, "user_version", v)?;
        }
        Ok::<_, rusqlite::Error>(())
    })();
    match result {
        Ok(()) => conn
            .execute_batch("COMMIT")
            .map_err(|e| err("committing the schema", e)),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(err("creating the schema", e))
        }
    }
}

/// The error of an index statement run for `context` (what was being
/// done) on the index at `path`.
pub(crate) fn err<'a>(
    path: &'a Path,
    context: &'a str,
) -> impl Fn(rusqlite::Error) -> StoreError + 'a {
    move |source| StoreError::Index {
        path: path.to_path_buf(),
        context: context.to_string(),
        source,
    }
}

/// Convert an index value to the u64 it stands for (SQLite stores i64).
pub fn u(v: i64) -> u64 {
    v as u64
}

/// Convert a u64 to the i64 SQLite stores (bit pattern preserved).
pub fn i(v: u64) -> i64 {
    v as i64
}

/// Read a 32-byte BLOB column.
pub fn hash32(v: Vec<u8>) -> [u8; 32] {
    let mut out = [0u8; 32];
    if v.len() == 32 {
        out.copy_from_slice(&v);
    }
    out
}
