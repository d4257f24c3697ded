//! `pull`: bring recordings (and images of the image library) from a
//! remote into the local store, fetching only the chunk-list nodes and
//! chunks the store lacks. Every object is checked on arrival (manifest
//! against the recording ID, nodes against their name, chunks against their
//! blake3, each new part's bytes against the part's blake3), and a recording
//! enters the local index only after all of its parts are stored and
//! verified. What the recordings lack is first fetched for all of them at
//! once (`prefetch`: manifests, part objects, tree nodes (`nodes`;
//! `known_trees`: the trees derivable from local parts) and chunks
//! (`chunks`)), then each is checked (`verify`) and committed in turn.
//! Chunks are indexed as they arrive (in batches), so an interrupted pull
//! does not fetch them again; the pull's commits are made durable together
//! at its end (spec/STORE.md, "Pull durability"). A recording whose objects
//! are corrupt on the remote is left out and listed in the report's
//! `damaged`; the others are still pulled. Then the history rows of the
//! recordings pulled (or already there) are merged (`history`).

mod chunks;
mod known_trees;
mod nodes;
mod prefetch;
mod verify;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use rrstore_format::chunk::ChunkHash;
use rrstore_format::{Recording, RecordingId};

use self::known_trees::Known;
use self::verify::{verify_parts, Decoded, NewPart};
use crate::pack::writer::PackWriter;
use crate::remote::blobs::Blobs;
use crate::remote::client::Remote;
use crate::remote::error::{RemoteError, Result};
use crate::remote::list::Selected;
use crate::remote::local::PulledPart;
use crate::remote::v2::layout::{self, ChunkRef, Manifest, PartObject};
use crate::remote::v3::Kind;
use crate::remote::{Damaged, Event, TransferReport};
use crate::Store;

/// How often one recording or image is pulled again when gc removed
/// something its commit needs.
const PULL_ATTEMPTS: u32 = 3;

/// A fetched chunk-list node.
pub(super) enum Fetched {
    Leaf(Vec<ChunkRef>),
    Inner(Vec<[u8; 32]>),
}

/// State shared by the recordings (and images) of one pull.
pub(crate) struct Session<'a> {
    pub store: &'a mut Store,
    pub remote: &'a Remote,
    /// Where blobs are: the index cache (version 3) or their own objects.
    pub blobs: Blobs<'a>,
    pub report: TransferReport,
    /// Local trees cut with the v1 / v2 scheme, built on first use.
    pub(super) v1: Option<Known>,
    pub(super) v2: Option<Known>,
    /// Nodes fetched in this pull (never fetched twice).
    pub(super) fetched: HashMap<[u8; 32], Fetched>,
    /// Chunk batches indexed so far (`chunks`).
    pub(super) batches: u64,
    /// The local pack pulled chunks are appended to, kept open across the
    /// recordings of the pull until it is full (`chunks`).
    pub(super) pack: Option<PackWriter>,
    /// The pull's commits are not durable yet (`Store::xfer_pull_durable`).
    undurable: bool,
    /// Part objects fetched by the prefetch (`prefetch`), with where.
    pub(super) prefetched: HashMap<[u8; 32], (String, PartObject)>,
    /// Bytes of the manifests this pull fetched.
    pub(super) manifest_bytes: u64,
    /// Manifest bodies fetched when the session opened, by key (`None`:
    /// the object does not exist), taken by the prefetch.
    pub(super) opened: HashMap<String, Option<Vec<u8>>>,
    /// Tree nodes fetched ahead of their level (`prefetch`), checked
    /// against their names, not decoded yet.
    pub(super) node_bodies: HashMap<[u8; 32], Vec<u8>>,
    /// Compressed chunks the part checks decoded (`verify`).
    decoded: Decoded,
}

impl Drop for Session<'_> {
    /// A pull that stops on an error still makes what it committed durable
    /// and puts the connection back to `synchronous=FULL`.
    fn drop(&mut self) {
        if self.undurable {
            let _ = self.store.xfer_pull_durable();
        }
    }
}

pub(crate) fn corrupt(remote: &Remote, key: &str, reason: String) -> RemoteError {
    RemoteError::Corrupt {
        remote: remote.name.clone(),
        key: key.to_string(),
        reason,
    }
}

