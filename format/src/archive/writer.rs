//! Streaming `.rra` writer.
//!
//! The writer never knows a part's chunk list in advance, so it writes the
//! header, then each new chunk's stored bytes as soon as it is compressed,
//! and the manifest, index and trailer last. Memory stays bounded: a few
//! 1 MiB blocks in flight per thread, plus the chunk table (about 60 bytes
//! per unique chunk).
//!
//! Pipeline ([`super::scan`], [`super::pool`]): each part is read once, in
//! 1 MiB blocks, by the workers when it is a plain file, else by the calling
//! thread (the [`PartSource`] need not be `Send`); workers cut each block
//! with FastCDC, blake3 its chunks and its BLAKE3 subtree (so the part's
//! hash comes out of the same pass), and zstd the chunks not seen before in
//! this archive, each with its own long-lived zstd context. The calling thread takes results back in stream order,
//! assigns chunk table rows in first-occurrence order and writes stored
//! bytes in that order. Because results are consumed in order and zstd is
//! deterministic, the same input and settings always give the same bytes,
//! whatever the thread timing.
//!
//! The part hashes either are checked ([`write()`]) or, for a recording loaded
//! without hashing its parts ([`crate::llvm::load_unhashed`]), are filled
//! in from that pass ([`write_unhashed`]); the manifest and the recording
//! ID are written last, so either way each part is read exactly once.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use super::layout::{
    Bytes32, ChunkEntry, ChunkingInfo, CompressionInfo, Header, Index, Manifest, PartEntry,
    Trailer, CHUNKING_ALGORITHM, COMPRESSION_CODEC, HEADER_LEN, MAJOR, MINOR, MINOR_ENVIRONMENT,
};
use super::pool::{self, PoolGone};
use super::scan::{part_scanner, Block, Span};
use crate::chunk::{ChunkHash, ChunkParams, Codec};
use crate::error::FormatError;
use crate::id::{hex, RecordingId};
use crate::model::{PartRole, PartSource, Recording};

/// Settings that change the archive's bytes (not its recording ID), plus
/// the thread count (which changes neither).
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// zstd level, 1..=19 (default 3).
    pub level: i32,
    pub chunking: ChunkParams,
    /// Compression threads; 0 = one per available core.
    pub threads: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            level: 3,
            chunking: ChunkParams::default(),
            threads: 0,
        }
    }
}

/// What [`write()`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteStats {
    pub id: RecordingId,
    /// Uncompressed bytes of all parts.
    pub part_bytes: u64,
    /// Chunk references over all parts.
    pub chunks: u64,
    /// Distinct chunks stored.
    pub unique_chunks: u64,
    /// Of those, how many are stored raw (zstd did not shrink them).
    pub raw_chunks: u64,
    /// Bytes of stored chunk payloads.
    pub payload_bytes: u64,
    /// Total archive length.
    pub archive_bytes: u64,
}

/// Smallest and largest accepted `level`.
pub const LEVELS: std::ops::RangeInclusive<i32> = 1..=19;

/// Write `rec` (whose part bytes come from `parts`) as an archive to `out`.
/// Fails if a part's bytes do not match the recording's length or blake3
/// (the files changed after they were loaded).
pub fn write(
    rec: &Recording,
    parts: &mut dyn PartSource,
    out: impl Write,
    opts: &WriteOptions,
) -> Result<WriteStats, FormatError> {
    let mut rec = rec.clone();
    let label = Path::new("<archive output>");
    write_labeled(&mut rec, Parts::Verify, parts, out, opts, label)
}

/// [`write()`] for a recording whose parts' blake3 are not known yet (only
/// their lengths, as [`crate::llvm::load_unhashed`] gives): each part's
/// blake3 is taken from the one pass that chunks it, stored into `rec`, and
/// the ID (in the returned stats) is computed at the end. Fails if a part's
/// length differs from `rec`'s (the files changed after they were loaded).
pub fn write_unhashed(
    rec: &mut Recording,
    parts: &mut dyn PartSource,
    out: impl Write,
    opts: &WriteOptions,
) -> Result<WriteStats, FormatError> {
    let label = Path::new("<archive output>");
    write_labeled(rec, Parts::Fill, parts, out, opts, label)
}

