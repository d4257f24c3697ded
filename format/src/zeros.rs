//! Finding zero runs at memory speed, and the hash of an all-zero chunk
//! without hashing it.
//!
//! Why: device arenas are often largely zero (unused heap, padding, cleared
//! buffers), and in a zero run every chunk is the maximum length: the
//! cutter crosses zero runs with [`first_nonzero`] (`cut`), and the chunk
//! hash of an all-zero chunk depends only on its length, so it is computed
//! once per length and thread ([`zero_hash`]) instead of once per chunk.
//! The scanner's resynchronization hashes on one thread, and a zero run
//! whose chunks are out of phase with the blocks' is all it hashes.

use std::cell::Cell;

use crate::chunk::ChunkHash;

/// Index of the first non-zero byte of `bytes`, if any.
pub fn first_nonzero(bytes: &[u8]) -> Option<usize> {
    // 64 bytes at a time first: an OR over a fixed-size block vectorizes,
    // a search for the first non-zero byte does not.
    let mut i = 0;
    while let Some(b) = bytes.get(i..i + 64) {
        if b.iter().fold(0u8, |a, &x| a | x) != 0 {
            break;
        }
        i += 64;
    }
    bytes[i..].iter().position(|&b| b != 0).map(|p| i + p)
}

/// Chunks shorter than this are hashed directly: the check would cost
/// more than it saves.
const MIN_LEN: usize = 4096;

thread_local! {
    /// The last all-zero length hashed on this thread, and its hash (zero
    /// runs repeat one length, the maximum chunk size).
    static LAST: Cell<Option<(usize, ChunkHash)>> = const { Cell::new(None) };
}

/// blake3 of `data` when it is all zero bytes and long enough to be worth
/// checking; `None` otherwise (hash it).
pub fn zero_hash(data: &[u8]) -> Option<ChunkHash> {
    if data.len() < MIN_LEN || first_nonzero(data).is_some() {
        return None;
    }
    let n = data.len();
    Some(LAST.with(|last| match last.get() {
        Some((len, h)) if len == n => h,
        _ => {
            let h = *blake3::hash(data).as_bytes();
            last.set(Some((n, h)));
            h
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_nonzero_byte_anywhere() {
        for len in [0, 1, 63, 64, 65, 200, 4096] {
            let mut v = vec![0u8; len];
            assert_eq!(first_nonzero(&v), None);
            for at in [0, len / 3, len.saturating_sub(1)] {
                if at < len {
                    v[at] = 7;
                    assert_eq!(first_nonzero(&v), Some(at), "len {len} at {at}");
                    v[at] = 0;
                }
            }
        }
    }

    #[test]
    fn zero_hash_is_blake3_of_the_bytes_and_only_for_zeros() {
        for len in [4096, 5000, 4096, 256 << 10, 256 << 10, 4097] {
            let mut v = vec![0u8; len];
            assert_eq!(zero_hash(&v), Some(*blake3::hash(&v).as_bytes()));
            v[len - 1] = 1;
            assert_eq!(zero_hash(&v), None);
        }
        assert_eq!(zero_hash(&[0u8; 100]), None);
    }
}
