//! The blake3 of large buffers (an arena) on all cores, equal to
//! `blake3::hash`: used by the engine on downloaded arenas and by the host
//! runner on its arena in place.

/// Inputs at least this long are hashed on several threads.
const PARALLEL_HASH_MIN: usize = 4 << 20;

/// `blake3::hash(data)` computed on all cores: the BLAKE3 tree is split into
/// its left and right subtrees (recursively, one leaf per thread), whose
/// chaining values are merged into the root hash. Equal to `blake3::hash`
/// for every input.
pub fn parallel_blake3(data: &[u8]) -> [u8; 32] {
    parallel_root(data)
}

/// What [`parallel_blake3_prepared`] does to each piece of its input right
/// before hashing it: the piece and its offset in the input.
pub type Prepare<'a> = &'a (dyn Fn(&mut [u8], u64) + Sync);

/// Pieces prepared and hashed at once: small enough to stay in cache
/// between the two.
const PREPARE_PIECE: usize = 64 << 10;

/// [`parallel_blake3`] of `data` after `prepare` changed it in place, in
/// one pass: each thread prepares a 64 KiB piece of its subtree and hashes
/// it while it is in cache (a relocated replay's back-translation,
/// `crate::placement`, costs no second pass over the arena).
pub fn parallel_blake3_prepared(data: &mut [u8], prepare: Prepare<'_>) -> [u8; 32] {
    parallel_root(Prepared {
        data,
        offset: 0,
        prepare,
    })
}

/// A subtree's input: its length, how to split it, how to hash a leaf.
trait Leaf: Send + Sized {
    fn len(&self) -> usize;
    fn split(self, at: usize) -> (Self, Self);
    fn hash_leaf(self, offset: u64) -> blake3::hazmat::ChainingValue;
    fn hash_root(self) -> [u8; 32];
}

impl Leaf for &[u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn split(self, at: usize) -> (Self, Self) {
        self.split_at(at)
    }
    fn hash_leaf(self, offset: u64) -> blake3::hazmat::ChainingValue {
        use blake3::hazmat::HasherExt;
        blake3::Hasher::new()
            .set_input_offset(offset)
            .update(self)
            .finalize_non_root()
    }
    fn hash_root(self) -> [u8; 32] {
        *blake3::hash(self).as_bytes()
    }
}

struct Prepared<'a, 'p> {
    data: &'a mut [u8],
    offset: u64,
    prepare: Prepare<'p>,
}

impl Prepared<'_, '_> {
    fn feed(self, h: &mut blake3::Hasher) {
        let mut at = self.offset;
        for piece in self.data.chunks_mut(PREPARE_PIECE) {
            (self.prepare)(piece, at);
            h.update(piece);
            at += piece.len() as u64;
        }
    }
}

impl Leaf for Prepared<'_, '_> {
    fn len(&self) -> usize {
        self.data.len()
    }
    fn split(self, at: usize) -> (Self, Self) {
        let (l, r) = self.data.split_at_mut(at);
        (
            Prepared {
                data: l,
                offset: self.offset,
                prepare: self.prepare,
            },
            Prepared {
                data: r,
                offset: self.offset + at as u64,
                prepare: self.prepare,
            },
        )
    }
    fn hash_leaf(self, offset: u64) -> blake3::hazmat::ChainingValue {
        use blake3::hazmat::HasherExt;
        let mut h = blake3::Hasher::new();
        h.set_input_offset(offset);
        self.feed(&mut h);
        h.finalize_non_root()
    }
    fn hash_root(self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        self.feed(&mut h);
        *h.finalize().as_bytes()
    }
}

fn parallel_root<L: Leaf>(data: L) -> [u8; 32] {
    use blake3::hazmat::{left_subtree_len, merge_subtrees_root, Mode};
    // Small inputs first: asking for the CPU count reads cgroup files
    // (~0.2 ms), more than hashing a small arena takes.
    if data.len() < PARALLEL_HASH_MIN {
        return data.hash_root();
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if threads < 2 {
        return data.hash_root();
    }
    let split = left_subtree_len(data.len() as u64) as usize;
    let (left, right) = data.split(split);
    let depth = threads.next_power_of_two().trailing_zeros() - 1;
    let (l, r) = std::thread::scope(|s| {
        let r = s.spawn(|| subtree_cv(right, split as u64, depth));
        let l = subtree_cv(left, 0, depth);
        (l, r.join())
    });
    // Hashing (and the back-translation) cannot panic on any input; a
    // panic there is a bug, raised here as it was raised there.
    let r = r.unwrap_or_else(|e| std::panic::resume_unwind(e));
    *merge_subtrees_root(&l, &r, Mode::Hash).as_bytes()
}

/// Chaining value of the BLAKE3 subtree `data` starting at byte `offset` of
/// the input (a subtree boundary), split `depth` more times across threads.
fn subtree_cv<L: Leaf>(data: L, offset: u64, depth: u32) -> blake3::hazmat::ChainingValue {
    use blake3::hazmat::{left_subtree_len, merge_subtrees_non_root, Mode};
    if depth == 0 || data.len() <= 2 * blake3::CHUNK_LEN || data.len() < PARALLEL_HASH_MIN / 2 {
        return data.hash_leaf(offset);
    }
    let split = left_subtree_len(data.len() as u64) as usize;
    let (left, right) = data.split(split);
    let (l, r) = std::thread::scope(|s| {
        let r = s.spawn(|| subtree_cv(right, offset + split as u64, depth - 1));
        let l = subtree_cv(left, offset, depth - 1);
        (l, r.join())
    });
    let r = r.unwrap_or_else(|e| std::panic::resume_unwind(e));
    merge_subtrees_non_root(&l, &r, Mode::Hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_blake3_equals_blake3() {
        let data: Vec<u8> = (0..(9u32 << 20) + 777)
            .map(|i| (i ^ (i >> 11)) as u8)
            .collect();
        for len in [
            0,
            1,
            1024,
            PARALLEL_HASH_MIN - 1,
            PARALLEL_HASH_MIN,
            PARALLEL_HASH_MIN + 1,
            8 << 20,
            data.len(),
        ] {
            assert_eq!(
                parallel_blake3(&data[..len]),
                *blake3::hash(&data[..len]).as_bytes(),
                "{len}"
            );
        }
        // Prepared: the hash of the changed bytes, the bytes changed.
        let flip = |b: &mut [u8], at: u64| {
            for (i, x) in b.iter_mut().enumerate() {
                *x ^= (at as usize + i) as u8;
            }
        };
        for len in [1000, PARALLEL_HASH_MIN + 77, data.len()] {
            let mut mine = data[..len].to_vec();
            let mut want = data[..len].to_vec();
            flip(&mut want, 0);
            assert_eq!(
                parallel_blake3_prepared(&mut mine, &flip),
                *blake3::hash(&want).as_bytes(),
                "{len}"
            );
            assert!(mine == want, "{len}");
        }
        for depth in 0..4 {
            let d = &data[..(6 << 20) + 5];
            let split = blake3::hazmat::left_subtree_len(d.len() as u64) as usize;
            let l = subtree_cv::<&[u8]>(&d[..split], 0, depth);
            let r = subtree_cv::<&[u8]>(&d[split..], split as u64, depth);
            let root = blake3::hazmat::merge_subtrees_root(&l, &r, blake3::hazmat::Mode::Hash);
            assert_eq!(root, blake3::hash(d), "depth {depth}");
        }
    }
}
