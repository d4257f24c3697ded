//! Where a chunking pass spends its time: process-wide counters of
//! thread-seconds and bytes per stage (read, block hash, cut, chunk hash,
//! compress, ...), added to by the scanner's workers, the compressors and
//! the store's importer, read by whoever wants a breakdown (`rrstore import`
//! prints it when `RRSTORE_IMPORT_STAGES` is set).
//!
//! Counters are relaxed atomics updated once per block or chunk (a clock
//! read costs ~25 ns against ~40 µs of work on a 64 KiB chunk), so they are
//! always on; nothing reads them unless asked. Several threads add at once,
//! so a stage's seconds are thread-seconds (CPU time when the thread was not
//! descheduled), to compare with `user+sys`, not with the wall time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One stage of a chunking pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Reading part bytes into a block (`pread`/`read`: the page-cache copy).
    Read,
    /// The block's BLAKE3 subtree (the part's hash).
    BlockHash,
    /// FastCDC cutting.
    Cut,
    /// blake3 of each chunk.
    ChunkHash,
    /// The calling thread: resynchronizing chunk boundaries between blocks
    /// (its cuts and extension reads are also counted in `Cut` and `Read`).
    Resync,
    /// Index lookups of chunks (the calling thread).
    Lookup,
    /// Deciding whether a chunk is worth compressing (sampled entropy).
    Probe,
    /// zstd of the chunks that were worth it.
    Compress,
    /// Waiting for the pack writer another worker holds.
    AppendWait,
    /// Appending entries to the pack (buffer copies, `write`, write-back start).
    Append,
    /// Making packs durable (`fdatasync`, directory fsyncs).
    Sync,
    /// The index transaction.
    Commit,
}

/// Every stage, in pipeline order.
pub const ALL: [Stage; 12] = [
    Stage::Read,
    Stage::BlockHash,
    Stage::Cut,
    Stage::ChunkHash,
    Stage::Resync,
    Stage::Lookup,
    Stage::Probe,
    Stage::Compress,
    Stage::AppendWait,
    Stage::Append,
    Stage::Sync,
    Stage::Commit,
];

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Read => "read",
            Stage::BlockHash => "block hash",
            Stage::Cut => "cut (FastCDC)",
            Stage::ChunkHash => "chunk hash",
            Stage::Resync => "resync",
            Stage::Lookup => "index lookup",
            Stage::Probe => "compress probe",
            Stage::Compress => "zstd",
            Stage::AppendWait => "pack lock wait",
            Stage::Append => "pack append",
            Stage::Sync => "fdatasync",
            Stage::Commit => "index commit",
        }
    }
}

const N: usize = ALL.len();

static NANOS: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
static BYTES: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
/// Blocks whose candidate chunks came from the block memo (no cut, no
/// chunk hash), and blocks scanned.
static MEMO_HITS: AtomicU64 = AtomicU64::new(0);
static BLOCKS: AtomicU64 = AtomicU64::new(0);
/// Of the memo hits, those that also took the chunk into the next block.
static TAILS: AtomicU64 = AtomicU64::new(0);

/// Count `bytes` and the time since `since` against `stage`.
pub fn add(stage: Stage, since: Instant, bytes: u64) {
    let ns = since.elapsed().as_nanos() as u64;
    NANOS[stage as usize].fetch_add(ns, Ordering::Relaxed);
    BYTES[stage as usize].fetch_add(bytes, Ordering::Relaxed);
}

/// Count one scanned block, `memo` when its candidates were memoized.
pub fn block(memo: bool) {
    BLOCKS.fetch_add(1, Ordering::Relaxed);
    if memo {
        MEMO_HITS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Count a memoized block whose tail was taken from the memo too.
pub fn tail() {
    TAILS.fetch_add(1, Ordering::Relaxed);
}

/// Memoized blocks whose tail came from the memo, so far.
pub fn tails() -> u64 {
    TAILS.load(Ordering::Relaxed)
}

/// One stage's totals.
#[derive(Clone, Copy, Debug)]
pub struct Total {
    pub stage: Stage,
    pub secs: f64,
    pub bytes: u64,
}

/// The totals so far, and (blocks scanned, blocks found in the memo).
pub fn snapshot() -> (Vec<Total>, u64, u64) {
    let totals = ALL
        .iter()
        .map(|&stage| Total {
            stage,
            secs: NANOS[stage as usize].load(Ordering::Relaxed) as f64 / 1e9,
            bytes: BYTES[stage as usize].load(Ordering::Relaxed),
        })
        .collect();
    (
        totals,
        BLOCKS.load(Ordering::Relaxed),
        MEMO_HITS.load(Ordering::Relaxed),
    )
}

/// A table of the totals: stage, thread-seconds, MB, MB/s per thread.
pub fn report() -> String {
    let (totals, blocks, hits) = snapshot();
    let mut s = String::from("stage              thread-s        MB   MB/s/thread\n");
    let mut sum = 0.0;
    for t in totals.iter().filter(|t| t.secs > 0.0 || t.bytes > 0) {
        sum += t.secs;
        let mb = t.bytes as f64 / 1e6;
        let rate = if t.secs > 0.0 { mb / t.secs } else { 0.0 };
        s.push_str(&format!(
            "{:<16} {:>10.4} {:>9.1} {:>13.0}\n",
            t.stage.name(),
            t.secs,
            mb,
            rate
        ));
    }
    s.push_str(&format!(
        "{:<16} {:>10.4}\nblocks scanned {blocks}, candidates from the block memo {hits} \
         ({} with the chunk into the next block)\n",
        "sum",
        sum,
        tails()
    ));
    s
}
