//! Reading a stored recording back: [`StoredRecording`] implements
//! `PartSource`, decoding each chunk straight into its place in the
//! destination and verifying its blake3; a corrupt chunk is an error naming
//! the recording, the part and the byte range, never wrong bytes.
//! [`locations`] turns a part's index rows into the chunk locations every
//! reader (this one, objects, verify, push) starts from.

mod locations;
mod pieces;

pub(crate) use locations::part_locations;
use pieces::{decode_pieces, pieces, PartIndex, Piece, PARALLEL_MIN};

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use rrstore_format::extents::{Extent, PartExtents};
use rrstore_format::{PartRole, PartSource, Recording, RecordingId};
use rusqlite::{Connection, OptionalExtension};

use crate::error::{Result, StoreError};
use crate::index;
use crate::pack::reader::{ChunkLoc, PackFiles, ReadError};
use crate::Store;

impl Store {
    /// The stored recording's manifest.
    pub fn recording(&self, id: &RecordingId) -> Result<Recording> {
        recording_from(&self.conn, &self.index_path(), id)
    }

    /// A [`rrstore_format::PartSource`] over a stored recording's parts.
    /// It has its own index connection, so it can outlive `self` and move
    /// to another thread.
    pub fn part_source(&self, id: &RecordingId) -> Result<StoredRecording<'static>> {
        StoredRecording::open(&self.dir, id)
    }

    /// [`part_source`](Self::part_source) reading through this store's own
    /// index connection: no second connection to open (for a short replay
    /// that is a measurable share of its start-up), but it borrows the store
    /// and stays on this thread.
    pub fn parts_of(&self, id: &RecordingId) -> Result<StoredRecording<'_>> {
        StoredRecording::in_store(&self.dir, &self.conn, id)
    }
}

/// Load and check a recording's manifest from the index.
pub(crate) fn recording_from(
    conn: &Connection,
    index_path: &Path,
    id: &RecordingId,
) -> Result<Recording> {
    let blob: Option<Vec<u8>> = conn
        .prepare_cached("SELECT manifest FROM manifests WHERE id = ?1")
        .and_then(|mut s| s.query_row([&id.0[..]], |r| r.get(0)).optional())
        .map_err(|source| StoreError::Index {
            path: index_path.to_path_buf(),
            context: "reading a recording manifest".into(),
            source,
        })?;
    let blob = blob.ok_or_else(|| StoreError::NotFound(id.to_hex()))?;
    let rec: Recording = rmp_serde::from_slice(&blob).map_err(|e| StoreError::CorruptIndex {
        recording: id.to_hex(),
        reason: format!("its manifest does not decode: {e}"),
    })?;
    if rec.id() != *id {
        return Err(StoreError::CorruptIndex {
            recording: id.to_hex(),
            reason: format!("its manifest hashes to {}", rec.id()),
        });
    }
    Ok(rec)
}

/// A stored recording opened for reading.
pub struct StoredRecording<'s> {
    dir: PathBuf,
    conn: IndexConn<'s>,
    id: RecordingId,
    rec: Recording,
    packs: PackFiles,
    /// One pack reader per decoding thread.
    workers: Vec<PackFiles>,
    /// The chunk list of the part read last.
    index: Option<PartIndex>,
}

/// The index connection a [`StoredRecording`] queries: its own, or the one
/// of the [`crate::Store`] it was opened from.
enum IndexConn<'s> {
    Own(Connection),
    Store(&'s Connection),
}

impl std::ops::Deref for IndexConn<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        match self {
            IndexConn::Own(c) => c,
            IndexConn::Store(c) => c,
        }
    }
}

impl StoredRecording<'static> {
    /// Open recording `id` of the store at `dir`, with an index connection
    /// of its own (so it can move to another thread).
    pub fn open(dir: &Path, id: &RecordingId) -> Result<StoredRecording<'static>> {
        let index_path = dir.join(crate::layout::INDEX_FILE);
        let conn = index::open(&index_path, false)?;
        // A reader has nothing to checkpoint: closing it must not fsync the
        // database (the writers' connections checkpoint as they go).
        let _ = conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        );
        StoredRecording::with(dir, IndexConn::Own(conn), id)
    }
}

