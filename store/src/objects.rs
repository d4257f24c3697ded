//! Stand-alone content-addressed objects: a file's bytes stored as a `parts`
//! row (blake3 of the bytes) outside any recording, for the images and saved
//! replay outputs of the regression workflow. Chunks are cut, deduplicated,
//! compressed and packed exactly as an import does (so an image equal to a
//! recording's image part, or an output that shares most chunks with the
//! recorded output, costs nothing or almost nothing), and the part is
//! committed in one transaction together with the row that references it
//! (the caller's `link`), following the import's gc-epoch protocol
//! (spec/STORE.md, "Import").

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

use rrstore_format::chunk::{self, ChunkHash, Chunker};
use rusqlite::Transaction;

use crate::error::{Result, StoreError};
use crate::index::write::{self, ChunkRow, Keep, Outcome, PartRow, Recheck};
use crate::pack::reader::{ChunkLoc, PackFiles, ReadError};
use crate::pack::writer::PackWriter;
use crate::pack::{EntryHeader, ENTRY_HEADER_LEN};
use crate::read::part_locations;
use crate::Store;

/// How often storing an object starts over when gc removed a chunk it
/// reused.
const OBJECT_ATTEMPTS: u32 = 8;

/// Inserts the row that keeps a new object, inside its transaction: called
/// with the object's blake3 and length.
pub(crate) type Link<'a> = dyn Fn(&Transaction, &[u8; 32], u64) -> rusqlite::Result<()> + 'a;

/// What storing an object did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PutReport {
    pub hash: [u8; 32],
    pub len: u64,
    /// The part was already stored (no chunk written).
    pub present: bool,
    /// Bytes appended to pack files.
    pub stored_bytes: u64,
}

/// blake3 and length of a file, streamed.
pub fn hash_file(path: &Path) -> Result<([u8; 32], u64)> {
    let mut f = std::fs::File::open(path).map_err(|e| StoreError::Source {
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| StoreError::Source {
            path: path.to_path_buf(),
            source: e,
        })?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        len += n as u64;
    }
    Ok((*h.finalize().as_bytes(), len))
}

impl Store {
    /// Store the bytes of `path` as an object and, in the same transaction,
    /// call `link` with its hash and length to insert the row that keeps it.
    pub(crate) fn put_object(&mut self, path: &Path, link: &Link<'_>) -> Result<PutReport> {
        let (hash, len) = hash_file(path)?;
        write::retry_raced(
            self,
            OBJECT_ATTEMPTS,
            &|_| format!("storing {}", path.display()),
            "write",
            &mut |s: &mut Store| s.put_attempt(path, None, hash, len, link),
        )
    }

    /// Store `data` (read from `path`, which names it in errors) as an
    /// object, like [`Store::put_object`]: the device images an offload
    /// application carries are slices of its file.
    pub(crate) fn put_object_bytes(
        &mut self,
        path: &Path,
        data: &[u8],
        link: &Link<'_>,
    ) -> Result<PutReport> {
        let (hash, len) = (*blake3::hash(data).as_bytes(), data.len() as u64);
        write::retry_raced(
            self,
            OBJECT_ATTEMPTS,
            &|_| format!("storing an image of {}", path.display()),
            "write",
            &mut |s: &mut Store| s.put_attempt(path, Some(data), hash, len, link),
        )
    }

