//! Streaming `.rra` writer.
//!
//! The writer never knows a part's chunk list in advance, so it writes the
//! header, then each new chunk's stored bytes as soon as it is compressed,
//! and the manifest, index and trailer last. Memory stays bounded: at most
//! `4 × threads` chunks are in flight, plus the chunk table (about 60 bytes
//! per unique chunk).
//!
//! Pipeline: the calling thread reads each part (the [`PartSource`] need not
//! be `Send`), cuts it with FastCDC and hashes the whole part to check it
//! against the recording; worker threads blake3 and zstd-compress chunks;
//! the calling thread takes results back in stream order, drops chunks it
//! already wrote (dedup inside the archive) and writes the rest. Because
//! results are consumed in order and zstd is deterministic, the same input
//! and settings always give the same bytes, whatever the thread timing.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Mutex;

use super::cdc::{BlockChunker, Piece};
use super::layout::{
    Bytes32, ChunkEntry, ChunkingInfo, CompressionInfo, Header, Index, Manifest, PartEntry,
    Trailer, CHUNKING_ALGORITHM, COMPRESSION_CODEC, HEADER_LEN, MAJOR, MINOR,
};
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

/// What [`write`] did.
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
    write_labeled(rec, parts, out, opts, Path::new("<archive output>"))
}

/// [`write`] to `path` through a temporary file next to it, renamed over
/// `path` only once the archive is complete.
pub fn write_path(
    rec: &Recording,
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
        let stats = write_labeled(rec, parts, &mut buf, opts, path)?;
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

/// A chunk sent to a worker, and its reply slot.
struct Job {
    piece: Piece,
    reply: SyncSender<Done>,
}

/// A worker's result: the chunk hash and, when this worker was the first to
/// see the hash, the stored form.
struct Done {
    hash: ChunkHash,
    piece: Piece,
    /// `Some(None)`: store raw (the piece's bytes).
    stored: Option<Option<Vec<u8>>>,
}

/// zstd at `level`, or raw when compression does not shrink the chunk
/// (same rule as [`crate::chunk::compress`], with a reused context).
fn compress_with(cx: Option<&mut zstd::bulk::Compressor<'static>>, data: &[u8]) -> Option<Vec<u8>> {
    let z = cx?.compress(data).ok()?;
    (z.len() < data.len()).then_some(z)
}

fn worker(jobs: &Mutex<Receiver<Job>>, claimed: &Mutex<HashSet<ChunkHash>>, level: i32) {
    let mut cx = zstd::bulk::Compressor::new(level).ok();
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        let hash = crate::chunk::hash(job.piece.data());
        let first = claimed.lock().map(|mut s| s.insert(hash)).unwrap_or(true);
        let stored = first.then(|| compress_with(cx.as_mut(), job.piece.data()));
        // The writer may have stopped on an error; nothing to do then.
        let _ = job.reply.send(Done {
            hash,
            piece: job.piece,
            stored,
        });
    }
}

/// State of the calling thread while writing chunk payloads.
struct Sink<'p, W> {
    out: Counting<W>,
    path: &'p Path,
    level: i32,
    table: Vec<ChunkEntry>,
    by_hash: HashMap<ChunkHash, u32>,
    raw_chunks: u64,
    refs: u64,
}

impl<W: Write> Sink<'_, W> {
    /// Take one worker result (in stream order) and return its table index.
    fn take(&mut self, done: Done) -> Result<u32, FormatError> {
        self.refs += 1;
        if let Some(&i) = self.by_hash.get(&done.hash) {
            return Ok(i);
        }
        // A later duplicate may have claimed the hash first; then the stored
        // form is not here yet and we compress it ourselves (rare).
        let zstd = match done.stored {
            Some(s) => s,
            None => compress_with(
                zstd::bulk::Compressor::new(self.level).ok().as_mut(),
                done.piece.data(),
            ),
        };
        let data = done.piece.data();
        let (codec, stored) = match &zstd {
            Some(z) => (Codec::Zstd, &z[..]),
            None => (Codec::Raw, data),
        };
        let i = u32::try_from(self.table.len()).map_err(|_| FormatError::Invalid {
            path: self.path.to_path_buf(),
            message: "more than 4 billion distinct chunks: use larger chunk sizes".into(),
        })?;
        self.table.push(ChunkEntry(
            Bytes32(done.hash),
            self.out.pos,
            stored.len() as u32,
            data.len() as u32,
            codec as u8,
        ));
        if codec == Codec::Raw {
            self.raw_chunks += 1;
        }
        self.out.put(stored, self.path)?;
        self.by_hash.insert(done.hash, i);
        Ok(i)
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
    FormatError::Io {
        path: part_label(rec, role),
        source: e,
    }
}

