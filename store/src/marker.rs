//! The store marker (`DIR/config`): the file that makes a directory a store
//! even when its index is gone. Three text lines: magic, format version,
//! store ID (spec/STORE.md, "Store marker").

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};
use crate::layout;

const MAGIC_LINE: &str = "rrstore store";
/// Store format version written in the marker.
pub const STORE_FORMAT: u32 = 1;

/// A parsed marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub format: u32,
    pub id: u64,
}

impl Marker {
    /// The ID as 16 hex digits.
    pub fn id_hex(&self) -> String {
        format!("{:016x}", self.id)
    }

    fn encode(&self) -> String {
        format!(
            "{MAGIC_LINE}\nformat {}\nid {}\n",
            self.format,
            self.id_hex()
        )
    }
}

fn path(dir: &Path) -> PathBuf {
    dir.join(layout::CONFIG_FILE)
}

/// The marker of the store at `dir`, `None` when there is none.
pub fn read(dir: &Path) -> Result<Option<Marker>> {
    let p = path(dir);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(not_marker(dir, &p, "it is not text"))
        }
        Err(e) => return Err(StoreError::io(&p, e)),
    };
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC_LINE) {
        return Err(not_marker(
            dir,
            &p,
            "it does not start with `rrstore store`",
        ));
    }
    let mut format = None;
    let mut id = None;
    for line in lines {
        match line.split_once(' ') {
            Some(("format", v)) => format = v.parse::<u32>().ok(),
            Some(("id", v)) => id = u64::from_str_radix(v, 16).ok(),
            _ => {}
        }
    }
    match (format, id) {
        (Some(format), Some(id)) => Ok(Some(Marker { format, id })),
        _ => Err(not_marker(dir, &p, "it lacks a format or id line")),
    }
}

fn not_marker(dir: &Path, p: &Path, why: &str) -> StoreError {
    StoreError::NotAStore {
        path: dir.to_path_buf(),
        reason: format!("{} is not an rrstore store marker: {why}", p.display()),
    }
}

/// Write the marker with `id` unless one exists; returns the marker in
/// place. Written to a temporary file, fsynced, then hard-linked into
/// place, so a reader never sees half a marker and two creators agree on
/// whichever linked first.
pub fn create(dir: &Path, id: u64) -> Result<Marker> {
    let marker = Marker {
        format: STORE_FORMAT,
        id,
    };
    let tmp = dir.join(format!(".config.tmp-{}-{id:016x}", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(marker.encode().as_bytes())?;
            f.sync_all()
        })
        .map_err(|e| StoreError::io(&tmp, e));
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path(dir)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::io(path(dir), e)),
    });
    let _ = std::fs::remove_file(&tmp);
    linked?;
    crate::pack::writer::sync_dir(dir)?;
    read(dir)?.ok_or_else(|| StoreError::io(path(dir), std::io::ErrorKind::NotFound.into()))
}

/// A random 64-bit store ID.
pub fn new_id() -> u64 {
    let mut b = [0u8; 8];
    let filled = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
    if !matches!(filled, Ok(8)) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let h = blake3::hash(
            &[
                now.to_le_bytes(),
                (std::process::id() as u128).to_le_bytes(),
            ]
            .concat(),
        );
        b.copy_from_slice(&h.as_bytes()[..8]);
    }
    // Kept below 2^63 so it is the same number as an SQLite integer.
    u64::from_le_bytes(b) >> 1
}
