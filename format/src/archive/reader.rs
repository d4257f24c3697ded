//! `.rra` reader: opens and validates an archive (header, trailer, checksums
//! of manifest and index, recording ID, the recording's consistency
//! ([`crate::validate`]), every index entry against the file),
//! then serves parts as a [`PartSource`] and chunks as stored.
//!
//! Everything a reader returns is verified: each chunk against its blake3
//! as it is decoded, each part against the recording's blake3 once it has
//! been read to its end (a streaming read reports a mismatch as an error at
//! the end of the part, like gzip's CRC).

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use super::checks::{validate_chunks, validate_parts};
use super::decode::{read_exact_at, Decoder, PartReader};
use super::layout::{
    Header, Index, Manifest, Trailer, CHUNKING_ALGORITHM, HEADER_LEN, MAJOR, MAX_INDEX_LEN,
    MAX_MANIFEST_LEN, TRAILER_LEN,
};
use crate::chunk::{ChunkHash, ChunkParams, Codec};
use crate::error::FormatError;
use crate::extents::{Extent, PartExtents};
use crate::id::{hex, RecordingId};
use crate::model::{PartInfo, PartRole, PartSource, Recording};

/// One stored chunk, as the index describes it (validated against the file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkInfo {
    /// blake3 of the uncompressed bytes (the chunk's address everywhere).
    pub hash: ChunkHash,
    /// Absolute file offset of the stored bytes.
    pub offset: u64,
    pub stored_len: u32,
    /// Uncompressed length.
    pub len: u32,
    pub codec: Codec,
}

/// A chunk's stored bytes, read and verified, ready to be copied into a
/// store without recompressing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredChunk {
    /// Row in the archive's chunk table (repeats of a chunk share it).
    pub index: u32,
    pub hash: ChunkHash,
    pub len: u32,
    pub codec: Codec,
    /// Exactly the bytes the archive stores (a zstd frame or raw data).
    pub data: Vec<u8>,
}

/// A part and its chunk table rows.
pub(super) type PartChunks = (PartInfo, Arc<[u32]>);

/// An open, validated archive.
pub struct Reader {
    path: Arc<Path>,
    file: Arc<File>,
    manifest: Manifest,
    id: RecordingId,
    chunks: Arc<[ChunkInfo]>,
    /// Chunk table rows of each part, in the recording's part order.
    parts: Vec<PartChunks>,
    threads: usize,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("path", &self.path)
            .field("id", &self.id)
            .field("chunks", &self.chunks.len())
            .finish()
    }
}

impl Reader {
    /// Open `path` and validate everything except the chunk payloads (those
    /// are verified as they are read).
    pub fn open(path: impl AsRef<Path>) -> Result<Reader, FormatError> {
        let path = path.as_ref();
        let io_err = |source| FormatError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io_err)?;
        let file_len = file.metadata().map_err(io_err)?.len();
        let corrupt = |offset: u64, message: String| FormatError::Corrupt {
            path: path.to_path_buf(),
            offset,
            message,
        };
        let invalid = |offset: u64, message: String| FormatError::At {
            path: path.to_path_buf(),
            offset,
            message,
        };

