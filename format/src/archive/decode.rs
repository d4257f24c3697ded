//! Chunk decoding for the archive reader: positioned reads (no shared file
//! cursor, so threads read concurrently), a reusable zstd context per thread,
//! and [`PartReader`], a streaming part reader that decodes ahead on worker
//! threads and returns chunks in order.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::reader::ChunkInfo;
use crate::chunk::{ChunkError, Codec};
use crate::error::FormatError;
use crate::id::hex;
use crate::model::PartInfo;

/// Read exactly `buf.len()` bytes at `offset` without moving a file cursor.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(buf, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let (mut done, mut buf) = (0u64, buf);
        while !buf.is_empty() {
            match file.seek_read(buf, offset + done) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    done += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Per-thread decoding state: a zstd context and the stored-bytes buffer.
pub struct Decoder {
    dctx: Option<zstd::bulk::Decompressor<'static>>,
    stored: Vec<u8>,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder {
            dctx: zstd::bulk::Decompressor::new().ok(),
            stored: Vec::new(),
        }
    }

    /// The stored bytes of the chunk decoded last.
    pub fn take_stored(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.stored)
    }

    /// Read chunk `ci` from `file`, decode it into `dst` (`ci.len` bytes)
    /// and check its blake3. On error `dst` holds garbage.
    pub fn decode(
        &mut self,
        file: &File,
        path: &Path,
        ci: &ChunkInfo,
        dst: &mut [u8],
    ) -> Result<(), FormatError> {
        self.stored.resize(ci.stored_len as usize, 0);
        read_exact_at(file, &mut self.stored, ci.offset).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                FormatError::Corrupt {
                    path: path.to_path_buf(),
                    offset: ci.offset,
                    message: "the archive ends inside a chunk (was it truncated while open?)"
                        .into(),
                }
            } else {
                FormatError::Io {
                    path: path.to_path_buf(),
                    source: e,
                }
            }
        })?;
        self.check_into(ci, dst).map_err(|e| FormatError::Corrupt {
            path: path.to_path_buf(),
            offset: ci.offset,
            message: format!("{e}: the archive is damaged"),
        })
    }

    fn check_into(&mut self, ci: &ChunkInfo, dst: &mut [u8]) -> Result<(), ChunkError> {
        let stored = &self.stored[..];
        match ci.codec {
            Codec::Raw => {
                if stored.len() != dst.len() {
                    return Err(ChunkError::Length {
                        hash: ci.hash,
                        expected: dst.len() as u64,
                        actual: stored.len() as u64,
                    });
                }
                dst.copy_from_slice(stored);
            }
            Codec::Zstd => {
                let r = match self.dctx.as_mut() {
                    Some(d) => d.decompress_to_buffer(stored, dst),
                    None => zstd::bulk::decompress_to_buffer(stored, dst),
                };
                let n = r.map_err(|e| ChunkError::Decompress {
                    hash: ci.hash,
                    reason: e.to_string(),
                })?;
                if n != dst.len() {
                    return Err(ChunkError::Length {
                        hash: ci.hash,
                        expected: dst.len() as u64,
                        actual: n as u64,
                    });
                }
            }
        }
        let actual = crate::chunk::hash(dst);
        if actual != ci.hash {
            return Err(ChunkError::Hash {
                expected: ci.hash,
                actual,
            });
        }
        Ok(())
    }
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

type Reply = Result<Vec<u8>, FormatError>;

struct Job {
    chunk: ChunkInfo,
    reply: SyncSender<Reply>,
}

/// Streams one part: worker threads decode up to `4 × threads` chunks ahead;
/// chunks come back in order; the whole part is hashed and checked against
/// the recording when its end is reached.
pub struct PartReader {
    path: Arc<Path>,
    table: Arc<[ChunkInfo]>,
    list: Arc<[u32]>,
    info: PartInfo,
    next: usize,
    window: usize,
    jobs: Option<SyncSender<Job>>,
    pending: VecDeque<Receiver<Reply>>,
    workers: Vec<JoinHandle<()>>,
    cur: Vec<u8>,
    pos: usize,
    hasher: blake3::Hasher,
    produced: u64,
    finished: bool,
    /// Set after an error: later reads fail too instead of looking like EOF.
    failed: bool,
}