/// Pull the `wanted` recordings (with their manifests, when already
/// fetched) into `store`, and every image of the remote's image library
/// when `images`. Those the selection found damaged start the report's
/// `damaged`.
pub fn pull(
    store: &mut Store,
    remote: &Remote,
    wanted: Selected,
    images: bool,
    progress: &mut dyn FnMut(Event),
) -> Result<TransferReport> {
    // The manifests the pull needs come in the session's first round.
    let mut need = Vec::new();
    for (id, m) in &wanted.recordings {
        if m.is_none() && !store.contains(id)? {
            need.push(*id);
        }
    }
    let mut s = Session::new(store, remote, &need)?;
    s.report.damaged = wanted.damaged;
    s.pull_recordings(wanted.recordings, progress)?;
    if images {
        s.pull_images(progress)?;
    }
    // The rows of every recording the store now has from the remote
    // (spec/REMOTE.md, "Shared history").
    progress(Event::Phase("merging the replay history".into()));
    let ids: Vec<RecordingId> = s
        .report
        .ids
        .iter()
        .chain(&s.report.present_ids)
        .filter_map(|i| i.parse().ok())
        .collect();
    if !ids.is_empty() {
        let shared = crate::remote::history::pull_rows(s.store, remote, &ids)?;
        s.report.history_rows = shared.rows;
        s.report.history_batches = shared.batches;
        s.report.warnings.extend(shared.warnings());
    }
    // Before `finish`: the merged rows are made durable with the pull.
    s.finish()
}