    fn put_attempt(
        &mut self,
        path: &Path,
        data: Option<&[u8]>,
        hash: [u8; 32],
        len: u64,
        link: &Link<'_>,
    ) -> Result<Option<PutReport>> {
        let epoch0 = self.gc_epoch()?;
        let mut report = PutReport {
            hash,
            len,
            present: self.has_part(&hash)?,
            stored_bytes: 0,
        };
        let mut list: Vec<ChunkHash> = Vec::new();
        let mut reused: Vec<ChunkHash> = Vec::new();
        let mut written: Vec<ChunkRow> = Vec::new();
        let mut writer: Option<PackWriter> = None;
        if !report.present {
            let reader: Box<dyn Read + '_> = match data {
                Some(d) => Box::new(d),
                None => Box::new(std::io::BufReader::new(std::fs::File::open(path).map_err(
                    |e| StoreError::Source {
                        path: path.to_path_buf(),
                        source: e,
                    },
                )?)),
            };
            let chunker =
                Chunker::new(reader, self.chunk_params).map_err(|e| StoreError::ChunkParams {
                    reason: e.to_string(),
                })?;
            let mut seen: HashSet<ChunkHash> = HashSet::new();
            let mut total_hash = blake3::Hasher::new();
            let mut total = 0u64;
            for c in chunker {
                let c = c.map_err(|e| StoreError::Source {
                    path: path.to_path_buf(),
                    source: std::io::Error::other(e.to_string()),
                })?;
                total_hash.update(&c.data);
                total += c.data.len() as u64;
                let h = chunk::hash(&c.data);
                list.push(h);
                if !seen.insert(h) {
                    continue;
                }
                if self.has_chunk(&h)? {
                    reused.push(h);
                    continue;
                }
                let (codec, stored) = chunk::compress(&c.data, self.zstd_level);
                let header = EntryHeader {
                    codec,
                    len: c.data.len() as u32,
                    stored_len: stored.len() as u32,
                    hash: h,
                };
                if writer.is_none() {
                    writer = Some(PackWriter::create(&self.dir)?);
                }
                let Some(w) = writer.as_mut() else {
                    continue;
                };
                let offset = w.append(&header, &stored)?;
                report.stored_bytes += (ENTRY_HEADER_LEN + stored.len()) as u64;
                written.push(ChunkRow {
                    hash: h,
                    pack: w.name().to_string(),
                    offset,
                    stored_len: header.stored_len,
                    len: header.len,
                    codec,
                });
            }
            if total != len || *total_hash.finalize().as_bytes() != hash {
                return Err(StoreError::ObjectChanged {
                    path: path.to_path_buf(),
                });
            }
            if let Some(w) = writer.as_mut() {
                w.sync()?;
            }
        }
        let packs: Vec<(String, u64)> = writer
            .iter()
            .map(|w| (w.name().to_string(), w.len()))
            .collect();
        let reused_parts: &[[u8; 32]] = if report.present { &[hash] } else { &[] };
        let part = [PartRow {
            hash,
            len,
            chunks: &list,
        }];
        let w = write::Write {
            recheck: Recheck::SinceEpoch(epoch0),
            reused_parts,
            reused_chunks: &reused,
            packs: &packs,
            chunks: &written,
            healed: &HashSet::new(),
            parts: if report.present { &[] } else { &part },
        };
        let keep = Keep {
            context: "storing an object",
            present: &|_| Ok(false),
            insert: &|tx| link(tx, &hash, len),
        };
        let index = self.index_path();
        Ok(
            match write::commit(&mut self.conn, &index, &w, Some(&keep))? {
                Outcome::Raced => None,
                Outcome::Committed | Outcome::Present => Some(report),
            },
        )
    }

    /// Read a whole stored object (an image) into memory, checked chunk by
    /// chunk against its blake3.
    pub fn read_object(&self, hash: &[u8; 32]) -> Result<Vec<u8>> {
        let mut r = self.open_object(hash)?;
        let mut out = Vec::new();
        r.read_to_end(&mut out)
            .map_err(|e| StoreError::io(self.dir(), e))?;
        Ok(out)
    }

    /// Stream a stored object (a saved output) one chunk at a time.
    pub fn open_object(&self, hash: &[u8; 32]) -> Result<ObjectReader> {
        let locs = part_locations(self.conn(), self.dir(), hash)?;
        Ok(ObjectReader {
            dir: self.dir().to_path_buf(),
            hash: *hash,
            packs: PackFiles::new(self.dir()),
            locs,
            next: 0,
            buf: Vec::new(),
            pos: 0,
        })
    }
}

/// Streaming reader over a stored object (see [`Store::open_object`]).
pub struct ObjectReader {
    dir: std::path::PathBuf,
    hash: [u8; 32],
    packs: PackFiles,
    locs: Vec<ChunkLoc>,
    next: usize,
    buf: Vec<u8>,
    pos: usize,
}

impl ObjectReader {
    fn fill(&mut self) -> std::io::Result<bool> {
        let Some(loc) = self.locs.get(self.next).cloned() else {
            return Ok(false);
        };
        self.buf.resize(loc.len as usize, 0);
        self.pos = 0;
        let mut r = self.packs.read_into(&loc, &mut self.buf);
        if let Err(ReadError::Missing(_)) = r {
            // gc may have moved the chunk: look the locations up again.
            self.packs.reset();
            let conn = crate::index::open(&self.dir.join(crate::layout::INDEX_FILE), false)
                .map_err(StoreError::into_io)?;
            self.locs =
                part_locations(&conn, &self.dir, &self.hash).map_err(StoreError::into_io)?;
            if let Some(l) = self.locs.get(self.next).cloned() {
                r = self.packs.read_into(&l, &mut self.buf);
            }
        }
        r.map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "object {}, chunk {}: {e}",
                    rrstore_format::id::hex(&self.hash),
                    self.next
                ),
            )
        })?;
        self.next += 1;
        Ok(true)
    }
}

impl Read for ObjectReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.buf.len() {
            if !self.fill()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
