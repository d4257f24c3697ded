//! Shared history (spec/REMOTE.md, "Shared history"): replay history rows
//! travel with the recordings. A push writes the rows of the recordings it
//! pushes that the remote lacks as one immutable, content-addressed batch
//! `history/<ab>/<blake3>`; a pull merges the rows of the recordings it
//! pulls, by row identity (idempotent); `history NAME:` reads them through
//! the local copy (`history_cache`); `remote prune` compacts the batches
//! and drops the rows of removed recordings; `verify NAME:` decodes them.
//! Same objects in layouts 2 and 3.

use std::collections::HashSet;
use std::path::Path;

use rrstore_format::RecordingId;
use serde::{Deserialize, Serialize};

use super::client::Remote;
use super::error::Result;
use super::history_cache::{BadBatch, HistoryCache};
use super::v2::layout;
use crate::history::valid_uid;
use crate::{HistoryEntry, Store};

/// The prefix of every history batch.
pub const HISTORY: &str = "history/";
const BATCH_MAGIC: &[u8; 4] = b"RRH1";
/// The batch version this rrstore writes and the highest it reads.
pub const BATCH_VERSION: u32 = 1;
/// A batch holds at most this many rows (~4 MiB of MessagePack), so that
/// it stays far below the 16 MiB a reader decompresses.
pub const BATCH_MAX_ROWS: usize = 10_000;
/// A batch body is at most this large decompressed.
const MAX_BATCH: usize = 16 << 20;

/// The body of a batch: `"RRH1"` | zstd frame of this, MessagePack with
/// named fields; each row as `history --json` prints it, `id` 0.
#[derive(Serialize, Deserialize)]
struct Batch {
    version: u32,
    rows: Vec<HistoryEntry>,
}

/// `history/<ab>/<name>`.
pub fn batch_key(name: &[u8; 32]) -> String {
    let x = rrstore_format::id::hex(name);
    format!("{HISTORY}{}/{x}", &x[..2])
}

/// The name of a `history/<ab>/<name>` key.
pub fn batch_of_key(key: &str) -> Option<[u8; 32]> {
    layout::hash_of_key(key, HISTORY)
}

/// Encode `rows` as a batch: (its name, its body).
pub fn encode_batch(rows: &[HistoryEntry]) -> Result<([u8; 32], Vec<u8>), String> {
    let rows: Vec<HistoryEntry> = rows
        .iter()
        .map(|e| HistoryEntry { id: 0, ..e.clone() })
        .collect();
    let raw = rmp_serde::to_vec_named(&Batch {
        version: BATCH_VERSION,
        rows,
    })
    .map_err(|e| e.to_string())?;
    let mut body = BATCH_MAGIC.to_vec();
    body.extend_from_slice(&zstd::bulk::compress(&raw, 19).map_err(|e| e.to_string())?);
    Ok((*blake3::hash(&body).as_bytes(), body))
}

/// Decode batch `name`: its bytes hash to the name, the magic, the
/// decompressed size, the version and every row's identity are checked.
pub fn decode_batch(b: &[u8], name: &[u8; 32]) -> Result<Vec<HistoryEntry>, String> {
    if blake3::hash(b).as_bytes() != name {
        return Err("its bytes do not hash to its name".into());
    }
    let z = b
        .strip_prefix(&BATCH_MAGIC[..])
        .ok_or("not a history batch (bad magic)")?;
    let raw =
        zstd::bulk::decompress(z, MAX_BATCH).map_err(|e| format!("does not decompress: {e}"))?;
    let batch: Batch = rmp_serde::from_slice(&raw).map_err(|e| format!("does not decode: {e}"))?;
    if batch.version == 0 || batch.version > BATCH_VERSION {
        return Err(format!(
            "history batch version {} (this rrstore reads 1 to {BATCH_VERSION}): upgrade rrstore",
            batch.version
        ));
    }
    if let Some(e) = batch.rows.iter().find(|e| !valid_uid(&e.uid)) {
        return Err(format!("a row has no valid identity (`{}`)", e.uid));
    }
    Ok(batch.rows)
}

/// What sharing history moved.
#[derive(Clone, Debug, Default)]
pub struct Shared {
    /// Rows sent (push) or added to the store (pull).
    pub rows: u64,
    /// Batches written (push) or read from the remote (pull).
    pub batches: u64,
    /// Damaged batches, left out.
    pub bad: Vec<BadBatch>,
}

impl Shared {
    /// Warnings for a transfer report.
    pub fn warnings(&self) -> Vec<String> {
        self.bad
            .iter()
            .map(|b| {
                format!(
                    "history batch {} left out: {} (the recordings are not affected)",
                    b.key, b.reason
                )
            })
            .collect()
    }
}

/// Send the history rows of recordings `ids` that the remote lacks, as
/// batches. Recordings without rows cost no request.
pub fn push_rows(store: &Store, remote: &Remote, ids: &[RecordingId]) -> Result<Shared> {
    let want: HashSet<RecordingId> = ids.iter().copied().collect();
    let local: Vec<HistoryEntry> = store
        .history(None)?
        .into_iter()
        .filter(|e| want.contains(&e.recording) && valid_uid(&e.uid))
        .collect();
    let mut shared = Shared::default();
    if local.is_empty() {
        return Ok(shared);
    }
    let mut cache = HistoryCache::open(store.dir(), remote)?;
    shared.bad = cache.refresh(remote)?;
    let uids: Vec<&str> = local.iter().map(|e| e.uid.as_str()).collect();
    let there = cache.known(&uids)?;
    let new: Vec<HistoryEntry> = local
        .into_iter()
        .filter(|e| !there.contains(&e.uid))
        .collect();
    for part in new.chunks(BATCH_MAX_ROWS) {
        let (name, body) = encode_batch(part).map_err(|reason| crate::StoreError::Encode {
            what: "a history batch".into(),
            reason,
        })?;
        remote.put(&batch_key(&name), body)?;
        cache.add(&name, part)?;
        shared.batches += 1;
        shared.rows += part.len() as u64;
    }
    Ok(shared)
}