        let mut hb = [0u8; HEADER_LEN as usize];
        if file_len < HEADER_LEN {
            return Err(invalid(
                0,
                format!("not an rrstore archive (.rra): the file is only {file_len} bytes"),
            ));
        }
        read_exact_at(&file, &mut hb, 0).map_err(io_err)?;
        let header = Header::decode(&hb)
            .ok_or_else(|| invalid(0, "not an rrstore archive (.rra): wrong magic bytes".into()))?;
        if header.major != MAJOR {
            return Err(FormatError::UnsupportedVersion {
                path: path.to_path_buf(),
                found: header.major,
                supported: MAJOR,
            });
        }
        if file_len < HEADER_LEN + TRAILER_LEN {
            return Err(corrupt(
                file_len,
                format!(
                    "truncated archive: {file_len} bytes, a complete one has at least {}",
                    HEADER_LEN + TRAILER_LEN
                ),
            ));
        }
        let trailer_at = file_len - TRAILER_LEN;
        let mut tb = [0u8; TRAILER_LEN as usize];
        read_exact_at(&file, &mut tb, trailer_at).map_err(io_err)?;
        let t = Trailer::decode(&tb).ok_or_else(|| {
            corrupt(
                file_len - 8,
                "no archive trailer at the end of the file: the archive is truncated or was not completely written".into(),
            )
        })?;
        // Layout: header | payloads | manifest | index | trailer, contiguous.
        let ok = t.manifest_offset >= HEADER_LEN
            && t.manifest_offset.checked_add(t.manifest_len) == Some(t.index_offset)
            && t.index_offset.checked_add(t.index_len) == Some(trailer_at);
        if !ok {
            return Err(corrupt(
                trailer_at,
                format!(
                    "the trailer's offsets are inconsistent (manifest {}+{}, index {}+{}, trailer at {trailer_at}): the archive is damaged",
                    t.manifest_offset, t.manifest_len, t.index_offset, t.index_len
                ),
            ));
        }
        if t.manifest_len > MAX_MANIFEST_LEN || t.index_len > MAX_INDEX_LEN {
            return Err(invalid(
                trailer_at,
                format!(
                    "manifest ({} bytes) or index ({} bytes) exceeds the limits ({MAX_MANIFEST_LEN} / {MAX_INDEX_LEN} bytes)",
                    t.manifest_len, t.index_len
                ),
            ));
        }
        let block = |offset: u64, len: u64, sum: &[u8; 32], what: &str| {
            let mut b = vec![0u8; len as usize];
            read_exact_at(&file, &mut b, offset).map_err(io_err)?;
            if blake3::hash(&b).as_bytes() != sum {
                return Err(corrupt(
                    offset,
                    format!("the {what} fails its blake3 checksum: the archive is damaged"),
                ));
            }
            Ok(b)
        };
        let mb = block(
            t.manifest_offset,
            t.manifest_len,
            &t.manifest_blake3,
            "manifest",
        )?;
        let manifest: Manifest = rmp_serde::from_slice(&mb).map_err(|e| {
            invalid(
                t.manifest_offset,
                format!("the manifest does not decode: {e}"),
            )
        })?;
        let ib = block(t.index_offset, t.index_len, &t.index_blake3, "index")?;
        let index: Index = rmp_serde::from_slice(&ib)
            .map_err(|e| invalid(t.index_offset, format!("the index does not decode: {e}")))?;
        drop((mb, ib));

