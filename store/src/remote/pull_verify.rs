//! The last check of `pull` before a recording commits: every new part is
//! read back from the local store and its length and blake3 compared with
//! the part's (the part object is not self-verifying: a remote could name
//! intact nodes and chunks that assemble other bytes). Reading back is
//! every logical byte of the pull, decoded and hashed (once: the part's
//! hash covers its chunks, which were checked against their names on
//! arrival), so the parts of a recording are checked on up to one lane
//! per core. The calling
//! thread, which owns the store's connection, looks the chunks up and
//! hands them to the lanes in batches through bounded channels (memory
//! stays at a few batches whatever the part's size); each lane reads from
//! its own pack handles. A chunk repeated back to back (zero pages) is
//! read once.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use rrstore_format::chunk::ChunkHash;

use super::error::Result;
use crate::pack::reader::{ChunkLoc, PackFiles, ReadError};
use crate::{Store, StoreError};

/// Chunks per message to a lane.
const BATCH: usize = 64;
/// Messages queued per lane.
const QUEUE: usize = 4;

/// A part to check: its blake3, length and chunk list.
pub(super) struct NewPart<'a> {
    pub hash: [u8; 32],
    pub len: u64,
    pub chunks: &'a [ChunkHash],
}

/// What the check of one part found: `Ok(true)` intact; `Ok(false)` a
/// chunk vanished (gc), retry; `Err(why)` the remote's lists do not
/// describe the part.
pub(super) type Verdict = std::result::Result<bool, String>;

enum Msg {
    /// Chunks of part `.0`, in order; `None`: the index no longer has it.
    Chunks(usize, Vec<Option<ChunkLoc>>),
    /// Part `.0` has had all its chunks.
    End(usize),
}

/// Check every part of `parts` (in one read transaction).
pub(super) fn verify_parts(store: &Store, parts: &[NewPart]) -> Result<Vec<Verdict>> {
    store.xfer_reading(|store| verify_in(store, parts))
}

fn verify_in(store: &Store, parts: &[NewPart]) -> Result<Vec<Verdict>> {
    let lanes = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(parts.len())
        .max(1);
    let mut out: Vec<Verdict> = vec![Ok(true); parts.len()];
    std::thread::scope(|s| -> Result<()> {
        let mut txs: Vec<SyncSender<Msg>> = Vec::new();
        let mut handles = Vec::new();
        for _ in 0..lanes {
            let (tx, rx) = sync_channel::<Msg>(QUEUE);
            let dir = store.dir();
            handles.push(s.spawn(move || lane(dir, parts, rx)));
            txs.push(tx);
        }
        // Lane l checks parts l, l + lanes, ... one after the other; the
        // lanes are fed a batch each in turn, so none waits on another's part.
        let mut part: Vec<usize> = (0..lanes).collect();
        let mut at: Vec<usize> = vec![0; lanes];
        let mut sent_all = true;
        'feed: loop {
            let mut any = false;
            for l in 0..lanes {
                let Some(p) = parts.get(part[l]) else {
                    continue;
                };
                any = true;
                let msg = if at[l] >= p.chunks.len() {
                    let i = part[l];
                    (part[l], at[l]) = (i + lanes, 0);
                    Msg::End(i)
                } else {
                    let end = (at[l] + BATCH).min(p.chunks.len());
                    let locs = p.chunks[at[l]..end]
                        .iter()
                        .map(|c| store.xfer_chunk_loc(c))
                        .collect::<crate::Result<Vec<_>>>()?;
                    at[l] = end;
                    Msg::Chunks(part[l], locs)
                };
                if txs[l].send(msg).is_err() {
                    // The lane stopped on an error: joining it says why.
                    sent_all = false;
                    break 'feed;
                }
            }
            if !any {
                break;
            }
        }
        drop(txs);
        for h in handles {
            let done = h
                .join()
                .map_err(|_| StoreError::Internal("a part check lane panicked".into()))??;
            for (i, v) in done {
                out[i] = v;
            }
        }
        if !sent_all {
            return Err(StoreError::Internal("a part check lane stopped early".into()).into());
        }
        Ok(())
    })?;
    Ok(out)
}

/// One lane: hash the parts whose chunks arrive on `rx`; returns each
/// part's verdict.
fn lane(
    dir: &std::path::Path,
    parts: &[NewPart],
    rx: Receiver<Msg>,
) -> Result<Vec<(usize, Verdict)>> {
    let mut packs = PackFiles::new(dir);
    let mut done = Vec::new();
    // The part being hashed: its index, hasher, bytes so far, and whether
    // a chunk was missing.
    let mut cur: Option<(usize, blake3::Hasher, u64, bool)> = None;
    let mut buf = Vec::new();
    let mut last: Option<ChunkHash> = None;
    for msg in rx {
        match msg {
            Msg::Chunks(i, locs) => {
                if cur.as_ref().is_none_or(|c| c.0 != i) {
                    cur = Some((i, blake3::Hasher::new(), 0, false));
                    last = None;
                }
                let Some((_, hasher, total, gone)) = cur.as_mut() else {
                    continue;
                };
                for loc in locs {
                    if *gone {
                        break;
                    }
                    let Some(loc) = loc else {
                        *gone = true;
                        break;
                    };
                    if last != Some(loc.hash) {
                        buf.resize(loc.len as usize, 0);
                        match packs.read_into_unverified(&loc, &mut buf) {
                            Ok(()) => last = Some(loc.hash),
                            Err(ReadError::Missing(_)) => {
                                *gone = true;
                                break;
                            }
                            Err(e) => {
                                return Err(StoreError::ReadBack {
                                    chunk: rrstore_format::id::hex(&loc.hash),
                                    part: rrstore_format::id::hex(&parts[i].hash),
                                    reason: e.to_string(),
                                }
                                .into())
                            }
                        }
                    }
                    hasher.update(&buf);
                    *total += buf.len() as u64;
                }
            }
            Msg::End(i) => {
                let (hasher, total, gone) = match cur.take() {
                    Some((j, h, t, g)) if j == i => (h, t, g),
                    // A part without chunks.
                    _ => (blake3::Hasher::new(), 0, false),
                };
                let p = &parts[i];
                let v = if gone {
                    Ok(false)
                } else if total != p.len || hasher.finalize().as_bytes() != &p.hash {
                    Err(format!(
                        "its chunk lists assemble {total} bytes that do not hash to the part's blake3"
                    ))
                } else {
                    Ok(true)
                };
                done.push((i, v));
            }
        }
    }
    Ok(done)
}
