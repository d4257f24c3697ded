//! Space kept for SQLite's WAL index, so that a store on a full disk can
//! still be opened (spec/STORE.md, "Opening").
//!
//! SQLite keeps the index of a WAL database's log in `index.sqlite-shm`, a
//! cache it rebuilds from the `-wal` file: the first connection cuts it to
//! 3 bytes and grows it again, writing a byte into each page (32 KiB per
//! 4096 log frames), and the last one to close deletes it. On a file
//! system with no free page that write fails, and so does every statement,
//! reads included (SQLITE_IOERR_SHMSIZE, "disk I/O error").
//!
//! So the store keeps [`SHM_RESERVE`]: a 64 KiB file beside the index,
//! made when the file system has room. When the first read of a connection
//! fails for want of space to grow the `-shm` file, the reserve is deleted,
//! giving its pages back, and the connection is opened again. The reserve
//! holds no data (deleting it loses nothing; two processes deleting it at
//! once is harmless) and an open makes it again once [`ROOM`] is free.
//! SQLite's `locking_mode=EXCLUSIVE`, which keeps the WAL index in memory,
//! is no way out: its lock shuts out the other connections a command opens
//! itself (the listing's second thread, part readers).

use std::io::Write;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::layout::SHM_RESERVE;

/// Size of the reserve: the `-shm` file's first region (32 KiB, a log of up
/// to 4096 frames) and a second.
const RESERVE_BYTES: usize = 64 * 1024;

/// Free space needed before the reserve is made again: making it must not
/// take the last pages a command is about to need.
const ROOM: u64 = 4 << 20;

/// Whether `e` is SQLite failing to grow the `-shm` file
/// (SQLITE_IOERR_SHMSIZE): its write of the new pages failed, which in
/// practice means the file system (or, for tmpfs, memory) is full.
pub(crate) fn is_shm_full(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _) if f.extended_code == rusqlite::ffi::SQLITE_IOERR_SHMSIZE
    )
}

/// Open the store index at `path` with `flags`. When its first read
/// cannot grow the `-shm` file, the reserve is given back and the index
/// opened once more; without a reserve, that first error is returned.
pub(crate) fn open(path: &Path, flags: OpenFlags) -> rusqlite::Result<Connection> {
    let reserve = path.with_file_name(SHM_RESERVE);
    let conn = Connection::open_with_flags(path, flags)?;
    match first_read(&conn) {
        Err(e) if is_shm_full(&e) => {
            // Closed before the retry, so that the retry is again the first
            // connection and rebuilds the `-shm` file into the freed pages.
            // Closing deletes nothing: SQLite removes the `-wal` file only
            // after copying all of it into the database, which needs the
            // `-shm` file it could not map.
            drop(conn);
            if std::fs::remove_file(&reserve).is_err() {
                return Err(e);
            }
            let conn = Connection::open_with_flags(path, flags)?;
            first_read(&conn)?;
            Ok(conn)
        }
        // Other errors (not a database, corrupt, busy) are for the
        // caller's own first statement to report with its context.
        _ => {
            remake(&reserve);
            Ok(conn)
        }
    }
}

/// A read that opens the WAL (and so maps the `-shm` file).
fn first_read(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
}

/// Make the reserve at `reserve` if it is missing and there is room. Best
/// effort: a store without one works as before, it only cannot be opened
/// while its disk is full.
fn remake(reserve: &Path) {
    if std::fs::symlink_metadata(reserve).is_ok() {
        return;
    }
    let Some(dir) = reserve.parent() else { return };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let room = rustix::fs::statvfs(dir)
        .map(|v| v.f_bavail.saturating_mul(v.f_frsize))
        .unwrap_or(0);
    if room < ROOM {
        return;
    }
    // `create_new`: of two processes making it at once, one writes it.
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(reserve)
        .and_then(|mut f| f.write_all(&filler()));
    if let Err(e) = made {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            let _ = std::fs::remove_file(reserve);
        }
    }
}

/// The reserve's bytes: not zeros, which a compressing or deduplicating
/// file system would store in no space at all (xorshift, fixed seed).
fn filler() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(RESERVE_BYTES);
    while out.len() < RESERVE_BYTES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}
