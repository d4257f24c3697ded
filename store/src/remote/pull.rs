//! `pull`: bring recordings (and images of the image library) from a
//! remote into the local store, fetching only the chunk-list nodes and
//! chunks the store lacks. Every object is checked on arrival (manifest
//! against the recording ID, nodes against their name, chunks against their
//! blake3, each new part's bytes against the part's blake3), and a recording
//! enters the local index only after all of its parts are stored and
//! verified. Chunks are indexed as they arrive (in batches), so an
//! interrupted pull does not fetch them again. A recording whose objects
//! are corrupt on the remote is left out and listed in the report's
//! `damaged`; the others are still pulled. Then the history rows of the
//! recordings pulled (or already there) are merged (`history`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use rrstore_format::chunk::ChunkHash;
use rrstore_format::{Recording, RecordingId};

use super::backend::Backend;
use super::blobs::Blobs;
use super::error::{RemoteError, Result};
use super::known::Known;
use super::layout::{self, ChunkRef, Manifest, PartObject};
use super::layout3::Kind;
use super::list::Selected;
use super::local::PulledPart;
use super::pull_chunks::verify_part;
use super::tree;
use super::{Damaged, Event, TransferReport};
use crate::{Store, StoreError};

/// How often one recording or image is pulled again when gc removed
/// something its commit needs.
const PULL_ATTEMPTS: u32 = 3;

/// A fetched chunk-list node.
enum Fetched {
    Leaf(Vec<ChunkRef>),
    Inner(Vec<[u8; 32]>),
}

/// State shared by the recordings (and images) of one pull.
pub(crate) struct Session<'a> {
    pub store: &'a mut Store,
    pub remote: &'a Backend,
    /// Where blobs are: the index cache (version 3) or their own objects.
    pub blobs: Blobs<'a>,
    pub report: TransferReport,
    /// Local trees cut with the v1 / v2 scheme, built on first use.
    v1: Option<Known>,
    v2: Option<Known>,
    /// Nodes fetched in this pull (never fetched twice).
    fetched: HashMap<[u8; 32], Fetched>,
    /// Chunk batches indexed so far (`pull_chunks`).
    pub(super) batches: u64,
}

pub(crate) fn corrupt(remote: &Backend, key: &str, reason: String) -> RemoteError {
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
    remote: &Backend,
    wanted: Selected,
    images: bool,
    progress: &mut dyn FnMut(Event),
) -> Result<TransferReport> {
    let mut s = Session::new(store, remote)?;
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
        let shared = super::history::pull_rows(s.store, remote, &ids)?;
        s.report.history_rows = shared.rows;
        s.report.history_batches = shared.batches;
        s.report.warnings.extend(shared.warnings());
    }
    Ok(s.finish())
}

