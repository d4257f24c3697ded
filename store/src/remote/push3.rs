//! `push` to a version 3 remote (spec/REMOTE.md, "Write order (push,
//! version 3)"): the chunks, tree nodes and part objects the index cache
//! does not know are bundled into pack objects (a few in flight, multipart
//! on S3), then one index object names them, then the manifests are
//! written. Nothing is listed but `index/`, `recordings/` and (with
//! `--images`) `images/`.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fs::File;

use rrstore_format::RecordingId;

use super::backend::Backend;
use super::blobs::Blobs;
use super::error::Result;
use super::layout::{self, ChunkRef, PartObject};
use super::layout3::{self, Entry, Kind};
use super::push::{put_manifests, todo, Todo};
use super::tree;
use super::{Event, TransferReport};
use crate::Store;

/// Packs uploaded at once (each may be a multipart upload of its own).
const PACKS_IN_FLIGHT: usize = 2;
/// An index object lists at most this many blobs.
pub(super) const INDEX_MAX: usize = 200_000;

/// A blob to send: a chunk read from the local packs, or bytes in hand.
enum Blob {
    Chunk([u8; 32]),
    Bytes(Kind, [u8; 32], Vec<u8>),
}

pub(super) fn push(
    store: &Store,
    remote: &Backend,
    ids: &[RecordingId],
    images: bool,
    progress: &mut dyn FnMut(Event),
) -> Result<TransferReport> {
    let mut report = TransferReport::default();
    progress(Event::Phase("removing stale temporary files".into()));
    report.temporaries_removed = remote.remove_stale_temporaries()?;
    // Held until the manifests are written: no prune runs meanwhile
    // (spec/REMOTE.md, "Removal").
    progress(Event::Phase("taking a shared lock".into()));
    let _lock = remote.lock_shared(&mut |line| progress(Event::Notice(line)))?;
    if std::env::var_os("RRSTORE_PUSH_PAUSE_AFTER_LOCK").is_some() {
        // Test hook: a push killed while it holds its lock.
        eprintln!(
            "rrstore: holding {}; pausing (RRSTORE_PUSH_PAUSE_AFTER_LOCK)",
            _lock.key()
        );
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    progress(Event::Phase("reading the remote's index".into()));
    let mut blobs = Blobs::new(remote);
    blobs.attach(store.dir())?;
    report.warnings = blobs
        .bad_index
        .iter()
        .map(|b| format!("index object {} left out: {}", b.key, b.reason))
        .collect();
    progress(Event::Phase("listing the remote's recordings".into()));
    let Todo {
        ids: todo_ids,
        images: todo_images,
    } = todo(store, remote, ids, images, &mut report)?;
    if todo_ids.is_empty() && todo_images.is_empty() {
        return Ok(report);
    }
    let mut recs = Vec::new();
    let mut wanted: Vec<([u8; 32], u64)> = Vec::new();
    for id in &todo_ids {
        let rec = store.recording(id)?;
        wanted.extend(rec.parts.iter().map(|p| (p.blake3, p.len)));
        report.logical_bytes += rec.logical_size();
        recs.push(rec);
    }
    for img in &todo_images {
        wanted.push((img.hash_bytes(), img.len));
        report.logical_bytes += img.len;
    }
    // What the index lacks: chunks first, then nodes, then part objects
    // (any order would do inside packs; this one keeps a part's chunks
    // together for ranged reads).
    let mut chunks: Vec<Blob> = Vec::new();
    let mut meta: Vec<Blob> = Vec::new();
    let mut queued: HashSet<(Kind, [u8; 32])> = HashSet::new();
    for (hash, len) in wanted {
        if blobs.lookup(Kind::Part, &hash)?.is_some() || !queued.insert((Kind::Part, hash)) {
            continue;
        }
        let refs: Vec<ChunkRef> = store
            .xfer_part_locs(&hash)?
            .into_iter()
            .map(|l| (l.hash, l.len))
            .collect();
        for (h, _) in &refs {
            if !queued.contains(&(Kind::Chunk, *h)) && blobs.lookup(Kind::Chunk, h)?.is_none() {
                queued.insert((Kind::Chunk, *h));
                chunks.push(Blob::Chunk(*h));
            }
        }
        let t = tree::build(&refs, tree::V2);
        for n in t.nodes {
            if !queued.contains(&(Kind::Node, n.hash))
                && blobs.lookup(Kind::Node, &n.hash)?.is_none()
            {
                queued.insert((Kind::Node, n.hash));
                meta.push(Blob::Bytes(Kind::Node, n.hash, n.body));
            }
        }
        let obj = PartObject {
            len,
            nchunks: refs.len() as u64,
            version: 2,
            height: t.height,
            top: t.top,
        };
        meta.push(Blob::Bytes(Kind::Part, hash, layout::encode_part(&obj)));
    }
    let total: u64 = chunks
        .iter()
        .filter_map(|b| match b {
            Blob::Chunk(h) => store.xfer_chunk_loc(h).ok().flatten(),
            Blob::Bytes(..) => None,
        })
        .map(|l| l.stored_len as u64 + crate::pack::ENTRY_HEADER_LEN as u64)
        .sum();
    progress(Event::Start {
        what: "sending packs".into(),
        total,
    });
    // Stage 1: packs.
    let entries: RefCell<Vec<Entry>> = RefCell::new(Vec::new());
    let counts = RefCell::new((0u64, 0u64, 0u64));
    let mut all = chunks.into_iter().chain(meta).peekable();
    let mut files: HashMap<String, File> = HashMap::new();
    let target = remote.pack_target;
    let packs = std::iter::from_fn(|| {
        all.peek()?;
        let mut body: Vec<u8> = Vec::new();
        let mut here: Vec<Entry> = Vec::new();
        while (body.len() as u64) < target {
            let Some(b) = all.next() else { break };
            let (kind, name, bytes) = match b {
                Blob::Chunk(h) => match store.xfer_read_entry(&mut files, &h) {
                    Ok(e) => (Kind::Chunk, h, e),
                    Err(e) => return Some(Err(e.into())),
                },
                Blob::Bytes(k, h, v) => (k, h, v),
            };
            let mut c = counts.borrow_mut();
            if kind == Kind::Chunk {
                c.0 += 1;
                c.1 += bytes.len() as u64;
            } else {
                c.2 += bytes.len() as u64;
            }
            here.push(Entry {
                kind,
                name,
                pack: [0; 32],
                offset: body.len() as u64,
                len: bytes.len() as u32,
            });
            body.extend_from_slice(&bytes);
        }
        let pack = *blake3::hash(&body).as_bytes();
        for e in &mut here {
            e.pack = pack;
        }
        entries.borrow_mut().extend(here);
        Some(Ok((layout3::pack_key(&pack), body)))
    });
    let mut npacks = 0u64;
    remote.put_all_with(packs, PACKS_IN_FLIGHT, &mut |n| {
        npacks += 1;
        progress(Event::Bytes(n));
    })?;
    let (nchunks, chunk_bytes, node_bytes) = counts.into_inner();
    report.packs = npacks;
    report.chunks = nchunks;
    report.chunk_bytes = chunk_bytes;
    let mut meta_bytes = node_bytes;
    // Stage 2: index objects, once every pack is stored.
    progress(Event::Phase("sending the index and manifests".into()));
    let entries = entries.into_inner();
    let mut cache = blobs.cache.take();
    for part in entries.chunks(INDEX_MAX) {
        let (name, body) =
            layout3::encode_index(part).map_err(|reason| crate::StoreError::Encode {
                what: "an index object".into(),
                reason,
            })?;
        meta_bytes += body.len() as u64;
        remote.put(&layout3::index_key(&name), body)?;
        report.index_objects += 1;
        if let Some(c) = cache.as_mut() {
            c.add(&name, part)?;
        }
    }
    // Stage 3: manifests and image entries, once the index is stored.
    report.metadata_bytes = meta_bytes;
    put_manifests(
        store,
        remote,
        recs,
        todo_images,
        layout::MANIFEST_VERSION,
        &mut report,
    )?;
    report.bytes = report.chunk_bytes + report.metadata_bytes;
    Ok(report)
}
