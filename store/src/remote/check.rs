//! `rrstore verify NAME: [--read-data]`: check a remote without pulling
//! it. Structure: every index object is read and decodes, every indexed blob lies
//! inside an existing pack, every manifest decodes, and every part it
//! names resolves (part object, tree nodes, each chunk indexed or present
//! as a version 2 object) with the right chunk count and length. With
//! `--read-data`, every byte: each pack is read whole and hashed, and every
//! blob in it checked as a pull would (version 2: every chunk object).
//! Either way, every shared history batch is read and decoded.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::Serialize;

use super::blobs::Blobs;
use super::client::Remote;
use super::error::Result;
use super::local::check_entry;
use super::v2::layout::{self, ChunkRef};
use super::v3::{self, Entry, Kind};
use super::Event;

#[derive(Clone, Debug, Default, Serialize)]
pub struct RemoteCheck {
    pub layout: u32,
    pub recordings: u64,
    pub images: u64,
    pub parts: u64,
    pub chunks: u64,
    pub packs: u64,
    /// Packs no index object names (left by interrupted pushes): garbage,
    /// not damage.
    pub unindexed_packs: u64,
    /// Bytes read and checked with `--read-data`.
    pub bytes_read: u64,
    /// Shared history batches read and decoded, and their rows.
    pub history_batches: u64,
    pub history_rows: u64,
    pub problems: Vec<String>,
}

