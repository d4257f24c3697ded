//! The work lists of a push, the same for either layout version: the
//! recordings and images the remote lacks ([`todo()`]), then the parts they
//! use that it lacks, each with its chunk list cut into a tree and its
//! part object ([`Work::new`]), then the chunks and tree nodes of those
//! parts that it lacks, each once ([`missing`]). How the remote is
//! asked what it has is the version's (a version 2 push lists its
//! directories, a version 3 push asks its index cache), and so is how the
//! work is sent.

use std::collections::HashSet;

use rrstore_format::chunk::ChunkHash;
use rrstore_format::{Recording, RecordingId};

use crate::images::ImageInfo;
use crate::remote::client::Remote;
use crate::remote::error::Result;
use crate::remote::tree::{self, Node, Tree};
use crate::remote::v2::layout::{self, ChunkRef, PartObject};
use crate::remote::v3::Kind;
use crate::remote::TransferReport;
use crate::Store;

/// What a push sends: the recordings and images the remote lacks.
pub(in crate::remote) struct Todo {
    pub ids: Vec<RecordingId>,
    pub images: Vec<crate::images::ImageInfo>,
}

/// Recordings of `ids` and (with `images`) images of the store that the
/// remote lacks, from LIST `recordings/` and `images/`.
pub(in crate::remote) fn todo(
    store: &Store,
    remote: &Remote,
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

/// Hashes named by the keys under a fanned directory.
pub(in crate::remote) fn hashes(remote: &Remote, dir: &str) -> Result<HashSet<[u8; 32]>> {
    Ok(remote
        .list(dir)?
        .iter()
        .filter_map(|k| layout::hash_of_key(k, dir))
        .collect())
}

/// The recordings and images a push sends, and the parts they use that
/// the remote lacks.
pub(in crate::remote) struct Work {
    /// Their manifests and image entries are written last.
    pub recs: Vec<Recording>,
    pub images: Vec<ImageInfo>,
    /// Parts the remote lacks, each once, in the order the recordings and
    /// images name them.
    pub parts: Vec<NewPart>,
}

/// A part the remote lacks.
pub(in crate::remote) struct NewPart {
    pub hash: [u8; 32],
    /// Its chunks, in order.
    pub refs: Vec<ChunkRef>,
    /// Its chunk list as a tree ([`tree::V2`]).
    pub tree: Tree,
    /// Its encoded part object.
    pub object: Vec<u8>,
}

/// What the new parts need that the remote lacks, each once.
pub(in crate::remote) struct Missing {
    /// Chunks, in the order the parts use them.
    pub chunks: Vec<ChunkHash>,
    /// For each new part, in order: its hash, the tree
    /// nodes first needed by it (in its tree's order, so a list block
    /// comes before the inner nodes over it) and its part object.
    pub parts: Vec<([u8; 32], Vec<Node>, Vec<u8>)>,
}

impl Work {
    /// Read the recordings and images of `todo` (their logical bytes
    /// counted into `report`), and build the tree and part object of each
    /// part they use that the remote lacks: `has_part` says whether it
    /// has one.
    pub fn new(
        store: &Store,
        todo: Todo,
        report: &mut TransferReport,
        has_part: &mut dyn FnMut(&[u8; 32]) -> Result<bool>,
    ) -> Result<Work> {
        let mut recs = Vec::new();
        let mut wanted: Vec<([u8; 32], u64)> = Vec::new();
        for id in &todo.ids {
            let rec = store.recording(id)?;
            wanted.extend(rec.parts.iter().map(|p| (p.blake3, p.len)));
            report.logical_bytes += rec.logical_size();
            recs.push(rec);
        }
        for img in &todo.images {
            wanted.push((img.hash_bytes(), img.len));
            report.logical_bytes += img.len;
        }
        let mut parts = Vec::new();
        let mut queued = HashSet::new();
        for (hash, len) in wanted {
            if has_part(&hash)? || !queued.insert(hash) {
                continue;
            }
            let refs: Vec<ChunkRef> = store
                .xfer_part_locs(&hash)?
                .into_iter()
                .map(|l| (l.hash, l.len))
                .collect();
            let tree = tree::build(&refs, tree::V2);
            let obj = PartObject {
                len,
                nchunks: refs.len() as u64,
                version: 2,
                height: tree.height,
                top: tree.top.clone(),
            };
            parts.push(NewPart {
                hash,
                refs,
                tree,
                object: layout::encode_part(&obj),
            });
        }
        Ok(Work {
            recs,
            images: todo.images,
            parts,
        })
    }
}

/// The chunks and tree nodes of `parts` that the remote lacks (`has`:
/// whether it has a blob of a kind), each once, and the part objects.
pub(in crate::remote) fn missing(
    parts: Vec<NewPart>,
    has: &mut dyn FnMut(Kind, &[u8; 32]) -> Result<bool>,
) -> Result<Missing> {
    let mut chunks = Vec::new();
    let mut out = Vec::new();
    let mut queued: HashSet<(Kind, [u8; 32])> = HashSet::new();
    for p in parts {
        for (h, _) in &p.refs {
            if !queued.contains(&(Kind::Chunk, *h)) && !has(Kind::Chunk, h)? {
                queued.insert((Kind::Chunk, *h));
                chunks.push(*h);
            }
        }
        let mut nodes = Vec::new();
        for n in p.tree.nodes {
            if !queued.contains(&(Kind::Node, n.hash)) && !has(Kind::Node, &n.hash)? {
                queued.insert((Kind::Node, n.hash));
                nodes.push(n);
            }
        }
        out.push((p.hash, nodes, p.object));
    }
    Ok(Missing { chunks, parts: out })
}

/// The bytes the chunks `chunks` take on the wire (entry header and
/// stored bytes), for the progress bar.
pub(in crate::remote) fn chunk_bytes(store: &Store, chunks: &[ChunkHash]) -> u64 {
    chunks
        .iter()
        .filter_map(|h| store.xfer_chunk_loc(h).ok().flatten())
        .map(|l| l.stored_len as u64 + crate::pack::ENTRY_HEADER_LEN as u64)
        .sum()
}
