//! `push` to a version 3 remote (spec/REMOTE.md, "Write order (push,
//! version 3)"): the chunks, tree nodes and part objects the index cache
//! does not know are bundled into pack objects (a few in flight, multipart
//! on S3), then one index object names them, then the manifests are
//! written. Nothing is listed but `index/`, `recordings/` and (with
//! `--images`) `images/`. What to send is planned in `push::plan`, as
//! for version 2.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;

use rrstore_format::RecordingId;

use crate::remote::blobs::Blobs;
use crate::remote::client::Remote;
use crate::remote::error::Result;
use crate::remote::push::manifests::put_manifests;
use crate::remote::push::plan::{self, todo, Missing, Work};
use crate::remote::v2::layout;
use crate::remote::v3::{self, Entry, Kind, INDEX_MAX};
use crate::remote::{Event, TransferReport};
use crate::Store;

/// Packs uploaded at once (each may be a multipart upload of its own).
const PACKS_IN_FLIGHT: usize = 2;

/// A blob to send: a chunk read from the local packs, or bytes in hand.
enum Blob {
    Chunk([u8; 32]),
    Bytes(Kind, [u8; 32], Vec<u8>),
}

pub(in crate::remote) fn push(
    store: &Store,
    remote: &Remote,
    ids: &[RecordingId],
    images: bool,
    progress: &mut dyn FnMut(Event),
) -> Result<TransferReport> {
    let mut report = TransferReport::default();
    // Held until the manifests are written: no prune runs meanwhile
    // (spec/REMOTE.md, "Removal").
    progress(Event::Phase("taking a shared lock".into()));
    let _lock = remote.lock_shared(&mut |line| progress(Event::Notice(line)))?;
    if remote.options.hooks.push_pause_after_lock {
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
    let todo = todo(store, remote, ids, images, &mut report)?;
    if todo.ids.is_empty() && todo.images.is_empty() {
        return Ok(report);
    }
    let Work {
        recs,
        images: todo_images,
        parts,
    } = Work::new(store, todo, &mut report, &mut |h| {
        Ok(blobs.lookup(Kind::Part, h)?.is_some())
    })?;
    let Missing { chunks, parts } =
        plan::missing(parts, &mut |kind, h| Ok(blobs.lookup(kind, h)?.is_some()))?;
    // Chunks first, then each part's new nodes and its part object (any
    // order would do inside packs; this one keeps a part's chunks together
    // for ranged reads).
    let total = plan::chunk_bytes(store, &chunks);
    let mut meta: Vec<Blob> = Vec::new();
    for (hash, nodes, object) in parts {
        meta.extend(
            nodes
                .into_iter()
                .map(|n| Blob::Bytes(Kind::Node, n.hash, n.body)),
        );
        meta.push(Blob::Bytes(Kind::Part, hash, object));
    }
    progress(Event::Start {
        what: "sending packs".into(),
        total,
    });
    // Stage 1: packs.
    let entries: RefCell<Vec<Entry>> = RefCell::new(Vec::new());
    let counts = RefCell::new((0u64, 0u64, 0u64));
    let mut all = chunks.into_iter().map(Blob::Chunk).chain(meta).peekable();
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
        Some(Ok((v3::pack_key(&pack), body)))
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
    put_index(remote, &entries, &mut |name, part, len| {
        meta_bytes += len;
        report.index_objects += 1;
        match cache.as_mut() {
            Some(c) => c.add(name, part),
            None => Ok(()),
        }
    })?;
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

/// Write `entries` as index objects of at most [`INDEX_MAX`] entries each
/// (a push, a migration, a prune's new index); `written(name, its
/// entries, its size)` sees each once it is stored.
#[allow(clippy::type_complexity)]
pub(in crate::remote) fn put_index(
    remote: &Remote,
    entries: &[Entry],
    written: &mut dyn FnMut(&[u8; 32], &[Entry], u64) -> Result<()>,
) -> Result<()> {
    for part in entries.chunks(INDEX_MAX) {
        let (name, body) =
            v3::encode_index_for(remote, part).map_err(|reason| crate::StoreError::Encode {
                what: "an index object".into(),
                reason,
            })?;
        let len = body.len() as u64;
        remote.put(&v3::index_key(&name), body)?;
        written(&name, part, len)?;
    }
    Ok(())
}