impl<'a> Session<'a> {
    pub fn new(store: &'a mut Store, remote: &'a Backend) -> Result<Session<'a>> {
        let blobs = Blobs::open(store.dir(), remote)?;
        let mut report = TransferReport {
            layout: if blobs.cache.is_some() { 3 } else { 2 },
            ..Default::default()
        };
        report.warnings = blobs
            .bad_index
            .iter()
            .map(|b| format!("index object {} left out: {}", b.key, b.reason))
            .collect();
        Ok(Session {
            store,
            remote,
            blobs,
            report,
            v1: None,
            v2: None,
            fetched: HashMap::new(),
            batches: 0,
        })
    }

    /// The report, with `bytes` and `metadata_bytes` from what the remote
    /// received in total.
    pub fn finish(mut self) -> TransferReport {
        let got = self.remote.received.load(Ordering::Relaxed);
        self.report.metadata_bytes = got.saturating_sub(self.report.chunk_bytes);
        self.report.bytes = self.report.chunk_bytes + self.report.metadata_bytes;
        self.report.requests = self.remote.requests.load(Ordering::Relaxed);
        self.report
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
        for (id, m) in todo {
            // A damaged recording is left out and reported; the others
            // still come (the caller fails the command at the end).
            let outcome = match m {
                Some(m) => Ok(m),
                None => fetch_manifest(self.remote, &id),
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
        let mut need: Vec<([u8; 32], u64)> = Vec::new();
        for &(h, len) in parts {
            if !self.store.has_part(&h)? && !need.iter().any(|n| n.0 == h) {
                need.push((h, len));
            }
        }
        let mut objs: HashMap<[u8; 32], (String, PartObject)> = HashMap::new();
        let names: Vec<[u8; 32]> = need.iter().map(|p| p.0).collect();
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
        let mut missing: Vec<ChunkHash> = Vec::new();
        let mut total = 0u64;
        let mut queued = HashSet::new();
        for (_, _, chunks, _) in &new_parts {
            for (h, len) in chunks {
                if queued.insert(*h) && !self.store.has_chunk(h)? {
                    missing.push(*h);
                    total += *len as u64;
                }
            }
        }
        progress(Event::Start {
            what: format!("receiving {} chunks", missing.len()),
            total,
        });
        self.fetch_chunks(&missing, progress)?;
        // Verify every new part's bytes.
        let mut pulled = Vec::new();
        for (hash, len, refs, key) in new_parts {
            let list: Vec<ChunkHash> = refs.iter().map(|c| c.0).collect();
            match verify_part(self.store, &hash, len, &list)? {
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

    /// The chunk list a part object describes: its tree's nodes derived
    /// from local parts where their names match, else fetched (level by
    /// level, concurrently, each checked against its name). `None`: a local
    /// part changed under us (gc), retry.
    fn chunk_list(&mut self, obj: &PartObject) -> Result<Option<Vec<ChunkRef>>> {
        let remote = self.remote;
        let scheme = if obj.version == 1 { tree::V1 } else { tree::V2 };
        let slot = if obj.version == 1 {
            &mut self.v1
        } else {
            &mut self.v2
        };
        if slot.is_none() {
            *slot = Some(Known::from_store(self.store, scheme)?);
        }
        let known = slot
            .as_mut()
            .ok_or_else(|| StoreError::Internal("no local trees".into()))?;
        let fetched = &mut self.fetched;
        let blobs = &self.blobs;
        let mut frontier: Vec<([u8; 32], u8)> = obj.top.iter().map(|h| (*h, obj.height)).collect();
        let mut asked = HashSet::new();
        while !frontier.is_empty() {
            let mut next = Vec::new();
            let mut get: HashMap<[u8; 32], u8> = HashMap::new();
            for (h, level) in frontier {
                if known.contains(&h) {
                    continue;
                }
                match fetched.get(&h) {
                    Some(Fetched::Inner(c)) if level > 0 => {
                        next.extend(c.iter().map(|c| (*c, level - 1)))
                    }
                    Some(_) => {}
                    None if asked.insert(h) => {
                        get.insert(h, level);
                    }
                    None => {}
                }
            }
            let names: Vec<[u8; 32]> = get.keys().copied().collect();
            blobs.get(Kind::Node, &names, &mut |h, at, body| {
                let body = body
                    .map_err(|r| corrupt(remote, &at, format!("{r} (a part object names it)")))?;
                if *blake3::hash(&body).as_bytes() != h {
                    return Err(corrupt(
                        remote,
                        &at,
                        "its bytes do not hash to its name".into(),
                    ));
                }
                let level = get.get(&h).copied().unwrap_or(0);
                let node = if level == 0 {
                    Fetched::Leaf(layout::decode_list(&body).map_err(|r| corrupt(remote, &at, r))?)
                } else {
                    let c = layout::decode_inner(&body).map_err(|r| corrupt(remote, &at, r))?;
                    next.extend(c.iter().map(|c| (*c, level - 1)));
                    Fetched::Inner(c)
                };
                fetched.insert(h, node);
                Ok(())
            })?;
            frontier = next;
        }
        let mut out = Vec::with_capacity(obj.nchunks.min(1 << 20) as usize);
        for h in &obj.top {
            if !expand(self.store, known, fetched, remote, h, obj.height, &mut out)? {
                return Ok(None);
            }
        }
        Ok(Some(out))
    }
}

/// Append the chunks node `h` (at `level`) covers to `out`. `false`: a
/// local part changed under us.
fn expand(
    store: &Store,
    known: &mut Known,
    fetched: &HashMap<[u8; 32], Fetched>,
    remote: &Backend,
    h: &[u8; 32],
    level: u8,
    out: &mut Vec<ChunkRef>,
) -> Result<bool> {
    if known.contains(h) {
        return Ok(known.expand(store, h, out)?);
    }
    match fetched.get(h) {
        Some(Fetched::Leaf(refs)) if level == 0 => out.extend_from_slice(refs),
        Some(Fetched::Inner(children)) if level > 0 => {
            for c in children {
                if !expand(store, known, fetched, remote, c, level - 1, out)? {
                    return Ok(false);
                }
            }
        }
        _ => {
            return Err(corrupt(
                remote,
                &layout::list_key(h),
                format!("missing or not a node of tree level {level}"),
            ))
        }
    }
    Ok(true)
}

pub(crate) fn fetch_manifest(remote: &Backend, id: &RecordingId) -> Result<Manifest> {
    let key = layout::recording_key(id);
    let body = remote.get(&key)?.ok_or_else(|| RemoteError::NotFound {
        remote: remote.name.clone(),
        id: id.to_hex(),
    })?;
    layout::decode_manifest(&body, id).map_err(|reason| corrupt(remote, &key, reason))
}
