//! The SQLite index: opening it (WAL, busy timeout, migrations) and small
//! helpers shared by the modules that query it.

pub mod schema;

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Result, StoreError};

/// Open (creating and migrating when `create`) the index at `path`.
pub fn open(path: &Path, create: bool) -> Result<Connection> {
    let err = |context: &str, source| StoreError::Index {
        path: path.to_path_buf(),
        context: context.to_string(),
        source,
    };
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags).map_err(|e| err("cannot open", e))?;
    conn.busy_timeout(Duration::from_secs(60))
        .map_err(|e| err("setting the busy timeout", e))?;
    conn.pragma_update(None, "journal_mode", "wal")
        .map_err(|e| err("switching to WAL mode", e))?;
    conn.pragma_update(None, "synchronous", "full")
        .map_err(|e| err("setting synchronous=full", e))?;
    conn.pragma_update(None, "foreign_keys", "off")
        .map_err(|e| err("pragma", e))?;
    // Reads through a memory map and a 64 MiB page cache: `ls` over 100,000
    // recordings and chunk lookups on import avoid a syscall per page.
    conn.pragma_update(None, "mmap_size", 1i64 << 30)
        .map_err(|e| err("setting mmap_size", e))?;
    conn.pragma_update(None, "cache_size", -65536)
        .map_err(|e| err("setting cache_size", e))?;
    conn.set_prepared_statement_cache_capacity(64);
    migrate(&conn, path)?;
    Ok(conn)
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
