//! The chunk-list side of `pull`: a part object's tree of nodes, derived
//! from local parts where their names match, else fetched level by level
//! (for several parts at once in the prefetch), each node checked against
//! its name; then expanded into the part's chunk list.

use std::collections::{HashMap, HashSet};

use super::known_trees::Known;
use super::{corrupt, Fetched, Session};
use crate::remote::blobs::Found;
use crate::remote::client::Remote;
use crate::remote::error::{RemoteError, Result};
use crate::remote::tree;
use crate::remote::v2::layout::{self, ChunkRef, PartObject};
use crate::remote::v3::Kind;
use crate::{Store, StoreError};

impl Session<'_> {
    /// The trees of one scheme (`v1` when `v1`), built on first use.
    fn known(&mut self, v1: bool) -> Result<&mut Known> {
        let (slot, scheme) = if v1 {
            (&mut self.v1, tree::V1)
        } else {
            (&mut self.v2, tree::V2)
        };
        if slot.is_none() {
            *slot = Some(Known::from_store(self.store, scheme)?);
        }
        slot.as_mut()
            .ok_or_else(|| StoreError::Internal("no local trees".into()).into())
    }

    /// Fetch the tree nodes of part objects `objs` (all of one tree
    /// version) that can be neither derived from local parts nor were
    /// fetched already: level by level, concurrently, each checked against
    /// its name. `quiet` (prefetch): a bad node is left out, not an error.
    pub(super) fn fetch_nodes(&mut self, objs: &[&PartObject], quiet: bool) -> Result<()> {
        let Some(first) = objs.first() else {
            return Ok(());
        };
        let remote = self.remote;
        self.known(first.version == 1)?;
        let known = if first.version == 1 {
            self.v1.as_ref()
        } else {
            self.v2.as_ref()
        }
        .ok_or_else(|| StoreError::Internal("no local trees".into()))?;
        let fetched = &mut self.fetched;
        let ahead = &mut self.node_bodies;
        let blobs = &self.blobs;
        let mut frontier: Vec<([u8; 32], u8)> = objs
            .iter()
            .flat_map(|o| o.top.iter().map(|h| (*h, o.height)))
            .collect();
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
            let mut handle = |h: [u8; 32], at: String, body: Found| {
                let level = get.get(&h).copied().unwrap_or(0);
                let node = body
                    .map_err(|r| format!("{r} (a part object names it)"))
                    .and_then(|body| {
                        if *blake3::hash(&body).as_bytes() != h {
                            return Err("its bytes do not hash to its name".to_string());
                        }
                        if level == 0 {
                            layout::decode_list(&body).map(Fetched::Leaf)
                        } else {
                            layout::decode_inner(&body).map(Fetched::Inner)
                        }
                    });
                match node {
                    Ok(node) => {
                        if let Fetched::Inner(c) = &node {
                            next.extend(c.iter().map(|c| (*c, level - 1)));
                        }
                        fetched.insert(h, node);
                        Ok(())
                    }
                    Err(_) if quiet => Ok(()),
                    Err(r) => Err(corrupt(remote, &at, r)),
                }
            };
            // Nodes fetched ahead (`prefetch`) need no request.
            let mut names: Vec<[u8; 32]> = Vec::new();
            for h in get.keys() {
                match ahead.remove(h) {
                    Some(b) => handle(*h, "a node fetched ahead".into(), Ok(b))?,
                    None => names.push(*h),
                }
            }
            blobs.get(Kind::Node, &names, &mut handle)?;
            frontier = next;
        }
        Ok(())
    }

    /// The chunk list a part object describes: its tree's nodes derived
    /// from local parts where their names match, else fetched. `None`: a
    /// local part changed under us (gc), retry.
    pub(super) fn chunk_list(&mut self, obj: &PartObject) -> Result<Option<Vec<ChunkRef>>> {
        self.fetch_nodes(&[obj], false)?;
        self.expand_all(obj)
    }

    /// [`Session::chunk_list`] from what is fetched already; `None` also
    /// when a node is missing or of the wrong kind (prefetch).
    pub(super) fn chunk_list_quiet(&mut self, obj: &PartObject) -> Result<Option<Vec<ChunkRef>>> {
        match self.expand_all(obj) {
            Err(RemoteError::Corrupt { .. }) => Ok(None),
            r => r,
        }
    }

    fn expand_all(&mut self, obj: &PartObject) -> Result<Option<Vec<ChunkRef>>> {
        let remote = self.remote;
        self.known(obj.version == 1)?;
        let known = if obj.version == 1 {
            self.v1.as_mut()
        } else {
            self.v2.as_mut()
        }
        .ok_or_else(|| StoreError::Internal("no local trees".into()))?;
        let mut out = Vec::with_capacity(obj.nchunks.min(1 << 20) as usize);
        for h in &obj.top {
            if !expand(
                self.store,
                known,
                &self.fetched,
                remote,
                h,
                obj.height,
                &mut out,
            )? {
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
    remote: &Remote,
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
