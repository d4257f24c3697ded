//! `pull`: bring recordings from a remote into the local store, fetching
//! only the chunk lists and chunks the store lacks. Every object is checked
//! on arrival (manifest against the recording ID, lists against their name,
//! chunks against their blake3, each new part's bytes against the part's
//! blake3), and a recording enters the local index only after all of its
//! parts are stored and verified. Chunks are indexed as they arrive (in
//! batches), so an interrupted pull does not fetch them again.

use std::collections::{HashMap, HashSet};

use rrstore_format::chunk::ChunkHash;
use rrstore_format::{Recording, RecordingId};

use super::backend::Backend;
use super::error::{RemoteError, Result};
use super::layout::{self, ChunkRef, Manifest};
use super::local::{check_entry, PulledChunk, PulledPart};
use super::{Event, TransferReport};
use crate::pack::reader::PackFiles;
use crate::pack::writer::PackWriter;
use crate::pack::{ENTRY_HEADER_LEN, PACK_TARGET_SIZE};
use crate::{Store, StoreError};

/// Index pulled chunks after this many bytes have been appended.
const COMMIT_EVERY: u64 = 64 << 20;

/// Pull `wanted` (with their manifests, when already fetched) into `store`.
pub fn pull(
    store: &mut Store,
    remote: &Backend,
    wanted: Vec<(RecordingId, Option<Manifest>)>,
    progress: &mut dyn FnMut(Event),
) -> Result<TransferReport> {
    let mut report = TransferReport::default();
    let mut todo = Vec::new();
    for (id, m) in wanted {
        if store.contains(&id)? {
            report.present += 1;
            report.present_ids.push(id.to_hex());
        } else {
            todo.push((id, m));
        }
    }
    let mut lists: HashMap<[u8; 32], Vec<ChunkRef>> = HashMap::new();
    for (id, m) in todo {
        let before = remote.received.load(std::sync::atomic::Ordering::Relaxed);
        let m = match m {
            Some(m) => m,
            None => fetch_manifest(remote, &id)?,
        };
        progress(Event::Phase(format!(
            "pulling {} {}",
            id.short(),
            m.recording.kernel
        )));
        let chunk_bytes_before = report.chunk_bytes;
        for attempt in 0..3 {
            match pull_one(store, remote, &m, &mut lists, &mut report, progress)? {
                Some(added) => {
                    if added {
                        report.recordings += 1;
                        report.ids.push(id.to_hex());
                        report.logical_bytes += m.recording.logical_size();
                    } else {
                        report.present += 1;
                        report.present_ids.push(id.to_hex());
                    }
                    break;
                }
                None if attempt < 2 => continue,
                None => {
                    return Err(StoreError::Busy(format!(
                        "recording {id}: gc kept removing chunks this pull reused; pull again"
                    ))
                    .into())
                }
            }
        }
        let got = remote.received.load(std::sync::atomic::Ordering::Relaxed) - before;
        report.metadata_bytes += got - (report.chunk_bytes - chunk_bytes_before);
    }
    report.bytes = report.chunk_bytes + report.metadata_bytes;
    Ok(report)
}

pub(crate) fn fetch_manifest(remote: &Backend, id: &RecordingId) -> Result<Manifest> {
    let key = layout::recording_key(id);
    let body = remote.get(&key)?.ok_or_else(|| RemoteError::NotFound {
        remote: remote.name.clone(),
        id: id.to_hex(),
    })?;
    layout::decode_manifest(&body, id).map_err(|reason| corrupt(remote, &key, reason))
}

fn corrupt(remote: &Backend, key: &str, reason: String) -> RemoteError {
    RemoteError::Corrupt {
        remote: remote.name.clone(),
        key: key.to_string(),
        reason,
    }
}

