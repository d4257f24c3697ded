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
    use blake3::hazmat::{left_subtree_len, merge_subtrees_root, Mode};
    // Small inputs first: asking for the CPU count reads cgroup files
    // (~0.2 ms), more than hashing a small arena takes.
    if data.len() < PARALLEL_HASH_MIN {
        return *blake3::hash(data).as_bytes();
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if threads < 2 {
        return *blake3::hash(data).as_bytes();
    }
    let split = left_subtree_len(data.len() as u64) as usize;
    let (left, right) = data.split_at(split);
    let depth = threads.next_power_of_two().trailing_zeros() - 1;
    let (l, r) = std::thread::scope(|s| {
        let r = s.spawn(|| subtree_cv(right, split as u64, depth));
        let l = subtree_cv(left, 0, depth);
        (l, r.join())
    });
    match r {
        Ok(r) => *merge_subtrees_root(&l, &r, Mode::Hash).as_bytes(),
        Err(_) => *blake3::hash(data).as_bytes(),
    }
}

/// Chaining value of the BLAKE3 subtree `data` starting at byte `offset` of
/// the input (a subtree boundary), split `depth` more times across threads.
fn subtree_cv(data: &[u8], offset: u64, depth: u32) -> blake3::hazmat::ChainingValue {
    use blake3::hazmat::{left_subtree_len, merge_subtrees_non_root, HasherExt, Mode};
    if depth == 0 || data.len() <= 2 * blake3::CHUNK_LEN || data.len() < PARALLEL_HASH_MIN / 2 {
        return blake3::Hasher::new()
            .set_input_offset(offset)
            .update(data)
            .finalize_non_root();
    }
    let split = left_subtree_len(data.len() as u64) as usize;
    let (left, right) = data.split_at(split);
    let (l, r) = std::thread::scope(|s| {
        let r = s.spawn(|| subtree_cv(right, offset + split as u64, depth - 1));
        let l = subtree_cv(left, offset, depth - 1);
        (l, r.join())
    });
    match r {
        Ok(r) => merge_subtrees_non_root(&l, &r, Mode::Hash),
        // A panicking hasher thread: hash this subtree here instead.
        Err(_) => blake3::Hasher::new()
            .set_input_offset(offset)
            .update(data)
            .finalize_non_root(),
    }
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
        for depth in 0..4 {
            let d = &data[..(6 << 20) + 5];
            let split = blake3::hazmat::left_subtree_len(d.len() as u64) as usize;
            let l = subtree_cv(&d[..split], 0, depth);
            let r = subtree_cv(&d[split..], split as u64, depth);
            let root = blake3::hazmat::merge_subtrees_root(&l, &r, blake3::hazmat::Mode::Hash);
            assert_eq!(root, blake3::hash(d), "depth {depth}");
        }
    }
}