        let id = manifest.recording.id();
        if id.0 != manifest.id.0 {
            return Err(corrupt(
                t.manifest_offset,
                format!(
                    "the manifest's recording hashes to ID {id}, but the manifest says {}",
                    hex(&manifest.id.0)
                ),
            ));
        }
        let c = &manifest.chunking;
        let params = ChunkParams {
            min: c.min,
            avg: c.avg,
            max: c.max,
        };
        if c.algorithm != CHUNKING_ALGORITHM || params.validate().is_err() {
            return Err(invalid(
                t.manifest_offset,
                format!(
                    "unsupported chunking `{}` min={} avg={} max={} (expected {CHUNKING_ALGORITHM} within FastCDC's limits)",
                    c.algorithm, c.min, c.avg, c.max
                ),
            ));
        }
        let chunks = validate_chunks(&index.chunks, params.max, t.manifest_offset)
            .map_err(|(i, m)| invalid(t.index_offset, format!("chunk table row {i}: {m}")))?;
        let parts = validate_parts(&manifest.recording, &index, &chunks)
            .map_err(|m| invalid(t.index_offset, m))?;
        // The structure holds together; now what it describes must too.
        manifest
            .recording
            .validate()
            .map_err(|source| FormatError::Inconsistent {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Reader {
            path: Arc::from(path),
            file: Arc::new(file),
            manifest,
            id,
            chunks: chunks.into(),
            parts,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn recording(&self) -> &Recording {
        &self.manifest.recording
    }

    pub fn id(&self) -> RecordingId {
        self.id
    }

    /// The FastCDC parameters the archive was chunked with.
    pub fn chunk_params(&self) -> ChunkParams {
        let c = &self.manifest.chunking;
        ChunkParams {
            min: c.min,
            avg: c.avg,
            max: c.max,
        }
    }

    /// The zstd level the writer used.
    pub fn level(&self) -> i32 {
        self.manifest.compression.level
    }

    /// Decoding threads for part reads (default: one per core).
    pub fn set_threads(&mut self, n: usize) {
        self.threads = n.clamp(1, 64);
    }

    /// The distinct chunks, in file order.
    pub fn chunk_table(&self) -> &[ChunkInfo] {
        &self.chunks
    }

    /// The chunk table rows making up a part, in order (repeats included).
    pub fn part_chunks(&self, role: PartRole) -> Option<&[u32]> {
        self.parts
            .iter()
            .find(|(p, _)| p.role == role)
            .map(|(_, c)| &c[..])
    }

    /// Iterate a part's chunks in order with their stored bytes, each read
    /// and verified (decompressed and hashed) before it is yielded.
    pub fn chunks(&self, role: PartRole) -> Result<Chunks<'_>, FormatError> {
        let list = self.part_chunks(role).ok_or_else(|| self.no_part(role))?;
        Ok(Chunks {
            reader: self,
            list: list.iter(),
            decoder: Decoder::new(),
            scratch: Vec::new(),
            last: None,
        })
    }

    /// Read every part to its end, verifying every chunk and part hash.
    pub fn verify(&mut self) -> Result<(), FormatError> {
        for i in 0..self.parts.len() {
            let mut r = self.part_reader(i);
            io::copy(&mut r, &mut io::sink()).map_err(|e| self.unwrap_io(e))?;
        }
        Ok(())
    }

    fn no_part(&self, role: PartRole) -> FormatError {
        FormatError::Invalid {
            path: self.path.to_path_buf(),
            message: format!("the archived recording has no {role} part"),
        }
    }

    fn unwrap_io(&self, e: io::Error) -> FormatError {
        if e.get_ref().is_some_and(|i| i.is::<FormatError>()) {
            if let Some(Ok(fe)) = e.into_inner().map(|i| i.downcast::<FormatError>()) {
                return *fe;
            }
            return self.no_part(PartRole::Input);
        }
        FormatError::Io {
            path: self.path.to_path_buf(),
            source: e,
        }
    }

    fn part_reader(&self, i: usize) -> PartReader {
        let (info, list) = &self.parts[i];
        PartReader::new(
            self.path.clone(),
            self.file.clone(),
            self.chunks.clone(),
            list.clone(),
            info.clone(),
            self.threads,
        )
    }

    /// Decode a part into `dst` (exactly the part's length) on all threads.
    fn decode_part_into(&self, role: PartRole, dst: &mut [u8]) -> Result<(), FormatError> {
        let (info, list) = self
            .parts
            .iter()
            .find(|(p, _)| p.role == role)
            .ok_or_else(|| self.no_part(role))?;
        if dst.len() as u64 != info.len {
            return Err(FormatError::Invalid {
                path: self.path.to_path_buf(),
                message: format!(
                    "the {role} part is {} bytes but the buffer given is {} bytes",
                    info.len,
                    dst.len()
                ),
            });
        }
        self.decode_runs(list, &mut *dst)?;
        let actual = *blake3::hash(dst).as_bytes();
        if actual != info.blake3 {
            return Err(FormatError::Corrupt {
                path: self.path.to_path_buf(),
                offset: self.chunks.first().map_or(HEADER_LEN, |c| c.offset),
                message: format!(
                    "the {role} part's chunks are all intact but together hash to {}, not the recorded {}: the index is damaged",
                    hex(&actual),
                    hex(&info.blake3)
                ),
            });
        }
        Ok(())
    }

    /// Decode the chunks `list` into `dst` (their total length), split into
    /// runs of about equal bytes, one per thread.
    fn decode_runs(&self, list: &[u32], dst: &mut [u8]) -> Result<(), FormatError> {
        let per = dst.len() as u64 / self.threads as u64 + 1;
        let mut runs: Vec<(&[u32], &mut [u8])> = Vec::with_capacity(self.threads);
        let (mut rest_list, mut rest_dst) = (list, dst);
        while !rest_list.is_empty() {
            let (mut n, mut bytes) = (0usize, 0u64);
            while n < rest_list.len() && (bytes < per || n == 0) {
                bytes += u64::from(self.chunks[rest_list[n] as usize].len);
                n += 1;
            }
            let (l, lr) = rest_list.split_at(n);
            let (d, dr) = std::mem::take(&mut rest_dst).split_at_mut(bytes as usize);
            runs.push((l, d));
            rest_list = lr;
            rest_dst = dr;
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = runs
                .into_iter()
                .map(|(l, d)| {
                    s.spawn(move || {
                        let mut dec = Decoder::new();
                        let mut off = 0usize;
                        for &c in l {
                            let ci = &self.chunks[c as usize];
                            let end = off + ci.len as usize;
                            dec.decode(&self.file, &self.path, ci, &mut d[off..end])?;
                            off = end;
                        }
                        Ok::<(), FormatError>(())
                    })
                })
                .collect();
            let mut result = Ok(());
            for h in handles {
                let r = h.join().unwrap_or_else(|_| {
                    Err(FormatError::Invalid {
                        path: self.path.to_path_buf(),
                        message: "a decoding thread panicked".into(),
                    })
                });
                if result.is_ok() {
                    result = r;
                }
            }
            result
        })
    }
}

impl PartSource for Reader {
    fn open_part(&mut self, role: PartRole) -> io::Result<Box<dyn io::Read + '_>> {
        let i = self
            .parts
            .iter()
            .position(|(p, _)| p.role == role)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, self.no_part(role)))?;
        Ok(Box::new(self.part_reader(i)))
    }

    fn read_part_into(&mut self, role: PartRole, dst: &mut [u8]) -> io::Result<()> {
        self.decode_part_into(role, dst)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn extents(&mut self, role: PartRole) -> io::Result<Option<PartExtents>> {
        let (_, list) = self
            .parts
            .iter()
            .find(|(p, _)| p.role == role)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, self.no_part(role)))?;
        let path = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.to_path_buf());
        let mut extents = Vec::with_capacity(list.len());
        for &row in list.iter() {
            // `validate_parts` checked every row against the table.
            let Some(c) = self.chunks.get(row as usize) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("the {role} part refers to a missing chunk row {row}"),
                ));
            };
            extents.push(Extent {
                file: 0,
                offset: c.offset,
                stored_len: u64::from(c.stored_len),
                len: u64::from(c.len),
                codec: c.codec,
                hash: Some(c.hash),
            });
        }
        Ok(Some(PartExtents {
            files: vec![path],
            extents,
        }))
    }
}

