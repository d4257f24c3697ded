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
//! read once, and a compressed chunk is decoded once per pull while the
//! decoded bytes fit [`Decoded`]'s budget: the parts of one application run
//! share most of their chunks (the arena before and after each launch),
//! and zstd decoding was the largest cost of the check.

use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use rrstore_format::chunk::{ChunkHash, Codec};

use crate::pack::reader::{ChunkLoc, PackFiles, ReadError};
use crate::remote::error::Result;
use crate::{Store, StoreError};

/// Chunks per message to a lane.
const BATCH: usize = 64;
/// Decoded bytes [`Decoded`] keeps at most; when full it starts over (the
/// recordings of a pull come one after the other, and neighbours share
/// the most).
const DECODED_BUDGET: usize = 64 << 20;

/// The decoded bytes of compressed chunks the part checks of one pull read,
/// shared by their lanes (a raw chunk is a read, as cheap as a copy).
#[derive(Default)]
pub(super) struct Decoded {
    /// The chunks' bytes, and their total length.
    map: Mutex<(DecodedMap, usize)>,
}

type DecodedMap = HashMap<ChunkHash, Arc<[u8]>>;

impl Decoded {
    fn get(&self, h: &ChunkHash) -> Option<Arc<[u8]>> {
        self.map.lock().ok()?.0.get(h).cloned()
    }

    fn put(&self, h: ChunkHash, bytes: &[u8]) {
        if bytes.len() > DECODED_BUDGET / 8 {
            return;
        }
        let Ok(mut m) = self.map.lock() else { return };
        let (map, used) = &mut *m;
        if *used + bytes.len() > DECODED_BUDGET {
            map.clear();
            *used = 0;
        }
        if map.insert(h, bytes.into()).is_none() {
            *used += bytes.len();
        }
    }
}
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
pub(super) fn verify_parts(
    store: &Store,
    parts: &[NewPart],
    decoded: &Decoded,
) -> Result<Vec<Verdict>> {
    store.xfer_reading(|store| verify_in(store, parts, decoded))
}

fn verify_in(store: &Store, parts: &[NewPart], decoded: &Decoded) -> Result<Vec<Verdict>> {
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
            handles.push(s.spawn(move || lane(dir, parts, decoded, rx)));
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
    decoded: &Decoded,
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
                        let zstd = loc.codec == Codec::Zstd;
                        if let Some(bytes) = zstd.then(|| decoded.get(&loc.hash)).flatten() {
                            buf.clear();
                            buf.extend_from_slice(&bytes);
                        } else {
                            buf.resize(loc.len as usize, 0);
                            match packs.read_into_unverified(&loc, &mut buf) {
                                Ok(()) if zstd => decoded.put(loc.hash, &buf),
                                Ok(()) => {}
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
                        last = Some(loc.hash);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{find_sources, ImportOptions};
    use rrstore_tests::fixtures;

    type Part = ([u8; 32], u64, Vec<ChunkHash>);

    /// A store holding the fixture recordings, and its parts.
    fn stored() -> (tempfile::TempDir, Store, Vec<Part>) {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(tmp.path().join("s")).unwrap();
        for s in &find_sources(&[fixtures().join("llvm22-host")]).unwrap() {
            store
                .import_source(s, &ImportOptions::default(), &mut |_| {})
                .unwrap();
        }
        let mut parts = Vec::new();
        store
            .xfer_each_part(&mut |h, refs| {
                let len = refs.iter().map(|r| u64::from(r.1)).sum();
                parts.push((h, len, refs.iter().map(|r| r.0).collect()));
            })
            .unwrap();
        assert!(parts.len() >= 8, "{} parts", parts.len());
        (tmp, store, parts)
    }

    fn check(store: &Store, parts: &[Part], decoded: &Decoded) -> Result<Vec<Verdict>> {
        let new: Vec<NewPart> = parts
            .iter()
            .map(|(hash, len, chunks)| NewPart {
                hash: *hash,
                len: *len,
                chunks,
            })
            .collect();
        verify_parts(store, &new, decoded)
    }

    fn packs(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for d in std::fs::read_dir(dir.join("packs")).unwrap() {
            let d = d.unwrap().path();
            if d.is_dir() {
                out.extend(std::fs::read_dir(&d).unwrap().map(|f| f.unwrap().path()));
            }
        }
        out
    }

    #[test]
    fn intact_parts_pass_and_others_are_told_apart() {
        let (_t, store, parts) = stored();
        let all = check(&store, &parts, &Decoded::default()).unwrap();
        assert!(all.iter().all(|v| *v == Ok(true)), "{all:?}");
        // Lists that assemble other bytes, and a chunk the index lacks
        // (gc removed it: try again).
        let mut wrong = parts[0].clone();
        wrong.0[0] ^= 1;
        let mut gone = parts[1].clone();
        gone.2.push([7; 32]);
        let v = check(&store, &[wrong, gone], &Decoded::default()).unwrap();
        assert!(
            matches!(&v[0], Err(why) if why.contains("do not hash")),
            "{v:?}"
        );
        assert_eq!(v[1], Ok(false));
    }

    /// Damaged packs: a chunk that cannot be read back fails the check
    /// with the chunk and part named (or its bytes fail the part's hash);
    /// a compressed chunk already decoded in this pull is not read again.
    #[test]
    fn unreadable_chunks_fail_and_decoded_ones_are_not_read_again() {
        let (t, store, parts) = stored();
        let decoded = Decoded::default();
        assert!(check(&store, &parts, &decoded)
            .unwrap()
            .iter()
            .all(|v| *v == Ok(true)));
        let cached: usize = decoded.map.lock().unwrap().0.len();
        assert!(cached > 0, "no compressed chunk in the fixtures");
        for p in packs(&t.path().join("s")) {
            let mut b = std::fs::read(&p).unwrap();
            let n = b.len();
            for x in &mut b[64.min(n)..] {
                *x = !*x;
            }
            std::fs::write(&p, b).unwrap();
        }
        let ok = |r: &Result<Vec<Verdict>>| matches!(r, Ok(v) if v.iter().all(|v| *v == Ok(true)));
        let fresh = check(&store, &parts, &Decoded::default());
        assert!(!ok(&fresh), "damaged packs passed");
        if let Err(e) = &fresh {
            assert!(e.to_string().contains("chunk"), "{e}");
        }
        // Parts made only of compressed chunks pass from what was decoded.
        let locs = |p: &Part| -> Vec<ChunkLoc> {
            p.2.iter()
                .map(|c| store.xfer_chunk_loc(c).unwrap().unwrap())
                .collect()
        };
        let compressed: Vec<Part> = parts
            .iter()
            .filter(|p| !p.2.is_empty() && locs(p).iter().all(|l| l.codec == Codec::Zstd))
            .cloned()
            .collect();
        assert!(!compressed.is_empty(), "no part of compressed chunks only");
        assert!(ok(&check(&store, &compressed, &decoded)));
        assert!(!ok(&check(&store, &compressed, &Decoded::default())));
    }

    #[test]
    fn the_budget_starts_over_when_full() {
        let d = Decoded::default();
        let big = vec![1u8; DECODED_BUDGET / 8];
        for i in 0..9u8 {
            d.put([i; 32], &big);
        }
        let (map, used) = &*d.map.lock().unwrap();
        assert!(
            *used <= DECODED_BUDGET && map.len() == 1,
            "{} {used}",
            map.len()
        );
        assert!(map.contains_key(&[8; 32]));
    }
}
