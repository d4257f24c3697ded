//! The stream's BLAKE3 root from the chaining values of its blocks
//! (aligned power-of-two subtrees of the stream's tree).

use blake3::hazmat::{
    left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, Mode,
};

use crate::chunk::ChunkHash;

/// Root hash of a stream of `len` bytes from the chaining values of its
/// blocks (`block` bytes each, the last possibly shorter; at least two).
pub(super) fn merge_root(cvs: &[ChainingValue], block: u64, len: u64) -> ChunkHash {
    let (l, r) = split(cvs, block, len);
    merge_subtrees_root(&l, &r, Mode::Hash).into()
}

fn split(cvs: &[ChainingValue], block: u64, len: u64) -> (ChainingValue, ChainingValue) {
    let left_len = left_subtree_len(len);
    let nl = (left_len / block) as usize;
    (
        subtree(&cvs[..nl], block, left_len),
        subtree(&cvs[nl..], block, len - left_len),
    )
}

fn subtree(cvs: &[ChainingValue], block: u64, len: u64) -> ChainingValue {
    if cvs.len() == 1 {
        return cvs[0];
    }
    let (l, r) = split(cvs, block, len);
    merge_subtrees_non_root(&l, &r, Mode::Hash)
}
