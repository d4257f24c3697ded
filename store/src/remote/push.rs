//! `push`: send recordings (and, on request, the image library) to a
//! remote, uploading only the objects it lacks, in dependency order:
//! chunks, then chunk-list nodes (list blocks, then each inner level), then
//! parts, then manifests and image entries, each stage finished before the
//! next starts. A recording or image is visible on the remote only once
//! everything it needs is there; an interrupted push leaves only complete,
//! immutable objects, which the next push finds and skips, and on a
//! file:// remote temporary files, which the next push removes. Last, the
//! history rows of the recordings the remote lacks (`history`).

use std::collections::{HashMap, HashSet};

use rrstore_format::chunk::ChunkHash;
use rrstore_format::RecordingId;

use super::backend::Backend;
use super::error::Result;
use super::layout::{self, ChunkRef, ImageEntry, Manifest, PartObject};
use super::tree;
use super::{Event, TransferReport};
use crate::Store;

/// Push recordings `ids` of `store` to `remote`, and every image of the
/// store's image library when `images`: in layout version 3 to a version 3
/// or new remote, else in version 2 (spec/REMOTE.md, "Which version").
pub fn push(
    store: &Store,
    remote: &Backend,
    ids: &[RecordingId],
    images: bool,
    progress: &mut dyn FnMut(Event),
) -> Result<TransferReport> {
    progress(Event::Phase("reading the remote's layout".into()));
    let mut version = super::blobs::layout_version(remote)?;
    if version == 2 {
        let forced = std::env::var("RRSTORE_REMOTE_LAYOUT").is_ok_and(|v| v == "2");
        if !forced && remote.list(layout::RECORDINGS)?.is_empty() {
            remote.put(super::layout3::MARKER, super::layout3::MARKER_BODY.to_vec())?;
            version = 3;
        }
    }
    let mut r = if version == 3 {
        super::push3::push(store, remote, ids, images, progress)?
    } else {
        push_v2(store, remote, ids, images, progress)?
    };
    r.layout = version;
    // Once the recordings are there: rows of recordings a reader cannot
    // see would be of no use (spec/REMOTE.md, "Shared history").
    progress(Event::Phase("sending the replay history".into()));
    let shared = super::history::push_rows(store, remote, ids)?;
    r.history_rows = shared.rows;
    r.history_batches = shared.batches;
    r.warnings.extend(shared.warnings());
    r.requests = remote.requests.load(std::sync::atomic::Ordering::Relaxed);
    Ok(r)
}

/// What a push sends: the recordings and images the remote lacks.
pub(super) struct Todo {
    pub ids: Vec<RecordingId>,
    pub images: Vec<crate::images::ImageInfo>,
}

/// Recordings of `ids` and (with `images`) images of the store that the
/// remote lacks, from LIST `recordings/` and `images/`.
pub(super) fn todo(
    store: &Store,
    remote: &Backend,
    ids: &[RecordingId],
    images: bool,
    report: &mut TransferReport,
) -> Result<Todo> {
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
    let mut todo_images = Vec::new();
    if images {
        let there = hashes(remote, layout::IMAGES)?;
        for img in store.images()? {
            if there.contains(&img.hash_bytes()) {
                report.images_present += 1;
            } else {
                todo_images.push(img);
            }
        }
    }
    Ok(Todo {
        ids: todo,
        images: todo_images,
    })
}

/// The manifest object of recording `rec` of `store`, in layout `version`.
pub(super) fn manifest_object(
    store: &Store,
    rec: rrstore_format::Recording,
    version: u32,
) -> Result<(String, Vec<u8>)> {
    let id = rec.id();
    let (label, tags, source, imported_at) = store.xfer_recording_meta(&id)?;
    let m = Manifest {
        version,
        recording: rec,
        label,
        tags,
        source,
        imported_at,
    };
    let body = layout::encode_manifest(&m).map_err(|reason| crate::StoreError::Encode {
        what: format!("the manifest of {id}"),
        reason,
    })?;
    Ok((layout::recording_key(&id), body))
}

/// The image entry object of `img`, in layout `version`.
pub(super) fn image_object(
    img: &crate::images::ImageInfo,
    version: u32,
) -> Result<(String, Vec<u8>)> {
    let e = ImageEntry {
        version,
        hash: img.hash.clone(),
        len: img.len,
        target: img.target.clone(),
        label: img.label.clone(),
        source: img.source.clone(),
        added_at: img.added_at,
    };
    let body = layout::encode_image(&e).map_err(|reason| crate::StoreError::Encode {
        what: format!("image entry {}", img.hash),
        reason,
    })?;
    Ok((layout::image_key(&img.hash_bytes()), body))
}