impl<'s> StoredRecording<'s> {
    /// Recording `id` of the store at `dir`, read through that store's own
    /// index connection `conn`.
    pub(crate) fn in_store(
        dir: &Path,
        conn: &'s Connection,
        id: &RecordingId,
    ) -> Result<StoredRecording<'s>> {
        StoredRecording::with(dir, IndexConn::Store(conn), id)
    }

    fn with(dir: &Path, conn: IndexConn<'s>, id: &RecordingId) -> Result<StoredRecording<'s>> {
        let index_path = dir.join(crate::layout::INDEX_FILE);
        let rec = recording_from(&conn, &index_path, id)?;
        Ok(StoredRecording {
            dir: dir.to_path_buf(),
            conn,
            id: *id,
            rec,
            packs: PackFiles::new(dir),
            workers: Vec::new(),
            index: None,
        })
    }

    pub fn id(&self) -> RecordingId {
        self.id
    }

    pub fn recording(&self) -> &Recording {
        &self.rec
    }

    fn corrupt(&self, role: PartRole, start: u64, end: u64, reason: String) -> StoreError {
        StoreError::CorruptPart {
            recording: self.id,
            part: role,
            start,
            end,
            reason,
        }
    }

    /// Chunk locations of a part, in order, checked against the manifest.
    pub fn locations(&self, role: PartRole) -> Result<Vec<ChunkLoc>> {
        let info = self.rec.part(role).ok_or_else(|| StoreError::NoSuchPart {
            recording: self.id,
            part: role,
        })?;
        let locs = part_locations(&self.conn, &self.dir, &info.blake3).map_err(|e| match e {
            StoreError::Index { .. } => e,
            other => self.corrupt(role, 0, info.len, other.to_string()),
        })?;
        let total: u64 = locs.iter().map(|l| l.len as u64).sum();
        if total != info.len {
            return Err(self.corrupt(
                role,
                0,
                info.len,
                format!(
                    "the index lists chunks covering {total} bytes, the part has {}",
                    info.len
                ),
            ));
        }
        Ok(locs)
    }

    /// The chunk list of `role` with each chunk's part offset, looked up
    /// once and kept for window-by-window reads.
    fn part_index(&mut self, role: PartRole) -> Result<&PartIndex> {
        if self.index.as_ref().map(|i| i.role) != Some(role) {
            let locs = self.locations(role)?;
            let mut starts = Vec::with_capacity(locs.len() + 1);
            let mut at = 0u64;
            for l in &locs {
                starts.push(at);
                at += l.len as u64;
            }
            starts.push(at);
            self.index = Some(PartIndex { role, locs, starts });
        }
        self.index
            .as_ref()
            .ok_or_else(|| StoreError::Internal("part index vanished".into()))
    }

    fn read_range_once(
        &mut self,
        role: PartRole,
        offset: u64,
        dst: &mut [u8],
    ) -> std::result::Result<(), StoreErrorOrMissing> {
        let threads = if dst.len() >= PARALLEL_MIN {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        } else {
            1
        };
        if self.workers.len() < threads {
            let dir = self.dir.clone();
            self.workers.resize_with(threads, || PackFiles::new(&dir));
        }
        self.part_index(role).map_err(StoreErrorOrMissing::Store)?;
        let dir = self.dir.clone();
        let (Some(index), workers) = (self.index.as_ref(), &mut self.workers) else {
            return Err(StoreErrorOrMissing::Store(StoreError::Internal(
                "part index vanished".into(),
            )));
        };
        let total = *index.starts.last().unwrap_or(&0);
        let end = offset.checked_add(dst.len() as u64);
        if end.is_none_or(|e| e > total) {
            return Err(StoreErrorOrMissing::Store(StoreError::BadPartRead {
                part: role,
                len: total,
                reason: format!("bytes {offset}..+{} are outside it", dst.len()),
            }));
        }
        let pieces = pieces(index, offset, dst.len() as u64);
        // Contiguous groups of about equal bytes, one per thread.
        let per = dst.len().div_ceil(threads).max(1);
        let mut groups: Vec<(&[Piece], &mut [u8])> = Vec::new();
        let mut rest_p: &[Piece] = &pieces;
        let mut rest_dst: &mut [u8] = dst;
        while !rest_p.is_empty() {
            let mut n = 0;
            let mut bytes = 0usize;
            while n < rest_p.len() && (bytes < per || n == 0) {
                bytes += rest_p[n].len;
                n += 1;
            }
            let (gp, rp) = rest_p.split_at(n);
            let (gd, rd) = std::mem::take(&mut rest_dst).split_at_mut(bytes);
            groups.push((gp, gd));
            rest_p = rp;
            rest_dst = rd;
        }
        if workers.len() < groups.len() {
            workers.resize_with(groups.len(), || PackFiles::new(&dir));
        }
        let locs = &index.locs;
        let result = if groups.len() <= 1 {
            match (groups.pop(), workers.first_mut()) {
                (Some((gp, gd)), Some(w)) => decode_pieces(w, locs, gp, gd),
                _ => Ok(()),
            }
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = groups
                    .into_iter()
                    .zip(workers.iter_mut())
                    .map(|((gp, gd), w)| s.spawn(move || decode_pieces(w, locs, gp, gd)))
                    .collect();
                let mut first = Ok(());
                for h in handles {
                    let r = h.join().unwrap_or_else(|_| {
                        Err((
                            0,
                            0,
                            ReadError::Io(dir.clone(), std::io::Error::other("decoder panicked")),
                        ))
                    });
                    if first.is_ok() {
                        first = r;
                    }
                }
                first
            })
        };
        result.map_err(|(start, end, e)| match e {
            ReadError::Missing(p) => StoreErrorOrMissing::Missing(self.corrupt(
                role,
                start,
                end,
                format!("pack {} is missing", p.display()),
            )),
            other => StoreErrorOrMissing::Store(self.corrupt(role, start, end, other.to_string())),
        })
    }

    /// Decode a whole part into `dst`, retrying once when gc moved chunks.
    pub fn read_part(&mut self, role: PartRole, dst: &mut [u8]) -> Result<()> {
        let len = self.part_index(role)?.starts.last().copied().unwrap_or(0);
        if dst.len() as u64 != len {
            return Err(StoreError::BadPartRead {
                part: role,
                len,
                reason: format!("the destination is {} bytes", dst.len()),
            });
        }
        self.read_part_range(role, 0, dst)
    }

    /// Decode the part's bytes `offset..offset + dst.len()` into `dst`, on
    /// all cores when the range is large, retrying once when gc moved
    /// chunks. Chunks cut by the range's ends are decoded whole and copied.
    pub fn read_part_range(&mut self, role: PartRole, offset: u64, dst: &mut [u8]) -> Result<()> {
        match self.read_range_once(role, offset, dst) {
            Ok(()) => Ok(()),
            Err(StoreErrorOrMissing::Store(e)) => Err(e),
            Err(StoreErrorOrMissing::Missing(_)) => {
                self.packs.reset();
                self.workers.clear();
                self.index = None;
                self.read_range_once(role, offset, dst)
                    .map_err(|e| match e {
                        StoreErrorOrMissing::Store(e) | StoreErrorOrMissing::Missing(e) => e,
                    })
            }
        }
    }
}

