//! `push`: send recordings to a remote, uploading only the objects it
//! lacks, in dependency order: chunks, then chunk lists, then parts, then
//! manifests, each stage finished before the next starts. A recording is
//! visible on the remote only once everything it needs is there; an
//! interrupted push leaves only complete, immutable objects, which the next
//! push finds and skips.

use std::collections::{HashMap, HashSet};

use rrstore_format::chunk::ChunkHash;
use rrstore_format::RecordingId;

use super::backend::Backend;
use super::error::Result;
use super::layout::{self, ChunkRef, Manifest, PartObject};
use super::{Event, TransferReport};
use crate::Store;

/// Push recordings `ids` of `store` to `remote`.
pub fn push(
    store: &Store,
    remote: &Backend,
    ids: &[RecordingId],
    progress: &mut dyn FnMut(Event),
) -> Result<TransferReport> {
    let mut report = TransferReport::default();
    progress(Event::Phase("listing the remote".into()));
    let on_remote: HashSet<RecordingId> = remote
        .list(layout::RECORDINGS)?
        .iter()
        .filter_map(|k| layout::id_of_key(k))
        .collect();
    let mut todo = Vec::new();
    let mut seen = HashSet::new();
    for id in ids {
        if !seen.insert(*id) {
            continue;
        }
        if on_remote.contains(id) {
            report.present += 1;
            report.present_ids.push(id.to_hex());
        } else {
            todo.push(*id);
        }
    }
    if todo.is_empty() {
        return Ok(report);
    }
    let remote_parts = hashes(remote, layout::PARTS)?;
    let mut recs = Vec::new();
    let mut part_objs: Vec<(String, Vec<u8>)> = Vec::new();
    let mut new_parts: HashSet<[u8; 32]> = HashSet::new();
    let mut part_chunks: Vec<Vec<ChunkRef>> = Vec::new();
    for id in &todo {
        let rec = store.recording(id)?;
        for p in &rec.parts {
            if remote_parts.contains(&p.blake3) || !new_parts.insert(p.blake3) {
                continue;
            }
            let refs: Vec<ChunkRef> = store
                .xfer_part_locs(&p.blake3)?
                .into_iter()
                .map(|l| (l.hash, l.len))
                .collect();
            part_chunks.push(refs);
            let refs = part_chunks.last().map(Vec::as_slice).unwrap_or(&[]);
            let lists = layout::cut_blocks(refs)
                .iter()
                .map(|b| *blake3::hash(&layout::encode_list(b)).as_bytes())
                .collect();
            let obj = PartObject {
                len: p.len,
                nchunks: refs.len() as u64,
                lists,
            };
            part_objs.push((layout::part_key(&p.blake3), layout::encode_part(&obj)));
        }
        report.logical_bytes += rec.logical_size();
        recs.push(rec);
    }
    // Chunks and lists the remote lacks.
    let (mut chunks, mut lists): (Vec<ChunkHash>, Vec<(String, Vec<u8>)>) =
        (Vec::new(), Vec::new());
    if !part_chunks.is_empty() {
        progress(Event::Phase("listing the remote's chunks".into()));
        let remote_chunks = hashes(remote, layout::CHUNKS)?;
        let remote_lists = hashes(remote, layout::LISTS)?;
        let mut queued = HashSet::new();
        let mut queued_lists = HashSet::new();
        for refs in &part_chunks {
            for (h, _) in refs {
                if !remote_chunks.contains(h) && queued.insert(*h) {
                    chunks.push(*h);
                }
            }
            for b in layout::cut_blocks(refs) {
                let body = layout::encode_list(b);
                let h = *blake3::hash(&body).as_bytes();
                if !remote_lists.contains(&h) && queued_lists.insert(h) {
                    lists.push((layout::list_key(&h), body));
                }
            }
        }
    }
    // Stage 1: chunks, read and checked from the local packs as they go.
    let total: u64 = chunks
        .iter()
        .filter_map(|h| store.xfer_chunk_loc(h).ok().flatten())
        .map(|l| l.stored_len as u64 + crate::pack::ENTRY_HEADER_LEN as u64)
        .sum();
    progress(Event::Start {
        what: "sending chunks".into(),
        total,
    });
    let mut files = HashMap::new();
    let mut sent_chunks = 0u64;
    let items = chunks.iter().map(|h| {
        let body = store.xfer_read_entry(&mut files, h)?;
        Ok((layout::chunk_key(h), body))
    });
    remote.put_all(items, &mut |n| {
        sent_chunks += 1;
        report.chunk_bytes += n;
        progress(Event::Bytes(n));
    })?;
    report.chunks = sent_chunks;
    // Stages 2-4: lists, parts, manifests.
    progress(Event::Phase(
        "sending chunk lists, parts and manifests".into(),
    ));
    let mut meta = 0u64;
    remote.put_all(lists.into_iter().map(Ok), &mut |n| meta += n)?;
    remote.put_all(part_objs.into_iter().map(Ok), &mut |n| meta += n)?;
    let mut manifests = Vec::new();
    for rec in recs {
        let id = rec.id();
        let (label, tags, source, imported_at) = store.xfer_recording_meta(&id)?;
        let m = Manifest {
            version: layout::MANIFEST_VERSION,
            recording: rec,
            label,
            tags,
            source,
            imported_at,
        };
        let body = layout::encode_manifest(&m).map_err(|reason| {
            crate::StoreError::Invalid(format!("cannot encode the manifest of {id}: {reason}"))
        })?;
        manifests.push((layout::recording_key(&id), body));
        report.ids.push(id.to_hex());
    }
    report.recordings = manifests.len() as u64;
    remote.put_all(manifests.into_iter().map(Ok), &mut |n| meta += n)?;
    report.metadata_bytes = meta;
    report.bytes = report.chunk_bytes + report.metadata_bytes;
    Ok(report)
}

/// Hashes named by the keys under a fanned directory.
fn hashes(remote: &Backend, dir: &str) -> Result<HashSet<[u8; 32]>> {
    Ok(remote
        .list(dir)?
        .iter()
        .filter_map(|k| layout::hash_of_key(k, dir))
        .collect())
}
