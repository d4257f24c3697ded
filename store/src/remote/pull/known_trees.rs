//! What a pull knows of chunk-list trees without fetching: every node of
//! every local part's tree (derived by cutting the part's chunk list the
//! way a pusher does), plus the nodes already fetched in this pull. Nodes
//! are kept as (part, chunk range) so memory stays ~50 bytes per node.

use std::collections::HashMap;

use crate::error::Result;
use crate::remote::tree::{self, Scheme};
use crate::remote::v2::layout::ChunkRef;
use crate::Store;

/// Local nodes of one tree scheme: name -> (local part, chunk range).
pub(crate) struct Known {
    scheme: Scheme,
    parts: Vec<[u8; 32]>,
    spans: HashMap<[u8; 32], (u32, u32, u32)>,
    /// Chunk lists of local parts read back to expand spans.
    loaded: HashMap<u32, Vec<ChunkRef>>,
}

impl Known {
    /// Cut every local part's chunk list with `scheme`.
    pub fn from_store(store: &Store, scheme: Scheme) -> Result<Known> {
        let mut k = Known {
            scheme,
            parts: Vec::new(),
            spans: HashMap::new(),
            loaded: HashMap::new(),
        };
        store.xfer_each_part(&mut |part, refs| k.add_part(part, refs))?;
        Ok(k)
    }

    /// Register a part now in the local store (e.g. just pulled).
    pub fn add_part(&mut self, part: [u8; 32], refs: &[ChunkRef]) {
        let idx = self.parts.len() as u32;
        self.parts.push(part);
        for n in tree::build(refs, self.scheme).nodes {
            self.spans
                .entry(n.hash)
                .or_insert((idx, n.start as u32, n.end as u32));
        }
    }

    pub fn contains(&self, node: &[u8; 32]) -> bool {
        self.spans.contains_key(node)
    }

    /// Append the chunks a known node covers to `out`.
    pub fn expand(
        &mut self,
        store: &Store,
        node: &[u8; 32],
        out: &mut Vec<ChunkRef>,
    ) -> Result<bool> {
        let Some(&(idx, s, e)) = self.spans.get(node) else {
            return Ok(false);
        };
        if !self.loaded.contains_key(&idx) {
            let refs = store.xfer_part_refs(&self.parts[idx as usize])?;
            self.loaded.insert(idx, refs);
        }
        let refs = self.loaded.get(&idx).map(Vec::as_slice).unwrap_or(&[]);
        match refs.get(s as usize..e as usize) {
            Some(r) => {
                out.extend_from_slice(r);
                Ok(true)
            }
            // The part changed under us (gc): treat the node as unknown.
            None => Ok(false),
        }
    }

    /// Drop chunk lists read back for [`Known::expand`].
    pub fn release(&mut self) {
        self.loaded.clear();
    }
}