enum StoreErrorOrMissing {
    Store(StoreError),
    Missing(StoreError),
}

impl PartSource for StoredRecording<'_> {
    fn open_part(&mut self, role: PartRole) -> std::io::Result<Box<dyn Read + '_>> {
        let locs = self.locations(role).map_err(StoreError::into_io)?;
        Ok(Box::new(PartReader {
            src: self,
            role,
            locs,
            next: 0,
            pos: 0,
            buf: Vec::new(),
            buf_pos: 0,
        }))
    }

    fn read_part_into(&mut self, role: PartRole, dst: &mut [u8]) -> std::io::Result<()> {
        self.read_part(role, dst).map_err(StoreError::into_io)
    }

    fn random_access(&self) -> bool {
        true
    }

    fn extents(&mut self, role: PartRole) -> std::io::Result<Option<PartExtents>> {
        let locs = self.locations(role).map_err(StoreError::into_io)?;
        let dir = std::fs::canonicalize(&self.dir).unwrap_or_else(|_| self.dir.clone());
        let mut files = Vec::new();
        let mut file_of: HashMap<&str, u32> = HashMap::new();
        let mut extents = Vec::with_capacity(locs.len());
        for l in &locs {
            let file = *file_of.entry(l.pack.as_str()).or_insert_with(|| {
                files.push(crate::layout::pack_path(&dir, &l.pack));
                files.len() as u32 - 1
            });
            extents.push(Extent {
                file,
                offset: l.data_offset(),
                stored_len: u64::from(l.stored_len),
                len: u64::from(l.len),
                codec: l.codec,
                hash: Some(l.hash),
            });
        }
        Ok(Some(PartExtents { files, extents }))
    }

    fn read_part_range_into(
        &mut self,
        role: PartRole,
        offset: u64,
        dst: &mut [u8],
    ) -> std::io::Result<()> {
        self.read_part_range(role, offset, dst)
            .map_err(StoreError::into_io)
    }
}

/// Streaming reader over one stored part, one chunk in memory at a time.
struct PartReader<'a, 's> {
    src: &'a mut StoredRecording<'s>,
    role: PartRole,
    locs: Vec<ChunkLoc>,
    next: usize,
    /// Part offset of the start of `buf`.
    pos: u64,
    buf: Vec<u8>,
    buf_pos: usize,
}

impl Read for PartReader<'_, '_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.buf_pos == self.buf.len() {
            let Some(loc) = self.locs.get(self.next).cloned() else {
                return Ok(0);
            };
            self.pos += self.buf.len() as u64;
            self.buf.resize(loc.len as usize, 0);
            self.buf_pos = 0;
            let mut r = self.src.packs.read_into(&loc, &mut self.buf);
            if let Err(ReadError::Missing(_)) = r {
                // gc may have moved the chunk: look its location up again.
                self.src.packs.reset();
                let fresh = self.src.locations(self.role).map_err(StoreError::into_io)?;
                if let Some(l) = fresh.get(self.next) {
                    self.locs = fresh.clone();
                    r = self.src.packs.read_into(l, &mut self.buf);
                }
            }
            if let Err(e) = r {
                self.buf.clear();
                let end = self.pos + loc.len as u64;
                return Err(self
                    .src
                    .corrupt(self.role, self.pos, end, e.to_string())
                    .into_io());
            }
            self.next += 1;
        }
        let n = out.len().min(self.buf.len() - self.buf_pos);
        out[..n].copy_from_slice(&self.buf[self.buf_pos..self.buf_pos + n]);
        self.buf_pos += n;
        Ok(n)
    }
}