impl RemoteCheck {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

pub fn check(
    dir: &Path,
    remote: &Remote,
    read_data: bool,
    progress: &mut dyn FnMut(Event),
) -> Result<RemoteCheck> {
    progress(Event::Phase("reading the remote's index".into()));
    let blobs = Blobs::open(dir, remote)?;
    let mut c = RemoteCheck {
        layout: if blobs.cache.is_some() { 3 } else { 2 },
        ..Default::default()
    };
    // Every index object read again: the cache may hold a copy of one
    // that was damaged on the remote since.
    if blobs.cache.is_some() {
        let keys = remote.list(v3::INDEX)?;
        remote.get_all(keys.into_iter(), &mut |key, body| {
            let (Some(name), Some(body)) = (v3::index_of_key(&key), body) else {
                return Ok(());
            };
            if let Err(r) = v3::decode_index(&body, &name) {
                c.problems.push(format!("{key}: {r}"));
            }
            Ok(())
        })?;
    }
    // Every history batch, read from the remote (not the local copy).
    progress(Event::Phase("reading the replay history".into()));
    let (batches, rows, problems) = super::history::check(remote)?;
    c.history_batches = batches;
    c.history_rows = rows;
    c.problems.extend(problems);
    // Packs and what the index puts in them.
    let mut by_pack: HashMap<[u8; 32], Vec<Entry>> = HashMap::new();
    if let Some(cache) = &blobs.cache {
        cache.each(&mut |e| {
            by_pack.entry(e.pack).or_default().push(e);
            Ok(())
        })?;
    }
    let sizes: HashMap<String, u64> = remote.list_sized(v3::PACKS)?.into_iter().collect();
    c.packs = sizes.len() as u64;
    let indexed: HashSet<String> = by_pack.keys().map(v3::pack_key).collect();
    c.unindexed_packs = sizes.keys().filter(|k| !indexed.contains(*k)).count() as u64;
    for (pack, es) in &by_pack {
        let key = v3::pack_key(pack);
        match sizes.get(&key) {
            None => c.problems.push(format!(
                "{key}: missing ({} indexed blobs are in it)",
                es.len()
            )),
            Some(&size) => {
                if let Some(e) = es.iter().find(|e| e.offset + e.len as u64 > size) {
                    c.problems.push(format!(
                        "{key}: {size} bytes, the index puts {} {} at {}..{}",
                        e.kind.word(),
                        rrstore_format::id::hex(&e.name),
                        e.offset,
                        e.offset + e.len as u64
                    ));
                }
            }
        }
    }
    // Version 2 objects, for names the index lacks.
    let v2_chunks: HashSet<[u8; 32]> = remote
        .list(layout::CHUNKS)?
        .iter()
        .filter_map(|k| layout::hash_of_key(k, layout::CHUNKS))
        .collect();
    // Manifests and image entries, and the parts they name.
    progress(Event::Phase("checking manifests and chunk lists".into()));
    let mut parts: Vec<([u8; 32], u64, String)> = Vec::new();
    let keys = remote.list(layout::RECORDINGS)?;
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let Some(id) = layout::id_of_key(&key) else {
            return Ok(());
        };
        let Some(body) = body else { return Ok(()) };
        match layout::decode_manifest(&body, &id) {
            Ok(m) => {
                c.recordings += 1;
                for p in &m.recording.parts {
                    parts.push((p.blake3, p.len, format!("recording {}", id.short())));
                }
            }
            Err(r) => c.problems.push(format!("{key}: {r}")),
        }
        Ok(())
    })?;
    let keys = remote.list(layout::IMAGES)?;
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let (Some(h), Some(body)) = (layout::hash_of_key(&key, layout::IMAGES), body) else {
            return Ok(());
        };
        match layout::decode_image(&body, &h) {
            Ok(e) => {
                c.images += 1;
                parts.push((h, e.len, format!("image {}", &e.hash[..12])));
            }
            Err(r) => c.problems.push(format!("{key}: {r}")),
        }
        Ok(())
    })?;
    let mut seen = HashSet::new();
    parts.retain(|p| seen.insert(p.0));
    c.parts = parts.len() as u64;
    let mut chunks_seen: HashSet<[u8; 32]> = HashSet::new();
    let mut nodes: HashMap<[u8; 32], Node> = HashMap::new();
    for (hash, len, user) in &parts {
        match part_chunks(&blobs, &mut nodes, hash)? {
            Ok(refs) => {
                let total: u64 = refs.iter().map(|r| r.1 as u64).sum();
                if total != *len {
                    c.problems.push(format!(
                        "part {} ({user}): its chunk list covers {total} bytes, not {len}",
                        rrstore_format::id::hex(hash)
                    ));
                }
                for (h, _) in refs {
                    if !chunks_seen.insert(h) {
                        continue;
                    }
                    if blobs.lookup(Kind::Chunk, &h)?.is_none() && !v2_chunks.contains(&h) {
                        c.problems.push(format!(
                            "chunk {} ({user}): not on the remote",
                            rrstore_format::id::hex(&h)
                        ));
                    }
                }
            }
            Err(r) => c.problems.push(format!(
                "part {} ({user}): {r}",
                rrstore_format::id::hex(hash)
            )),
        }
    }
    c.chunks = chunks_seen.len() as u64;
    if read_data {
        read_all(remote, &by_pack, &v2_chunks, &mut c, progress)?;
    }
    Ok(c)
}

pub(super) enum Node {
    Leaf(Vec<ChunkRef>),
    Inner(Vec<[u8; 32]>),
}