/// One attempt at one recording. `Some(true)`: added; `Some(false)`: another
/// process added it; `None`: gc raced us, try again.
fn pull_one(
    store: &mut Store,
    remote: &Backend,
    m: &Manifest,
    lists: &mut HashMap<[u8; 32], Vec<ChunkRef>>,
    report: &mut TransferReport,
    progress: &mut dyn FnMut(Event),
) -> Result<Option<bool>> {
    let rec: &Recording = &m.recording;
    // Part objects of the parts the store lacks.
    let mut need: Vec<&rrstore_format::PartInfo> = Vec::new();
    for p in &rec.parts {
        if !store.xfer_has_part(&p.blake3)? && !need.iter().any(|n| n.blake3 == p.blake3) {
            need.push(p);
        }
    }
    let mut part_objs = HashMap::new();
    let keys: Vec<String> = need.iter().map(|p| layout::part_key(&p.blake3)).collect();
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let body = body.ok_or_else(|| {
            corrupt(
                remote,
                &key,
                "missing (the recording's manifest names it)".into(),
            )
        })?;
        let obj = layout::decode_part(&body).map_err(|r| corrupt(remote, &key, r))?;
        let h = layout::hash_of_key(&key, layout::PARTS).unwrap_or_default();
        part_objs.insert(h, obj);
        Ok(())
    })?;
    // Chunk lists: derived from local parts where possible, else fetched.
    let mut wanted: HashSet<[u8; 32]> = HashSet::new();
    for obj in part_objs.values() {
        wanted.extend(obj.lists.iter().filter(|h| !lists.contains_key(*h)));
    }
    lists.extend(store.xfer_local_lists(&wanted)?);
    let fetch: Vec<String> = wanted
        .iter()
        .filter(|h| !lists.contains_key(*h))
        .map(layout::list_key)
        .collect();
    remote.get_all(fetch.into_iter(), &mut |key, body| {
        let body =
            body.ok_or_else(|| corrupt(remote, &key, "missing (a part object names it)".into()))?;
        let h = layout::hash_of_key(&key, layout::LISTS).unwrap_or_default();
        if *blake3::hash(&body).as_bytes() != h {
            return Err(corrupt(
                remote,
                &key,
                "its bytes do not hash to its name".into(),
            ));
        }
        let refs = layout::decode_list(&body).map_err(|r| corrupt(remote, &key, r))?;
        lists.insert(h, refs);
        Ok(())
    })?;
    // Assemble each new part's chunk list and check its shape.
    let mut new_parts = Vec::new();
    for p in &need {
        let key = layout::part_key(&p.blake3);
        let obj = part_objs
            .get(&p.blake3)
            .ok_or_else(|| corrupt(remote, &key, "missing".into()))?;
        let mut chunks: Vec<ChunkRef> = Vec::with_capacity(obj.nchunks as usize);
        for l in &obj.lists {
            let refs = lists
                .get(l)
                .ok_or_else(|| corrupt(remote, &layout::list_key(l), "missing".into()))?;
            chunks.extend_from_slice(refs);
        }
        let total: u64 = chunks.iter().map(|c| c.1 as u64).sum();
        if obj.len != p.len || total != p.len || chunks.len() as u64 != obj.nchunks {
            return Err(corrupt(
                remote,
                &key,
                format!(
                    "it lists {} chunks covering {total} bytes; the part has {} bytes",
                    chunks.len(),
                    p.len
                ),
            ));
        }
        new_parts.push((p.blake3, p.len, chunks));
    }
    // Chunks the store lacks.
    let mut missing: Vec<ChunkHash> = Vec::new();
    let mut queued = HashSet::new();
    for (_, _, chunks) in &new_parts {
        for (h, _) in chunks {
            if queued.insert(*h) && !store.xfer_has_chunk(h)? {
                missing.push(*h);
            }
        }
    }
    let total: u64 = new_parts
        .iter()
        .flat_map(|(_, _, c)| c.iter())
        .filter(|(h, _)| missing.contains(h))
        .map(|(_, l)| *l as u64)
        .sum();
    progress(Event::Start {
        what: format!("receiving {} chunks", missing.len()),
        total,
    });
    fetch_chunks(store, remote, &missing, report, progress)?;
    // Verify every new part's bytes, then commit the recording.
    let mut pulled = Vec::new();
    for (hash, len, chunks) in new_parts {
        let list: Vec<ChunkHash> = chunks.iter().map(|c| c.0).collect();
        match verify_part(store, &hash, len, &list)? {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(reason) => return Err(corrupt(remote, &layout::part_key(&hash), reason)),
        }
        pulled.push(PulledPart {
            hash,
            len,
            chunks: list,
        });
    }
    let source = if m.source.is_empty() {
        remote.url.clone()
    } else {
        format!("{}: {}", remote.url, m.source)
    };
    Ok(store.xfer_commit_pulled(rec, &pulled, &m.label, &source, &m.tags)?)
}