impl<'a> Session<'a> {
    /// Open a pull's session; the manifests of `manifests` are fetched in
    /// its first round, with the layout marker and the index listing.
    pub fn new(
        store: &'a mut Store,
        remote: &'a Remote,
        manifests: &[RecordingId],
    ) -> Result<Session<'a>> {
        let before = remote.received.load(Ordering::Relaxed);
        let keys: Vec<String> = manifests.iter().map(layout::recording_key).collect();
        let (blobs, bodies) = Blobs::open_lazy(store.dir(), remote, &keys)?;
        let manifest_bytes: u64 = bodies.iter().flatten().map(|b| b.len() as u64).sum();
        let mut t = blobs.tally.get();
        t.index +=
            (remote.received.load(Ordering::Relaxed) - before).saturating_sub(manifest_bytes);
        blobs.tally.set(t);
        let mut report = TransferReport {
            layout: if blobs.cache.is_some() { 3 } else { 2 },
            ..Default::default()
        };
        report.warnings = blobs
            .bad_index
            .iter()
            .map(|b| format!("index object {} left out: {}", b.key, b.reason))
            .collect();
        store.xfer_pull_begin()?;
        Ok(Session {
            store,
            remote,
            blobs,
            report,
            v1: None,
            v2: None,
            fetched: HashMap::new(),
            batches: 0,
            pack: None,
            undurable: true,
            prefetched: HashMap::new(),
            manifest_bytes,
            opened: keys.into_iter().zip(bodies).collect(),
            node_bodies: HashMap::new(),
            decoded: Decoded::default(),
        })
    }

    /// Make the pull's commits durable (one sync); then the report, with
    /// `bytes` and `metadata_bytes` from what the remote received in total.
    pub fn finish(mut self) -> Result<TransferReport> {
        self.undurable = false;
        self.store.xfer_pull_durable()?;
        for b in self.blobs.lazy_bad() {
            self.report
                .warnings
                .push(format!("index object {} left out: {}", b.key, b.reason));
        }
        let got = self.remote.received.load(Ordering::Relaxed);
        self.report.metadata_bytes = got.saturating_sub(self.report.chunk_bytes);
        self.report.bytes = self.report.chunk_bytes + self.report.metadata_bytes;
        self.report.requests = self.remote.requests.load(Ordering::Relaxed);
        let mut t = self.blobs.tally.get();
        t.manifests = self.manifest_bytes;
        let counted = t.manifests + t.parts + t.nodes + t.chunks + t.index + t.gaps;
        t.other = got.saturating_sub(counted);
        self.report.received = Some(t);
        Ok(std::mem::take(&mut self.report))
    }

    pub fn pull_recordings(
        &mut self,
        wanted: Vec<(RecordingId, Option<Manifest>)>,
        progress: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let mut todo = Vec::new();
        for (id, m) in wanted {
            if self.store.contains(&id)? {
                self.report.present += 1;
                self.report.present_ids.push(id.to_hex());
            } else {
                todo.push((id, m));
            }
        }
        self.prefetch(&mut todo, progress)?;
        for (id, m) in todo {
            // A damaged recording is left out and reported; the others
            // still come (the caller fails the command at the end).
            let outcome = match m {
                Some(m) => Ok(m),
                None => {
                    let before = self.remote.received.load(Ordering::Relaxed);
                    let m = fetch_manifest(self.remote, &id);
                    self.manifest_bytes += self.remote.received.load(Ordering::Relaxed) - before;
                    m
                }
            }
            .and_then(|m| {
                progress(Event::Phase(format!(
                    "pulling {} {}",
                    id.short(),
                    m.recording.kernel
                )));
                let added = self.retry(&format!("recording {id}"), &mut |s| {
                    s.pull_one(&m, progress)
                })?;
                Ok((m, added))
            });
            let (m, added) = match outcome {
                Ok(done) => done,
                Err(e @ RemoteError::Corrupt { .. }) => {
                    self.report.damaged.push(Damaged {
                        id: id.to_hex(),
                        reason: e.to_string(),
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            if added {
                self.report.recordings += 1;
                self.report.ids.push(id.to_hex());
                self.report.logical_bytes += m.recording.logical_size();
                chunks::pause_point(
                    &self.remote.options.hooks,
                    "recording",
                    self.report.recordings,
                );
            } else {
                self.report.present += 1;
                self.report.present_ids.push(id.to_hex());
            }
        }
        Ok(())
    }

    /// Run `f` until it does not report a gc race (`None`), `PULL_ATTEMPTS`
    /// times at most.
    pub fn retry(
        &mut self,
        what: &str,
        f: &mut dyn FnMut(&mut Self) -> Result<Option<bool>>,
    ) -> Result<bool> {
        crate::index::write::retry_raced(self, PULL_ATTEMPTS, &|_| what.to_string(), "pull", f)
    }

    /// One attempt at one recording. `Some(true)`: added; `Some(false)`:
    /// another process added it; `None`: gc raced us, try again.
    fn pull_one(&mut self, m: &Manifest, progress: &mut dyn FnMut(Event)) -> Result<Option<bool>> {
        let rec: &Recording = &m.recording;
        let parts: Vec<([u8; 32], u64)> = rec.parts.iter().map(|p| (p.blake3, p.len)).collect();
        let Some(pulled) = self.fetch_parts(&parts, progress)? else {
            return Ok(None);
        };
        let source = if m.source.is_empty() {
            self.remote.url.clone()
        } else {
            format!("{}: {}", self.remote.url, m.source)
        };
        let r = self
            .store
            .xfer_commit_pulled(rec, &pulled, &m.label, &source, &m.tags)?;
        self.committed(&pulled, r);
        Ok(r)
    }

    /// After a commit: the new parts are local now, so later recordings of
    /// this pull derive their nodes instead of fetching them.
    pub fn committed(&mut self, pulled: &[PulledPart], r: Option<bool>) {
        if r.is_none() {
            return;
        }
        for p in pulled {
            for known in [self.v1.as_mut(), self.v2.as_mut()].into_iter().flatten() {
                known.add_part(p.hash, &p.refs);
            }
        }
    }

    /// Bring every part of `parts` the store lacks: part objects, chunk-list
    /// nodes, chunks; then re-read and check each new part. `None`: a chunk
    /// vanished (gc), retry.
    pub fn fetch_parts(
        &mut self,
        parts: &[([u8; 32], u64)],
        progress: &mut dyn FnMut(Event),
    ) -> Result<Option<Vec<PulledPart>>> {
        let remote = self.remote;
        let need: Vec<([u8; 32], u64)> = self.store.xfer_reading(|store| {
            let mut need: Vec<([u8; 32], u64)> = Vec::new();
            for &(h, len) in parts {
                if !store.has_part(&h)? && !need.iter().any(|n| n.0 == h) {
                    need.push((h, len));
                }
            }
            Ok::<_, RemoteError>(need)
        })?;
        let mut objs: HashMap<[u8; 32], (String, PartObject)> = HashMap::new();
        for (h, _) in &need {
            if let Some(o) = self.prefetched.remove(h) {
                objs.insert(*h, o);
            }
        }
        let names: Vec<[u8; 32]> = need
            .iter()
            .map(|p| p.0)
            .filter(|h| !objs.contains_key(h))
            .collect();
        self.blobs.get(Kind::Part, &names, &mut |h, at, body| {
            let body = body.map_err(|r| corrupt(remote, &at, r))?;
            let obj = layout::decode_part(&body).map_err(|r| corrupt(remote, &at, r))?;
            objs.insert(h, (at, obj));
            Ok(())
        })?;
        // Assemble each new part's chunk list and check its shape.
        let mut new_parts = Vec::new();
        for (hash, len) in &need {
            let (key, obj) = objs
                .remove(hash)
                .ok_or_else(|| corrupt(remote, &layout::part_key(hash), "missing".into()))?;
            let Some(chunks) = self.chunk_list(&obj)? else {
                return Ok(None);
            };
            let total: u64 = chunks.iter().map(|c| c.1 as u64).sum();
            if obj.len != *len || total != *len || chunks.len() as u64 != obj.nchunks {
                return Err(corrupt(
                    remote,
                    &key,
                    format!(
                        "it lists {} chunks covering {total} bytes; the part has {len} bytes",
                        chunks.len()
                    ),
                ));
            }
            new_parts.push((*hash, *len, chunks, key));
        }
        for k in [self.v1.as_mut(), self.v2.as_mut()].into_iter().flatten() {
            k.release();
        }
        // Chunks the store lacks.
        let mut queued = HashSet::new();
        let listed: Vec<(ChunkHash, u32)> = new_parts
            .iter()
            .flat_map(|p| p.2.iter().copied())
            .filter(|(h, _)| queued.insert(*h))
            .collect();
        let (missing, total) = self.lacking(&listed)?;
        progress(Event::Start {
            what: format!("receiving {} chunks", missing.len()),
            total,
        });
        self.fetch_chunks(&missing, false, progress)?;
        // Verify every new part's bytes.
        let lists: Vec<Vec<ChunkHash>> = new_parts
            .iter()
            .map(|p| p.2.iter().map(|c| c.0).collect())
            .collect();
        let checks: Vec<NewPart> = new_parts
            .iter()
            .zip(&lists)
            .map(|(p, chunks)| NewPart {
                hash: p.0,
                len: p.1,
                chunks,
            })
            .collect();
        let verdicts = verify_parts(self.store, &checks, &self.decoded)?;
        let mut pulled = Vec::new();
        for (((hash, len, refs, key), list), v) in new_parts.into_iter().zip(lists).zip(verdicts) {
            match v {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(reason) => return Err(corrupt(remote, &key, reason)),
            }
            pulled.push(PulledPart {
                hash,
                len,
                chunks: list,
                refs,
            });
        }
        Ok(Some(pulled))
    }
}

impl Session<'_> {
    /// Of `listed` chunks (with their lengths), those the store lacks and
    /// their total length: one read transaction for all the lookups.
    pub(super) fn lacking(&self, listed: &[(ChunkHash, u32)]) -> Result<(Vec<ChunkHash>, u64)> {
        let hashes: Vec<ChunkHash> = listed.iter().map(|c| c.0).collect();
        let lacks = self.store.xfer_lacking_chunks(&hashes)?;
        let mut total = 0u64;
        let mut missing = Vec::new();
        for ((h, len), lacks) in listed.iter().zip(lacks) {
            if lacks {
                missing.push(*h);
                total += u64::from(*len);
            }
        }
        Ok((missing, total))
    }
}

pub(crate) fn fetch_manifest(remote: &Remote, id: &RecordingId) -> Result<Manifest> {
    let key = layout::recording_key(id);
    let body = remote.get(&key)?.ok_or_else(|| RemoteError::NotFound {
        remote: remote.name.clone(),
        id: id.to_hex(),
    })?;
    layout::decode_manifest(&body, id).map_err(|reason| corrupt(remote, &key, reason))
}