/// A part's chunk list from its part object and tree nodes on the remote;
/// `Err`: why it cannot be assembled.
pub(super) fn part_chunks(
    blobs: &Blobs,
    nodes: &mut HashMap<[u8; 32], Node>,
    hash: &[u8; 32],
) -> Result<std::result::Result<Vec<ChunkRef>, String>> {
    let mut obj = Err("missing".to_string());
    blobs.get(Kind::Part, &[*hash], &mut |_, at, body| {
        obj = body
            .and_then(|b| layout::decode_part(&b))
            .map_err(|r| format!("{at}: {r}"));
        Ok(())
    })?;
    let obj = match obj {
        Ok(o) => o,
        Err(r) => return Ok(Err(r)),
    };
    // Fetch the nodes not seen yet, level by level.
    let mut frontier: Vec<([u8; 32], u8)> = obj.top.iter().map(|h| (*h, obj.height)).collect();
    let mut bad: Option<String> = None;
    while !frontier.is_empty() {
        let mut next = Vec::new();
        let mut want: HashMap<[u8; 32], u8> = HashMap::new();
        for (h, level) in frontier {
            match nodes.get(&h) {
                Some(Node::Inner(c)) => {
                    next.extend(c.iter().map(|c| (*c, level.saturating_sub(1))))
                }
                Some(Node::Leaf(_)) => {}
                None => {
                    want.insert(h, level);
                }
            }
        }
        let names: Vec<[u8; 32]> = want.keys().copied().collect();
        blobs.get(Kind::Node, &names, &mut |h, at, body| {
            let level = want.get(&h).copied().unwrap_or(0);
            let node = body.and_then(|b| {
                if blake3::hash(&b).as_bytes() != &h {
                    return Err("its bytes do not hash to its name".into());
                }
                if level == 0 {
                    layout::decode_list(&b).map(Node::Leaf)
                } else {
                    layout::decode_inner(&b).map(Node::Inner)
                }
            });
            match node {
                Ok(n) => {
                    if let Node::Inner(c) = &n {
                        next.extend(c.iter().map(|c| (*c, level - 1)));
                    }
                    nodes.insert(h, n);
                }
                Err(r) => bad = Some(format!("{at}: {r}")),
            }
            Ok(())
        })?;
        if let Some(b) = bad {
            return Ok(Err(b));
        }
        frontier = next;
    }
    let mut out = Vec::new();
    let mut stack: Vec<([u8; 32], u8)> = obj.top.iter().rev().map(|h| (*h, obj.height)).collect();
    while let Some((h, level)) = stack.pop() {
        match nodes.get(&h) {
            Some(Node::Leaf(refs)) if level == 0 => out.extend_from_slice(refs),
            Some(Node::Inner(c)) if level > 0 => {
                stack.extend(c.iter().rev().map(|c| (*c, level - 1)))
            }
            _ => {
                return Ok(Err(format!(
                    "node {} is not of tree level {level}",
                    rrstore_format::id::hex(&h)
                )))
            }
        }
    }
    if out.len() as u64 != obj.nchunks {
        return Ok(Err(format!(
            "its chunk list has {} chunks, its part object says {}",
            out.len(),
            obj.nchunks
        )));
    }
    Ok(Ok(out))
}

/// `--read-data`: every pack read whole, hashed and every blob in it
/// checked; on version 2, every chunk object.
fn read_all(
    remote: &Remote,
    by_pack: &HashMap<[u8; 32], Vec<Entry>>,
    v2_chunks: &HashSet<[u8; 32]>,
    c: &mut RemoteCheck,
    progress: &mut dyn FnMut(Event),
) -> Result<()> {
    progress(Event::Start {
        what: "reading every pack".into(),
        total: 0,
    });
    let mut packs: Vec<&[u8; 32]> = by_pack.keys().collect();
    packs.sort();
    for pack in packs {
        let key = v3::pack_key(pack);
        let Some(body) = remote.get(&key)? else {
            continue; // reported by the structure check
        };
        c.bytes_read += body.len() as u64;
        progress(Event::Bytes(body.len() as u64));
        if blake3::hash(&body).as_bytes() != pack {
            c.problems
                .push(format!("{key}: its bytes do not hash to its name"));
        }
        for e in &by_pack[pack] {
            let Some(b) = body.get(e.offset as usize..(e.offset + e.len as u64) as usize) else {
                continue; // reported by the structure check
            };
            let r = match e.kind {
                Kind::Chunk => check_entry(b, &e.name).map(drop),
                Kind::Node if blake3::hash(b).as_bytes() != &e.name => {
                    Err("its bytes do not hash to its name".into())
                }
                Kind::Node => Ok(()),
                Kind::Part => layout::decode_part(b).map(drop),
            };
            if let Err(r) = r {
                c.problems
                    .push(format!("{}: {r}", super::blobs::describe(e)));
            }
        }
    }
    let keys: Vec<String> = v2_chunks.iter().map(layout::chunk_key).collect();
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let h = layout::hash_of_key(&key, layout::CHUNKS).unwrap_or_default();
        if let Some(b) = body {
            c.bytes_read += b.len() as u64;
            if let Err(r) = check_entry(&b, &h) {
                c.problems.push(format!("{key}: {r}"));
            }
        }
        Ok(())
    })?;
    Ok(())
}