/// [`write()`] to `path` through a temporary file next to it, renamed over
/// `path` only once the archive is complete.
pub fn write_path(
    rec: &Recording,
    parts: &mut dyn PartSource,
    path: &Path,
    opts: &WriteOptions,
) -> Result<WriteStats, FormatError> {
    let mut rec = rec.clone();
    write_path_mode(&mut rec, Parts::Verify, parts, path, opts)
}

/// [`write_unhashed`] to `path`, like [`write_path`].
pub fn write_path_unhashed(
    rec: &mut Recording,
    parts: &mut dyn PartSource,
    path: &Path,
    opts: &WriteOptions,
) -> Result<WriteStats, FormatError> {
    write_path_mode(rec, Parts::Fill, parts, path, opts)
}

fn write_path_mode(
    rec: &mut Recording,
    mode: Parts,
    parts: &mut dyn PartSource,
    path: &Path,
    opts: &WriteOptions,
) -> Result<WriteStats, FormatError> {
    let wr = |source| FormatError::Write {
        path: path.to_path_buf(),
        source,
    };
    let name = path.file_name().ok_or_else(|| FormatError::Invalid {
        path: path.to_path_buf(),
        message: "the archive path names no file".into(),
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let file = std::fs::File::create(&tmp).map_err(wr)?;
    let result = (|| {
        let mut buf = io::BufWriter::with_capacity(1 << 20, file);
        let stats = write_labeled(rec, mode, parts, &mut buf, opts, path)?;
        // No fsync (like tar and zstd): the rename only guarantees that no
        // reader ever sees a partial archive under `path`.
        drop(buf.into_inner().map_err(|e| wr(e.into_error()))?);
        std::fs::rename(&tmp, path).map_err(wr)?;
        Ok(stats)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Output wrapper that counts bytes (chunk offsets are absolute).
struct Counting<W> {
    inner: W,
    pos: u64,
}

impl<W: Write> Counting<W> {
    fn put(&mut self, b: &[u8], path: &Path) -> Result<(), FormatError> {
        self.inner
            .write_all(b)
            .map_err(|source| FormatError::Write {
                path: path.to_path_buf(),
                source,
            })?;
        self.pos += b.len() as u64;
        Ok(())
    }
}

/// New chunks of one scanned block sent to a worker for compression: their
/// table rows are reserved; the stored forms come back in the same order
/// (`None`: store raw, the block's bytes).
struct Batch {
    block: Arc<Block>,
    spans: Vec<Span>,
    rx: Receiver<Vec<Option<Vec<u8>>>>,
}

/// State of the calling thread while writing chunk payloads.
struct Sink<'p, W> {
    out: Counting<W>,
    path: &'p Path,
    /// Table rows; rows of chunks still being compressed are placeholders.
    table: Vec<ChunkEntry>,
    by_hash: HashMap<ChunkHash, u32>,
    /// Next table row to write (rows are written in table order).
    written: usize,
    raw_chunks: u64,
    refs: u64,
}

impl<W: Write> Sink<'_, W> {
    /// Table row of a chunk, reserving a new one (and queueing the chunk in
    /// `batch`) the first time its hash is seen.
    fn row(&mut self, span: &Span, batch: &mut Vec<Span>) -> Result<u32, FormatError> {
        self.refs += 1;
        if let Some(&i) = self.by_hash.get(&span.hash) {
            return Ok(i);
        }
        let i = u32::try_from(self.table.len()).map_err(|_| FormatError::Invalid {
            path: self.path.to_path_buf(),
            message: "more than 4 billion distinct chunks: use larger chunk sizes".into(),
        })?;
        self.table
            .push(ChunkEntry(Bytes32(span.hash), 0, 0, span.len() as u32, 0));
        self.by_hash.insert(span.hash, i);
        batch.push(*span);
        Ok(i)
    }

    /// Write the stored forms of a batch (in table order).
    fn write_batch(&mut self, b: Batch) -> Result<(), FormatError> {
        let stored = pool::wait(&b.rx).map_err(|_| worker_gone(self.path))?;
        for (span, z) in b.spans.iter().zip(stored) {
            let data = &b.block[span.start..span.end];
            let (codec, bytes) = match &z {
                Some(z) => (Codec::Zstd, &z[..]),
                None => (Codec::Raw, data),
            };
            let row = &mut self.table[self.written];
            row.1 = self.out.pos;
            row.2 = bytes.len() as u32;
            row.4 = codec as u8;
            self.written += 1;
            if codec == Codec::Raw {
                self.raw_chunks += 1;
            }
            self.out.put(bytes, self.path)?;
        }
        Ok(())
    }
}

/// Turn a part source's `io::Error` back into the `FormatError` it carries,
/// or wrap it naming the part.
fn source_error(rec: &Recording, role: PartRole, e: io::Error) -> FormatError {
    if e.get_ref().is_some_and(|i| i.is::<FormatError>()) {
        if let Some(Ok(fe)) = e.into_inner().map(|i| i.downcast::<FormatError>()) {
            return *fe;
        }
        return FormatError::Invalid {
            path: part_label(rec, role),
            message: "the part could not be read".into(),
        };
    }
    if e.get_ref().is_some_and(|i| i.is::<PoolGone>()) {
        return worker_gone(&part_label(rec, role));
    }
    FormatError::Io {
        path: part_label(rec, role),
        source: e,
    }
}

fn part_label(rec: &Recording, role: PartRole) -> PathBuf {
    PathBuf::from(format!("{} ({role} part of {})", rec.stem, rec.kernel))
}

/// How the writer treats the recording's part lengths and hashes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    /// They are known: check the bytes read against them.
    Verify,
    /// Only lengths are known (e.g. [`crate::llvm::load_unhashed`]): check
    /// those, take the blake3 from the one pass the writer makes.
    Fill,
}

fn write_labeled<W: Write>(
    rec: &mut Recording,
    mode: Parts,
    parts: &mut dyn PartSource,
    out: W,
    opts: &WriteOptions,
    path: &Path,
) -> Result<WriteStats, FormatError> {
    if !LEVELS.contains(&opts.level) {
        return Err(FormatError::Invalid {
            path: path.to_path_buf(),
            message: format!(
                "zstd level {} is out of range: use {}..={}",
                opts.level,
                LEVELS.start(),
                LEVELS.end()
            ),
        });
    }
    opts.chunking.validate().map_err(|e| FormatError::Invalid {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;

    let mut sink = Sink {
        out: Counting { inner: out, pos: 0 },
        path,
        table: Vec::new(),
        by_hash: HashMap::new(),
        written: 0,
        raw_chunks: 0,
        refs: 0,
    };
    sink.out.put(
        &Header {
            major: MAJOR,
            minor: if rec.environment.is_some() {
                MINOR_ENVIRONMENT
            } else {
                MINOR
            },
        }
        .encode(),
        path,
    )?;
    debug_assert_eq!(sink.out.pos, HEADER_LEN);

    let threads = opts.threads;
    let mut part_entries = Vec::with_capacity(rec.parts.len());
    let mut infos = rec.parts.clone();
    let shown = rec.clone();
    pool::with_pool(threads, opts.level, 2 * threads.max(2) + 2, |pool| {
        let window = pool.threads() + 1;
        let mut pending: VecDeque<Batch> = VecDeque::new();
        for info in &mut infos {
            let role = info.role;
            let mut chunks = Vec::new();
            let mut scanner = part_scanner(parts, role, opts.chunking, window)
                .map_err(|e| source_error(&shown, role, e))?;
            while let Some(sb) = scanner
                .next(pool)
                .map_err(|e| source_error(&shown, role, e))?
            {
                let mut batch = Vec::new();
                for span in &sb.chunks {
                    chunks.push(sink.row(span, &mut batch)?);
                }
                if batch.is_empty() {
                    continue;
                }
                let block = Arc::clone(&sb.block);
                let spans = batch.clone();
                let rx = pool
                    .submit(move |w| {
                        spans
                            .iter()
                            .map(|s| w.compress(&block[s.start..s.end]))
                            .collect::<Vec<_>>()
                    })
                    .map_err(|_| worker_gone(path))?;
                pending.push_back(Batch {
                    block: sb.block,
                    spans: batch,
                    rx,
                });
                while pending.len() > window {
                    if let Some(b) = pending.pop_front() {
                        sink.write_batch(b)?;
                    }
                }
            }
            let (len, actual) = scanner.finish();
            let hash_ok = mode == Parts::Fill || actual == info.blake3;
            if len != info.len || !hash_ok {
                let said = match mode {
                    Parts::Verify => {
                        format!("{} bytes with blake3 {}", info.len, hex(&info.blake3))
                    }
                    Parts::Fill => format!("{} bytes", info.len),
                };
                return Err(FormatError::Invalid {
                    path: part_label(&shown, role),
                    message: format!(
                        "the part now has {len} bytes with blake3 {}, but the recording says {said}: the files changed after they were read; load the recording again",
                        hex(&actual),
                    ),
                });
            }
            info.blake3 = actual;
            part_entries.push(PartEntry { role, len, chunks });
        }
        while let Some(b) = pending.pop_front() {
            sink.write_batch(b)?;
        }
        Ok(())
    })?;
    rec.parts = infos;

    let payload_bytes = sink.out.pos - HEADER_LEN;
    let id = rec.id();
    let manifest = Manifest {
        id: Bytes32(id.0),
        recording: rec.clone(),
        chunking: ChunkingInfo {
            algorithm: CHUNKING_ALGORITHM.into(),
            min: opts.chunking.min,
            avg: opts.chunking.avg,
            max: opts.chunking.max,
        },
        compression: CompressionInfo {
            codec: COMPRESSION_CODEC.into(),
            level: opts.level,
        },
    };
    let index = Index {
        chunks: std::mem::take(&mut sink.table),
        parts: part_entries,
    };
    let encode_err = |e: rmp_serde::encode::Error| FormatError::Invalid {
        path: path.to_path_buf(),
        message: format!("cannot encode the archive manifest: {e}"),
    };
    let manifest_bytes = rmp_serde::to_vec_named(&manifest).map_err(encode_err)?;
    let index_bytes = rmp_serde::to_vec_named(&index).map_err(encode_err)?;
    let manifest_offset = sink.out.pos;
    sink.out.put(&manifest_bytes, path)?;
    let index_offset = sink.out.pos;
    sink.out.put(&index_bytes, path)?;
    let trailer = Trailer {
        manifest_offset,
        manifest_len: manifest_bytes.len() as u64,
        index_offset,
        index_len: index_bytes.len() as u64,
        manifest_blake3: *blake3::hash(&manifest_bytes).as_bytes(),
        index_blake3: *blake3::hash(&index_bytes).as_bytes(),
    };
    sink.out.put(&trailer.encode(), path)?;
    sink.out
        .inner
        .flush()
        .map_err(|source| FormatError::Write {
            path: path.to_path_buf(),
            source,
        })?;

    Ok(WriteStats {
        id,
        part_bytes: index.parts.iter().map(|p| p.len).sum(),
        chunks: sink.refs,
        unique_chunks: index.chunks.len() as u64,
        raw_chunks: sink.raw_chunks,
        payload_bytes,
        archive_bytes: sink.out.pos,
    })
}

fn worker_gone(path: &Path) -> FormatError {
    FormatError::Invalid {
        path: path.to_path_buf(),
        message: "a compression thread stopped unexpectedly (out of memory?)".into(),
    }
}
