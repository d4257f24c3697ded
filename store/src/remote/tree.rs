//! A part's chunk list as a content-defined tree (spec/REMOTE.md, "Chunk
//! lists"): list blocks of chunk references, cut where a chunk's hash
//! matches a mask, then inner nodes over the block names, cut the same way,
//! until at most [`TOP_MAX`] names are left for the part object. Two parts
//! that share most chunks share most nodes, so a pull fetches only the
//! nodes along the changed paths and derives the rest from its own parts.

use super::v2::layout::{self, ChunkRef};

/// How a chunk list is cut into a tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheme {
    /// A list block ends after a chunk whose blake3's last byte has these
    /// low bits clear, or at `leaf_max` chunks.
    pub leaf_mask: u8,
    pub leaf_max: usize,
    /// Inner levels (false: v1, the part object names every list block).
    pub inner: bool,
}

/// Layout version 1: flat lists of blocks of 16 chunks on average.
pub const V1: Scheme = Scheme {
    leaf_mask: 15,
    leaf_max: 64,
    inner: false,
};
/// Layout version 2: blocks of 8 chunks on average, inner nodes of 4.
pub const V2: Scheme = Scheme {
    leaf_mask: 7,
    leaf_max: 32,
    inner: true,
};

/// An inner node ends after a child whose name's last byte has these low
/// bits clear (and it has two children at least), or at `INNER_MAX`.
const INNER_MASK: u8 = 3;
const INNER_MAX: usize = 16;
/// Inner levels are added while a level has more names than this.
pub const TOP_MAX: usize = 16;

/// One node: its name, encoded body and the chunks it covers.
pub struct Node {
    pub hash: [u8; 32],
    pub body: Vec<u8>,
    /// 0: a list block; h: an inner node h levels above the blocks.
    pub level: u8,
    /// Chunk index range `start..end` in the part's chunk list.
    pub start: usize,
    pub end: usize,
}

/// Every node of a part's tree (leaves first) and what the part object
/// names.
pub struct Tree {
    pub nodes: Vec<Node>,
    pub height: u8,
    pub top: Vec<[u8; 32]>,
}

/// Cut `items` after an item whose key's last byte has `mask` clear (once
/// a block holds `min` items), or at `max` items.
fn cut<T>(
    items: &[T],
    key: impl Fn(&T) -> u8,
    mask: u8,
    min: usize,
    max: usize,
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, it) in items.iter().enumerate() {
        let n = i + 1 - start;
        if (key(it) & mask == 0 && n >= min) || n == max {
            out.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < items.len() {
        out.push((start, items.len()));
    }
    out
}

/// Build the tree of a chunk list.
pub fn build(chunks: &[ChunkRef], scheme: Scheme) -> Tree {
    let mut nodes = Vec::new();
    // (name, chunk start, chunk end) of the current level.
    let mut level: Vec<([u8; 32], usize, usize)> = Vec::new();
    for (s, e) in cut(chunks, |c| c.0[31], scheme.leaf_mask, 1, scheme.leaf_max) {
        let body = layout::encode_list(&chunks[s..e]);
        let hash = *blake3::hash(&body).as_bytes();
        level.push((hash, s, e));
        nodes.push(Node {
            hash,
            body,
            level: 0,
            start: s,
            end: e,
        });
    }
    let mut height = 0u8;
    while scheme.inner && level.len() > TOP_MAX && height < layout::MAX_HEIGHT {
        let mut next = Vec::new();
        for (s, e) in cut(&level, |n| n.0[31], INNER_MASK, 2, INNER_MAX) {
            let names: Vec<[u8; 32]> = level[s..e].iter().map(|n| n.0).collect();
            let body = layout::encode_inner(&names);
            let hash = *blake3::hash(&body).as_bytes();
            let (start, end) = (level[s].1, level[e - 1].2);
            next.push((hash, start, end));
            nodes.push(Node {
                hash,
                body,
                level: height + 1,
                start,
                end,
            });
        }
        level = next;
        height += 1;
    }
    Tree {
        nodes,
        height,
        top: level.iter().map(|n| n.0).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(n: u32, salt: u8) -> Vec<ChunkRef> {
        (0..n)
            .map(|i| {
                let mut b = i.to_le_bytes().to_vec();
                b.push(salt);
                (*blake3::hash(&b).as_bytes(), 1000 + i)
            })
            .collect()
    }

    #[test]
    fn trees_cover_the_list_and_share_nodes_after_a_small_change() {
        let a = chunks(900, 0);
        let t = build(&a, V2);
        assert!(t.height >= 1 && t.top.len() <= TOP_MAX);
        // Leaves cover the list in order.
        let leaves: Vec<&Node> = t
            .nodes
            .iter()
            .filter(|n| n.body.starts_with(b"RRL1"))
            .collect();
        let mut all = Vec::new();
        for l in &leaves {
            all.extend(layout::decode_list(&l.body).unwrap());
        }
        assert_eq!(all, a);
        for n in &t.nodes {
            assert_eq!(*blake3::hash(&n.body).as_bytes(), n.hash);
        }
        // One chunk changed: only the nodes on its path differ.
        let mut b = a.clone();
        b[450] = chunks(1, 9)[0];
        let tb = build(&b, V2);
        let names: std::collections::HashSet<_> = t.nodes.iter().map(|n| n.hash).collect();
        let new = tb.nodes.iter().filter(|n| !names.contains(&n.hash)).count();
        assert!(new <= 2 * (tb.height as usize + 1), "{new} new nodes");
        // v1: flat, never inner nodes.
        let v1 = build(&a, V1);
        assert_eq!(v1.height, 0);
        assert_eq!(v1.top.len(), v1.nodes.len());
        // Empty part: no nodes.
        assert!(build(&[], V2).top.is_empty());
    }
}
