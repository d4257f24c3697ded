//! Reading a stored recording back: [`StoredRecording`] implements
//! `PartSource`, decoding each chunk straight into its place in the
//! destination and verifying its blake3; a corrupt chunk is an error naming
//! the recording, the part and the byte range, never wrong bytes.

use std::io::Read;
use std::path::{Path, PathBuf};

use rrstore_format::chunk::Codec;
use rrstore_format::{PartRole, PartSource, Recording, RecordingId};
use rusqlite::Connection;

use crate::error::{Result, StoreError};
use crate::index::{self, hash32, u};
use crate::pack::reader::{ChunkLoc, PackFiles, ReadError};

/// A stored recording opened for reading.
pub struct StoredRecording {
    dir: PathBuf,
    conn: Connection,
    id: RecordingId,
    rec: Recording,
    packs: PackFiles,
}

impl StoredRecording {
    /// Open recording `id` of the store at `dir`.
    pub fn open(dir: &Path, id: &RecordingId) -> Result<StoredRecording> {
        let index_path = dir.join(crate::layout::INDEX_FILE);
        let conn = index::open(&index_path, false)?;
        let rec = crate::recording_from(&conn, &index_path, id)?;
        Ok(StoredRecording {
            dir: dir.to_path_buf(),
            conn,
            id: *id,
            rec,
            packs: PackFiles::new(dir),
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
        let info = self.rec.part(role).ok_or_else(|| {
            StoreError::Invalid(format!("recording {} has no {role} part", self.id))
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

    /// Decode `locs` (covering `dst`, starting at part offset `base`).
    fn decode_range(
        packs: &mut PackFiles,
        locs: &[ChunkLoc],
        dst: &mut [u8],
        base: u64,
    ) -> std::result::Result<(), (u64, u64, ReadError)> {
        let mut off = 0usize;
        for loc in locs {
            let len = loc.len as usize;
            let start = base + off as u64;
            packs
                .read_into(loc, &mut dst[off..off + len])
                .map_err(|e| (start, start + len as u64, e))?;
            off += len;
        }
        Ok(())
    }

    fn read_into_once(
        &mut self,
        role: PartRole,
        dst: &mut [u8],
    ) -> std::result::Result<(), StoreErrorOrMissing> {
        let locs = self.locations(role).map_err(StoreErrorOrMissing::Store)?;
        if dst.len() as u64 != locs.iter().map(|l| l.len as u64).sum::<u64>() {
            return Err(StoreErrorOrMissing::Store(StoreError::Invalid(format!(
                "the {role} part is {} bytes, the destination {}",
                locs.iter().map(|l| l.len as u64).sum::<u64>(),
                dst.len()
            ))));
        }
        // Split into contiguous groups decoded in parallel for large parts.
        let threads = if dst.len() >= (8 << 20) {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(4)
        } else {
            1
        };
        let result = if threads <= 1 {
            Self::decode_range(&mut self.packs, &locs, dst, 0)
        } else {
            let per = dst.len().div_ceil(threads);
            let mut groups: Vec<(&[ChunkLoc], &mut [u8], u64)> = Vec::new();
            let mut rest_locs: &[ChunkLoc] = &locs;
            let mut rest_dst: &mut [u8] = dst;
            let mut base = 0u64;
            while !rest_locs.is_empty() {
                let mut n = 0;
                let mut bytes = 0usize;
                while n < rest_locs.len() && (bytes < per || n == 0) {
                    bytes += rest_locs[n].len as usize;
                    n += 1;
                }
                let (gl, rl) = rest_locs.split_at(n);
                let (gd, rd) = std::mem::take(&mut rest_dst).split_at_mut(bytes);
                groups.push((gl, gd, base));
                base += bytes as u64;
                rest_locs = rl;
                rest_dst = rd;
            }
            let dir = self.dir.clone();
            std::thread::scope(|s| {
                let handles: Vec<_> = groups
                    .into_iter()
                    .map(|(gl, gd, b)| {
                        let dir = dir.clone();
                        s.spawn(move || {
                            let mut packs = PackFiles::new(&dir);
                            Self::decode_range(&mut packs, gl, gd, b)
                        })
                    })
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
        match self.read_into_once(role, dst) {
            Ok(()) => Ok(()),
            Err(StoreErrorOrMissing::Store(e)) => Err(e),
            Err(StoreErrorOrMissing::Missing(_)) => {
                self.packs.reset();
                self.read_into_once(role, dst).map_err(|e| match e {
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

/// Chunk locations of a part by its hash, in order.
pub(crate) fn part_locations(
    conn: &Connection,
    dir: &Path,
    part: &[u8; 32],
) -> Result<Vec<ChunkLoc>> {
    let ierr = |source| StoreError::Index {
        path: dir.join(crate::layout::INDEX_FILE),
        context: "reading a part's chunk list".into(),
        source,
    };
    let nchunks: Option<i64> = {
        use rusqlite::OptionalExtension;
        conn.prepare_cached("SELECT nchunks FROM parts WHERE hash = ?1")
            .and_then(|mut s| s.query_row([&part[..]], |r| r.get(0)).optional())
            .map_err(ierr)?
    };
    let nchunks = nchunks.ok_or_else(|| {
        StoreError::Invalid(format!(
            "part {} is not in the index",
            rrstore_format::id::hex(part)
        ))
    })?;
    let mut stmt = conn
        .prepare_cached(
            "SELECT pc.chunk, c.hash, p.name, c.offset, c.stored_len, c.len, c.codec \
             FROM part_chunks pc LEFT JOIN chunks c ON c.hash = pc.chunk \
             LEFT JOIN packs p ON p.id = c.pack WHERE pc.part = ?1 ORDER BY pc.seq",
        )
        .map_err(ierr)?;
    let rows = stmt
        .query_map([&part[..]], |r| {
            Ok((
                hash32(r.get(0)?),
                r.get::<_, Option<Vec<u8>>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, Option<i64>>(6)?,
            ))
        })
        .map_err(ierr)?;
    let mut out = Vec::with_capacity(nchunks.max(0) as usize);
    for row in rows {
        let (hash, found, pack, offset, stored_len, len, codec) = row.map_err(ierr)?;
        let missing = || {
            StoreError::Invalid(format!(
                "chunk {} is missing from the index",
                rrstore_format::id::hex(&hash)
            ))
        };
        if found.is_none() {
            return Err(missing());
        }
        let (Some(pack), Some(offset), Some(stored_len), Some(len), Some(codec)) =
            (pack, offset, stored_len, len, codec)
        else {
            return Err(StoreError::Invalid(format!(
                "chunk {} points to a pack that is not in the index",
                rrstore_format::id::hex(&hash)
            )));
        };
        let codec = Codec::from_u8(codec as u8)
            .ok_or_else(|| StoreError::Invalid(format!("chunk has unknown codec {codec}")))?;
        out.push(ChunkLoc {
            hash,
            pack,
            offset: u(offset),
            stored_len: stored_len as u32,
            len: len as u32,
            codec,
        });
    }
    if out.len() as i64 != nchunks {
        return Err(StoreError::Invalid(format!(
            "the index lists {} chunks for part {}, expected {nchunks}",
            out.len(),
            rrstore_format::id::hex(part)
        )));
    }
    Ok(out)
}

impl PartSource for StoredRecording {
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
}

/// Streaming reader over one stored part, one chunk in memory at a time.
struct PartReader<'a> {
    src: &'a mut StoredRecording,
    role: PartRole,
    locs: Vec<ChunkLoc>,
    next: usize,
    /// Part offset of the start of `buf`.
    pos: u64,
    buf: Vec<u8>,
    buf_pos: usize,
}

impl Read for PartReader<'_> {
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
