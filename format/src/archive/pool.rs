//! A small pool of scoped worker threads shared by the parallel chunk
//! scanner ([`super::scan`]) and the chunk compressors of the archive writer
//! and the store importer. Each worker owns one zstd context for its whole
//! life (creating one per chunk costs about as much as compressing a small
//! chunk).
//!
//! Jobs are closures; each returns its result through its own one-slot
//! channel, so a worker never blocks on a reply and the caller can take
//! results back in any order it likes (in stream order, for determinism).

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::stages::{self, Stage};

/// What a job gets to work with: the worker's own zstd context.
pub struct Worker {
    level: i32,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl Worker {
    fn new(level: i32) -> Worker {
        Worker {
            level,
            zstd: zstd::bulk::Compressor::new(level).ok(),
        }
    }

    /// zstd at the pool's level, or `None` when the frame would not be
    /// smaller than `data` or the chunk looks incompressible (store it raw);
    /// same rule as [`crate::chunk::compress`].
    pub fn compress(&mut self, data: &[u8]) -> Option<Vec<u8>> {
        let t = Instant::now();
        let worth = crate::chunk::worth_compressing(data);
        stages::add(Stage::Probe, t, data.len() as u64);
        if !worth {
            return None;
        }
        if self.zstd.is_none() {
            self.zstd = zstd::bulk::Compressor::new(self.level).ok();
        }
        let t = Instant::now();
        let z = self.zstd.as_mut()?.compress(data).ok();
        stages::add(Stage::Compress, t, data.len() as u64);
        let z = z?;
        (z.len() < data.len()).then_some(z)
    }
}

type Job = Box<dyn FnOnce(&mut Worker) + Send + 'static>;

/// Handle to submit jobs to the workers of [`with_pool`].
pub struct Pool {
    tx: SyncSender<Job>,
    threads: usize,
}

/// The pool's threads are gone (a job panicked, or out of memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolGone;

impl std::fmt::Display for PoolGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a worker thread stopped unexpectedly (out of memory?)")
    }
}

impl std::error::Error for PoolGone {}

impl From<PoolGone> for std::io::Error {
    fn from(e: PoolGone) -> Self {
        std::io::Error::other(e)
    }
}

impl Pool {
    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Queue `f`; its result arrives on the returned receiver. Blocks while
    /// the queue is full (which bounds the memory jobs hold).
    pub fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> T + Send + 'static,
    ) -> Result<Receiver<T>, PoolGone> {
        let (reply, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |w: &mut Worker| {
            // The caller may have stopped waiting (it failed); fine.
            let _ = reply.send(f(w));
        });
        self.tx.send(job).map_err(|_| PoolGone)?;
        Ok(rx)
    }
}

/// Wait for a job's result.
pub fn wait<T>(rx: &Receiver<T>) -> Result<T, PoolGone> {
    rx.recv().map_err(|_| PoolGone)
}

/// Run `f` with a pool of `threads` workers (0: one per available core)
/// compressing at zstd `level`, at most `queue` jobs waiting. The workers
/// finish the queued jobs and exit when `f` returns.
pub fn with_pool<R>(threads: usize, level: i32, queue: usize, f: impl FnOnce(&Pool) -> R) -> R {
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    }
    .clamp(1, 64);
    let (tx, rx) = mpsc::sync_channel::<Job>(queue.max(1));
    let rx = Arc::new(Mutex::new(rx));
    std::thread::scope(|s| {
        for _ in 0..threads {
            let rx = Arc::clone(&rx);
            s.spawn(move || {
                let mut w = Worker::new(level);
                loop {
                    let job = match rx.lock() {
                        Ok(r) => r.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    // A panicking job drops its reply sender (the caller
                    // sees PoolGone); keep the thread (and the scope) alive.
                    let run = std::panic::AssertUnwindSafe(|| job(&mut w));
                    if std::panic::catch_unwind(run).is_err() {
                        w = Worker::new(level);
                    }
                }
            });
        }
        let pool = Pool { tx, threads };
        let r = f(&pool);
        drop(pool);
        r
    })
}