impl PartReader {
    pub fn new(
        path: Arc<Path>,
        file: Arc<File>,
        table: Arc<[ChunkInfo]>,
        list: Arc<[u32]>,
        info: PartInfo,
        threads: usize,
    ) -> PartReader {
        let threads = threads.clamp(1, 64).min(list.len().max(1));
        let window = 4 * threads;
        let (tx, rx) = mpsc::sync_channel::<Job>(window);
        let rx = Arc::new(Mutex::new(rx));
        let workers = (0..threads)
            .map(|_| {
                let (rx, file, path) = (rx.clone(), file.clone(), path.clone());
                std::thread::spawn(move || decode_worker(&rx, &file, &path))
            })
            .collect();
        PartReader {
            path,
            table,
            list,
            info,
            next: 0,
            window,
            jobs: Some(tx),
            pending: VecDeque::with_capacity(window),
            workers,
            cur: Vec::new(),
            pos: 0,
            hasher: blake3::Hasher::new(),
            produced: 0,
            finished: false,
            failed: false,
        }
    }

    /// Keep the decode-ahead window full.
    fn dispatch(&mut self) -> io::Result<()> {
        while self.pending.len() < self.window && self.next < self.list.len() {
            let chunk = self.table[self.list[self.next] as usize];
            self.next += 1;
            let (reply, rx) = mpsc::sync_channel(1);
            let sent = self
                .jobs
                .as_ref()
                .is_some_and(|tx| tx.send(Job { chunk, reply }).is_ok());
            if !sent {
                return Err(self.stopped());
            }
            self.pending.push_back(rx);
        }
        Ok(())
    }

    fn stopped(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            FormatError::Invalid {
                path: self.path.to_path_buf(),
                message: "a decoding thread stopped unexpectedly".into(),
            },
        )
    }

    /// Called at the end of the part: compare length and blake3.
    fn finish(&mut self) -> io::Result<()> {
        self.finished = true;
        let actual = *self.hasher.finalize().as_bytes();
        if self.produced != self.info.len || actual != self.info.blake3 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                FormatError::Corrupt {
                    path: self.path.to_path_buf(),
                    offset: self.table.first().map_or(0, |c| c.offset),
                    message: format!(
                        "the {} part's chunks are intact but give {} bytes hashing to {}, not the recorded {} bytes hashing to {}: the index is damaged",
                        self.info.role,
                        self.produced,
                        hex(&actual),
                        self.info.len,
                        hex(&self.info.blake3)
                    ),
                },
            ));
        }
        Ok(())
    }
}

fn decode_worker(rx: &Mutex<Receiver<Job>>, file: &File, path: &Path) {
    let mut dec = Decoder::new();
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        let mut out = vec![0u8; job.chunk.len as usize];
        let r = dec.decode(file, path, &job.chunk, &mut out).map(|()| out);
        let _ = job.reply.send(r);
    }
}

impl Read for PartReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.failed {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                FormatError::Invalid {
                    path: self.path.to_path_buf(),
                    message: format!("an earlier read of the {} part failed", self.info.role),
                },
            ));
        }
        let r = self.read_inner(buf);
        if r.is_err() {
            self.failed = true;
        }
        r
    }
}

impl PartReader {
    fn read_inner(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos < self.cur.len() {
                let n = buf.len().min(self.cur.len() - self.pos);
                buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if self.finished || buf.is_empty() {
                return Ok(0);
            }
            self.dispatch()?;
            let Some(rx) = self.pending.pop_front() else {
                self.finish()?;
                return Ok(0);
            };
            let data = rx.recv().map_err(|_| self.stopped())?.map_err(|e| {
                self.finished = true;
                io::Error::new(io::ErrorKind::InvalidData, e)
            })?;
            self.hasher.update(&data);
            self.produced += data.len() as u64;
            self.cur = data;
            self.pos = 0;
        }
    }
}

impl Drop for PartReader {
    fn drop(&mut self) {
        self.jobs = None;
        self.pending.clear();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