fn push_v2(
    store: &Store,
    remote: &Backend,
    ids: &[RecordingId],
    images: bool,
    progress: &mut dyn FnMut(Event),
) -> Result<TransferReport> {
    let mut report = TransferReport::default();
    progress(Event::Phase("removing stale temporary files".into()));
    report.temporaries_removed = remote.remove_stale_temporaries()?;
    progress(Event::Phase("listing the remote".into()));
    let Todo {
        ids: todo,
        images: todo_images,
    } = todo(store, remote, ids, images, &mut report)?;
    if todo.is_empty() && todo_images.is_empty() {
        return Ok(report);
    }
    // Parts the remote lacks, and their trees.
    let remote_parts = hashes(remote, layout::PARTS)?;
    let mut recs = Vec::new();
    let mut wanted: Vec<([u8; 32], u64)> = Vec::new();
    for id in &todo {
        let rec = store.recording(id)?;
        wanted.extend(rec.parts.iter().map(|p| (p.blake3, p.len)));
        report.logical_bytes += rec.logical_size();
        recs.push(rec);
    }
    for img in &todo_images {
        wanted.push((img.hash_bytes(), img.len));
        report.logical_bytes += img.len;
    }
    let mut part_objs: Vec<(String, Vec<u8>)> = Vec::new();
    let mut part_chunks: Vec<Vec<ChunkRef>> = Vec::new();
    let mut trees = Vec::new();
    let mut new_parts = HashSet::new();
    for (hash, len) in wanted {
        if remote_parts.contains(&hash) || !new_parts.insert(hash) {
            continue;
        }
        let refs: Vec<ChunkRef> = store
            .xfer_part_locs(&hash)?
            .into_iter()
            .map(|l| (l.hash, l.len))
            .collect();
        let t = tree::build(&refs, tree::V2);
        let obj = PartObject {
            len,
            nchunks: refs.len() as u64,
            version: 2,
            height: t.height,
            top: t.top.clone(),
        };
        part_objs.push((layout::part_key(&hash), layout::encode_part(&obj)));
        part_chunks.push(refs);
        trees.push(t);
    }
    // Chunks and nodes the remote lacks; nodes grouped by tree level.
    let mut chunks: Vec<ChunkHash> = Vec::new();
    let mut levels: Vec<Vec<(String, Vec<u8>)>> = Vec::new();
    if !part_chunks.is_empty() {
        progress(Event::Phase("listing the remote's chunks".into()));
        let remote_chunks = hashes(remote, layout::CHUNKS)?;
        let remote_lists = hashes(remote, layout::LISTS)?;
        let mut queued = HashSet::new();
        for refs in &part_chunks {
            for (h, _) in refs {
                if !remote_chunks.contains(h) && queued.insert(*h) {
                    chunks.push(*h);
                }
            }
        }
        let mut queued = HashSet::new();
        for t in trees {
            for n in t.nodes {
                let level = n.level as usize;
                if remote_lists.contains(&n.hash) || !queued.insert(n.hash) {
                    continue;
                }
                if levels.len() <= level {
                    levels.resize_with(level + 1, Vec::new);
                }
                levels[level].push((layout::list_key(&n.hash), n.body));
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
    // Stages 2-4: nodes level by level, parts, manifests and image entries.
    progress(Event::Phase(
        "sending chunk lists, parts and manifests".into(),
    ));
    let mut meta = 0u64;
    for level in levels {
        remote.put_all(level.into_iter().map(Ok), &mut |n| meta += n)?;
    }
    remote.put_all(part_objs.into_iter().map(Ok), &mut |n| meta += n)?;
    put_manifests(
        store,
        remote,
        recs,
        todo_images,
        layout::MANIFEST_V2,
        &mut report,
    )?;
    report.metadata_bytes += meta;
    report.bytes = report.chunk_bytes + report.metadata_bytes;
    Ok(report)
}

/// The last stage of a push of either layout, once everything they name is
/// on the remote: the manifests of `recs` and the image entries of
/// `images`, in layout `version`, counted into `report` (their bytes
/// added to `metadata_bytes`).
pub(super) fn put_manifests(
    store: &Store,
    remote: &Backend,
    recs: Vec<rrstore_format::Recording>,
    images: Vec<crate::images::ImageInfo>,
    version: u32,
    report: &mut TransferReport,
) -> Result<()> {
    let mut last = Vec::new();
    for rec in recs {
        report.ids.push(rec.id().to_hex());
        last.push(manifest_object(store, rec, version)?);
    }
    report.recordings = last.len() as u64;
    for img in images {
        last.push(image_object(&img, version)?);
        report.images += 1;
        report.image_hashes.push(img.hash);
    }
    let mut meta = 0u64;
    remote.put_all(last.into_iter().map(Ok), &mut |n| meta += n)?;
    report.metadata_bytes += meta;
    Ok(())
}

/// Hashes named by the keys under a fanned directory.
pub(super) fn hashes(remote: &Backend, dir: &str) -> Result<HashSet<[u8; 32]>> {
    Ok(remote
        .list(dir)?
        .iter()
        .filter_map(|k| layout::hash_of_key(k, dir))
        .collect())
}
