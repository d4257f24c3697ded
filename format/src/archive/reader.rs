//! `.rra` reader: opens and validates an archive (header, trailer, checksums
//! of manifest and index, recording ID, the recording's consistency
//! ([`crate::validate`]), every index entry against the file),
//! then serves parts as a [`crate::PartSource`] and chunks as stored
//! ([`super::serve`]).
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
use super::decode::{read_exact_at, PartReader};
use super::layout::{
    Header, Index, Manifest, Trailer, CHUNKING_ALGORITHM, HEADER_LEN, MAJOR, MAX_INDEX_LEN,
    MAX_MANIFEST_LEN, TRAILER_LEN,
};
use crate::chunk::{ChunkHash, ChunkParams, Codec};
use crate::error::FormatError;
use crate::id::{hex, RecordingId};
use crate::model::{PartInfo, PartRole, Recording};

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
    pub(super) path: Arc<Path>,
    pub(super) file: Arc<File>,
    manifest: Manifest,
    id: RecordingId,
    pub(super) chunks: Arc<[ChunkInfo]>,
    /// Chunk table rows of each part, in the recording's part order.
    pub(super) parts: Vec<PartChunks>,
    pub(super) threads: usize,
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

    /// Read every part to its end, verifying every chunk and part hash.
    pub fn verify(&mut self) -> Result<(), FormatError> {
        for i in 0..self.parts.len() {
            let mut r = self.part_reader(i);
            io::copy(&mut r, &mut io::sink()).map_err(|e| self.unwrap_io(e))?;
        }
        Ok(())
    }

    pub(super) fn no_part(&self, role: PartRole) -> FormatError {
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

    pub(super) fn part_reader(&self, i: usize) -> PartReader {
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
}