/// Download `missing` chunks, check each, append them to a new local pack
/// and index them in batches.
fn fetch_chunks(
    store: &mut Store,
    remote: &Backend,
    missing: &[ChunkHash],
    report: &mut TransferReport,
    progress: &mut dyn FnMut(Event),
) -> Result<()> {
    let dir = store.dir().to_path_buf();
    let mut writer: Option<PackWriter> = None;
    let mut batch: Vec<PulledChunk> = Vec::new();
    let mut since_commit = 0u64;
    let keys = missing.iter().map(layout::chunk_key);
    let flush = |store: &mut Store,
                 writer: &mut Option<PackWriter>,
                 batch: &mut Vec<PulledChunk>|
     -> Result<()> {
        if let Some(w) = writer.as_mut() {
            w.sync()?;
        }
        store.xfer_commit_chunks(batch)?;
        batch.clear();
        Ok(())
    };
    remote.get_all(keys, &mut |key, body| {
        let body =
            body.ok_or_else(|| corrupt(remote, &key, "missing (a chunk list names it)".into()))?;
        let h = layout::hash_of_key(&key, layout::CHUNKS).unwrap_or_default();
        let header = check_entry(&body, &h).map_err(|r| corrupt(remote, &key, r))?;
        if writer.as_ref().is_none_or(|w| w.len() >= PACK_TARGET_SIZE) {
            if writer.is_some() {
                flush(store, &mut writer, &mut batch)?;
            }
            writer = Some(PackWriter::create(&dir)?);
        }
        let w = writer
            .as_mut()
            .ok_or_else(|| StoreError::Invalid("no pack writer".into()))?;
        let offset = w.append(&header, &body[ENTRY_HEADER_LEN..])?;
        batch.push(PulledChunk {
            header,
            pack: w.name().to_string(),
            pack_size: w.len(),
            offset,
        });
        report.chunks += 1;
        report.chunk_bytes += body.len() as u64;
        report.missing_stored_bytes += header.stored_len as u64;
        since_commit += body.len() as u64;
        progress(Event::Bytes(header.len as u64));
        if since_commit >= COMMIT_EVERY {
            flush(store, &mut writer, &mut batch)?;
            since_commit = 0;
        }
        Ok(())
    })?;
    flush(store, &mut writer, &mut batch)
}

/// Re-read a new part from the local store and check its length and blake3.
/// `Ok(Ok(false))`: a chunk vanished (gc), retry; `Ok(Err(why))`: the
/// remote's lists do not describe the part.
fn verify_part(
    store: &Store,
    hash: &[u8; 32],
    len: u64,
    chunks: &[ChunkHash],
) -> Result<std::result::Result<bool, String>> {
    let mut packs = PackFiles::new(store.dir());
    let mut hasher = blake3::Hasher::new();
    let mut buf = Vec::new();
    let mut total = 0u64;
    for c in chunks {
        let Some(loc) = store.xfer_chunk_loc(c)? else {
            return Ok(Ok(false));
        };
        buf.resize(loc.len as usize, 0);
        match packs.read_into(&loc, &mut buf) {
            Ok(()) => {}
            Err(crate::pack::reader::ReadError::Missing(_)) => return Ok(Ok(false)),
            Err(e) => {
                return Err(StoreError::Invalid(format!(
                    "reading back chunk {} of part {}: {e}",
                    rrstore_format::id::hex(c),
                    rrstore_format::id::hex(hash)
                ))
                .into())
            }
        }
        hasher.update(&buf);
        total += buf.len() as u64;
    }
    if total != len || hasher.finalize().as_bytes() != hash {
        return Ok(Err(format!(
            "its chunk lists assemble {total} bytes that do not hash to the part's blake3"
        )));
    }
    Ok(Ok(true))
}