/// Iterator over a part's chunks with their verified stored bytes.
pub struct Chunks<'a> {
    reader: &'a Reader,
    list: std::slice::Iter<'a, u32>,
    decoder: Decoder,
    scratch: Vec<u8>,
    /// The row yielded last and its stored bytes, when small: a run of the
    /// same chunk (zeros) is decoded and verified once.
    last: Option<(u32, Vec<u8>)>,
}

impl Chunks<'_> {
    /// The uncompressed (verified) bytes of the chunk [`Iterator::next`]
    /// returned last: lets a caller hash the whole part as it copies the
    /// stored chunks.
    pub fn plain(&self) -> &[u8] {
        &self.scratch
    }
}

impl Iterator for Chunks<'_> {
    type Item = Result<StoredChunk, FormatError>;
    fn next(&mut self) -> Option<Self::Item> {
        let &i = self.list.next()?;
        let r = self.reader;
        let ci = r.chunks[i as usize];
        if let Some((row, stored)) = &self.last {
            if *row == i {
                // `scratch` still holds this chunk's verified plain bytes.
                return Some(Ok(StoredChunk {
                    index: i,
                    hash: ci.hash,
                    len: ci.len,
                    codec: ci.codec,
                    data: stored.clone(),
                }));
            }
        }
        self.last = None;
        self.scratch.resize(ci.len as usize, 0);
        Some(
            self.decoder
                .decode(&r.file, &r.path, &ci, &mut self.scratch)
                .map(|()| {
                    let data = self.decoder.take_stored();
                    // Small frames (runs of zeros, repeated patterns) are
                    // kept for a repeat; large ones rarely repeat in a row.
                    if data.len() <= 4096 {
                        self.last = Some((i, data.clone()));
                    }
                    StoredChunk {
                        index: i,
                        hash: ci.hash,
                        len: ci.len,
                        codec: ci.codec,
                        data,
                    }
                }),
        )
    }
}