/// Merge the remote's history rows of recordings `ids` into the store.
pub fn pull_rows(store: &Store, remote: &Remote, ids: &[RecordingId]) -> Result<Shared> {
    let mut cache = HistoryCache::open(store.dir(), remote)?;
    let before = cache.batches()?.len() as u64;
    let mut shared = Shared {
        bad: cache.refresh(remote)?,
        ..Default::default()
    };
    shared.batches = (cache.batches()?.len() as u64).saturating_sub(before);
    let hex: Vec<String> = ids.iter().map(RecordingId::to_hex).collect();
    shared.rows = store.merge_history(&cache.rows(Some(&hex))?)?;
    Ok(shared)
}

/// The remote's history rows (all recordings), oldest first, read through
/// the local copy, and the damaged batches left out. Each row's `id` is
/// its number in the copy.
pub fn rows(dir: &Path, remote: &Remote) -> Result<(Vec<HistoryEntry>, Vec<BadBatch>)> {
    let mut cache = HistoryCache::open(dir, remote)?;
    let bad = cache.refresh(remote)?;
    Ok((cache.rows(None)?, bad))
}

/// What a prune did to the history.
#[derive(Clone, Debug, Default)]
pub struct Compacted {
    pub rows_kept: u64,
    pub rows_dropped: u64,
    pub batches_written: u64,
    pub batches_deleted: u64,
}

/// Compact the remote's history (the caller holds the exclusive lock):
/// the rows of recordings `live` into new batches, then every other batch
/// read deleted. Damaged batches are left as they are (`verify NAME:`
/// names them). Nothing is written when there is one batch and no row of
/// a removed recording.
pub fn compact(dir: &Path, remote: &Remote, live: &HashSet<RecordingId>) -> Result<Compacted> {
    let mut cache = HistoryCache::open(dir, remote)?;
    cache.refresh(remote)?;
    let all = cache.rows(None)?;
    let old = cache.batches()?;
    let (keep, dropped): (Vec<HistoryEntry>, Vec<HistoryEntry>) =
        all.into_iter().partition(|e| live.contains(&e.recording));
    let mut c = Compacted {
        rows_kept: keep.len() as u64,
        rows_dropped: dropped.len() as u64,
        ..Default::default()
    };
    if dropped.is_empty() && old.len() <= 1 {
        return Ok(c);
    }
    // The new batches first, then the old ones go: a reader sees every
    // live row throughout (in an old batch, a new one, or both).
    let mut written = HashSet::new();
    for part in keep.chunks(BATCH_MAX_ROWS) {
        let (name, body) = encode_batch(part).map_err(|reason| crate::StoreError::Encode {
            what: "a history batch".into(),
            reason,
        })?;
        remote.put(&batch_key(&name), body)?;
        written.insert(name);
        c.batches_written += 1;
    }
    let doomed: Vec<String> = old
        .iter()
        .filter(|n| !written.contains(*n))
        .map(batch_key)
        .collect();
    c.batches_deleted = remote.delete_all(&doomed)?;
    cache.refresh(remote)?;
    Ok(c)
}

/// `verify NAME:`: every batch read again (not from the copy) and decoded.
/// Returns (batches, rows, problems).
pub fn check(remote: &Remote) -> Result<(u64, u64, Vec<String>)> {
    let keys: Vec<String> = remote
        .list(HISTORY)?
        .into_iter()
        .filter(|k| batch_of_key(k).is_some())
        .collect();
    let (mut batches, mut rows, mut problems) = (0u64, 0u64, Vec::new());
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let (Some(name), Some(body)) = (batch_of_key(&key), body) else {
            return Ok(());
        };
        batches += 1;
        match decode_batch(&body, &name) {
            Ok(r) => rows += r.len() as u64,
            Err(reason) => problems.push(format!("{key}: {reason}")),
        }
        Ok(())
    })?;
    Ok((batches, rows, problems))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(uid: &str) -> HistoryEntry {
        HistoryEntry {
            id: 7,
            recording: RecordingId([3; 32]),
            image_hash: [1; 32],
            backend: "host".into(),
            device: "cpu".into(),
            runtime_versions: String::new(),
            started_at: 5,
            wall_ns: 1,
            kernel_ns: vec![2],
            output_blake3: Some([4; 32]),
            verdict: "verified".into(),
            detail: String::new(),
            num_teams: Some(1),
            num_threads: None,
            launch_overrides: String::new(),
            device_ordinal: Some(0),
            device_uuid: String::new(),
            placement: String::new(),
            machine: "a".into(),
            uid: uid.into(),
            compiled: None,
        }
    }

    #[test]
    fn batches_round_trip_and_are_checked() {
        let uid = "0123456789abcdef0123456789abcdef";
        let (name, body) = encode_batch(&[row(uid)]).unwrap();
        let back = decode_batch(&body, &name).unwrap();
        assert_eq!(back, vec![HistoryEntry { id: 0, ..row(uid) }]);
        assert_eq!(batch_of_key(&batch_key(&name)), Some(name));
        let mut bad = body.clone();
        let n = bad.len() - 1;
        bad[n] ^= 1;
        assert!(decode_batch(&bad, &name).unwrap_err().contains("hash"));
        let (name, body) = encode_batch(&[row("nope")]).unwrap();
        assert!(decode_batch(&body, &name).unwrap_err().contains("identity"));
    }
}