fn part_label(rec: &Recording, role: PartRole) -> PathBuf {
    PathBuf::from(format!("{} ({role} part of {})", rec.stem, rec.kernel))
}

fn write_labeled<W: Write>(
    rec: &Recording,
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
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    }
    .clamp(1, 64);
    let window = 4 * threads;

    let mut sink = Sink {
        out: Counting { inner: out, pos: 0 },
        path,
        level: opts.level,
        table: Vec::new(),
        by_hash: HashMap::new(),
        raw_chunks: 0,
        refs: 0,
    };
    sink.out.put(
        &Header {
            major: MAJOR,
            minor: MINOR,
        }
        .encode(),
        path,
    )?;
    debug_assert_eq!(sink.out.pos, HEADER_LEN);

    let (job_tx, job_rx) = mpsc::sync_channel::<Job>(window);
    let job_rx = Mutex::new(job_rx);
    let claimed = Mutex::new(HashSet::new());
    let mut part_entries = Vec::with_capacity(rec.parts.len());

    std::thread::scope(|s| -> Result<(), FormatError> {
        for _ in 0..threads {
            s.spawn(|| worker(&job_rx, &claimed, opts.level));
        }
        let result = (|| {
            for info in &rec.parts {
                let role = info.role;
                let mut hasher = blake3::Hasher::new();
                let mut len = 0u64;
                let mut chunks = Vec::new();
                let mut pending: VecDeque<Receiver<Done>> = VecDeque::with_capacity(window);
                {
                    let src = parts
                        .open_part(role)
                        .map_err(|e| source_error(rec, role, e))?;
                    for c in BlockChunker::new(src, opts.chunking) {
                        let piece = c.map_err(|e| source_error(rec, role, e))?;
                        hasher.update(piece.data());
                        len += piece.data().len() as u64;
                        if pending.len() >= window {
                            if let Some(rx) = pending.pop_front() {
                                chunks.push(sink.take(recv(&rx, path)?)?);
                            }
                        }
                        let (reply, rx) = mpsc::sync_channel(1);
                        job_tx
                            .send(Job { piece, reply })
                            .map_err(|_| worker_gone(path))?;
                        pending.push_back(rx);
                    }
                }
                while let Some(rx) = pending.pop_front() {
                    chunks.push(sink.take(recv(&rx, path)?)?);
                }
                let actual = *hasher.finalize().as_bytes();
                if len != info.len || actual != info.blake3 {
                    return Err(FormatError::Invalid {
                        path: part_label(rec, role),
                        message: format!(
                            "the part now has {len} bytes with blake3 {}, but the recording says {} bytes with blake3 {}: the files changed after they were read; load the recording again",
                            hex(&actual),
                            info.len,
                            hex(&info.blake3)
                        ),
                    });
                }
                part_entries.push(PartEntry { role, len, chunks });
            }
            Ok(())
        })();
        drop(job_tx);
        result
    })?;

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

fn recv(rx: &Receiver<Done>, path: &Path) -> Result<Done, FormatError> {
    rx.recv().map_err(|_| worker_gone(path))
}

fn worker_gone(path: &Path) -> FormatError {
    FormatError::Invalid {
        path: path.to_path_buf(),
        message: "a compression thread stopped unexpectedly (out of memory?)".into(),
    }
}
