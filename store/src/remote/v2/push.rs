//! `push` to a version 2 remote: every chunk, tree node and part object
//! the remote lacks (found by listing `parts/`, `chunks/` and `lists/`) is
//! an object of its own, sent in dependency order: chunks, then nodes
//! level by level, then part objects, then manifests and image entries,
//! each stage finished before the next starts. What to send is planned in
//! `push::plan`, as for version 3.

use std::collections::HashMap;

use rrstore_format::RecordingId;

use crate::remote::client::Remote;
use crate::remote::error::Result;
use crate::remote::push::manifests::put_manifests;
use crate::remote::push::plan::{self, hashes, todo, Missing, Work};
use crate::remote::v2::layout;
use crate::remote::v3::Kind;
use crate::remote::{Event, TransferReport};
use crate::Store;

pub(in crate::remote) fn push(
    store: &Store,
    remote: &Remote,
    ids: &[RecordingId],
    images: bool,
    progress: &mut dyn FnMut(Event),
) -> Result<TransferReport> {
    let mut report = TransferReport::default();
    progress(Event::Phase("listing the remote".into()));
    let todo = todo(store, remote, ids, images, &mut report)?;
    if todo.ids.is_empty() && todo.images.is_empty() {
        return Ok(report);
    }
    // Parts the remote lacks, and their trees.
    let remote_parts = hashes(remote, layout::PARTS)?;
    let Work {
        recs,
        images: todo_images,
        parts,
    } = Work::new(store, todo, &mut report, &mut |h| {
        Ok(remote_parts.contains(h))
    })?;
    // Chunks and nodes the remote lacks; nodes grouped by tree level.
    let mut missing = Missing {
        chunks: Vec::new(),
        parts: Vec::new(),
    };
    if !parts.is_empty() {
        progress(Event::Phase("listing the remote's chunks".into()));
        let remote_chunks = hashes(remote, layout::CHUNKS)?;
        let remote_lists = hashes(remote, layout::LISTS)?;
        missing = plan::missing(parts, &mut |kind, h| {
            Ok(match kind {
                Kind::Chunk => remote_chunks.contains(h),
                Kind::Node => remote_lists.contains(h),
                Kind::Part => remote_parts.contains(h),
            })
        })?;
    }
    let Missing { chunks, parts } = missing;
    let mut levels: Vec<Vec<(String, Vec<u8>)>> = Vec::new();
    let mut part_objs: Vec<(String, Vec<u8>)> = Vec::new();
    for (hash, nodes, object) in parts {
        for n in nodes {
            let level = n.level as usize;
            if levels.len() <= level {
                levels.resize_with(level + 1, Vec::new);
            }
            levels[level].push((layout::list_key(&n.hash), n.body));
        }
        part_objs.push((layout::part_key(&hash), object));
    }
    // Stage 1: chunks, read and checked from the local packs as they go.
    progress(Event::Start {
        what: "sending chunks".into(),
        total: plan::chunk_bytes(store, &chunks),
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
