//! The blake3 of large buffers (an arena) on all cores, equal to
//! `blake3::hash`: used by the engine on downloaded arenas, and by the host
//! backend on a stopped runner's arena, which it reads piece by piece
//! ([`parallel_blake3_read`]): the verdict's hash is never the runner's.

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

/// Where [`parallel_blake3_read`] gets its bytes: fill the buffer with the
/// input's bytes at the offset (and prepare them, as [`Prepare`] does).
pub type ReadAt<'a> = &'a (dyn Fn(&mut [u8], u64) -> std::io::Result<()> + Sync);

/// Pieces read and hashed at once by [`parallel_blake3_read`]: large enough
/// that a read's system call costs little beside its copy, small enough to
/// stay in cache until it is hashed.
const READ_PIECE: usize = 256 << 10;

/// [`parallel_blake3`] of `len` bytes that are not in this process: each
/// thread reads its subtree's pieces with `read` into a buffer of its own
/// and hashes them (memory: one piece per thread). The first failed read
/// is the result.
pub fn parallel_blake3_read(len: u64, read: ReadAt<'_>) -> std::io::Result<[u8; 32]> {
    let failed = std::sync::Mutex::new(None);
    let Ok(len) = usize::try_from(len) else {
        return Err(std::io::Error::other(
            "the input does not fit the address space",
        ));
    };
    let hash = parallel_root(Remote {
        len,
        offset: 0,
        read,
        failed: &failed,
    });
    match failed.into_inner() {
        Ok(None) => Ok(hash),
        Ok(Some(e)) => Err(e),
        Err(_) => Err(std::io::Error::other("a hashing thread failed")),
    }
}

struct Remote<'a, 'r> {
    len: usize,
    offset: u64,
    read: ReadAt<'r>,
    failed: &'a std::sync::Mutex<Option<std::io::Error>>,
}

impl Remote<'_, '_> {
    fn feed(self, h: &mut blake3::Hasher) {
        let mut buf = vec![0u8; READ_PIECE.min(self.len)];
        let mut done = 0usize;
        while done < self.len {
            let n = READ_PIECE.min(self.len - done);
            let piece = &mut buf[..n];
            let at = self.offset + done as u64;
            if let Err(e) = (self.read)(piece, at) {
                if let Ok(mut f) = self.failed.lock() {
                    f.get_or_insert(e);
                }
                return;
            }
            h.update(piece);
            done += n;
        }
    }
}

impl Leaf for Remote<'_, '_> {
    fn len(&self) -> usize {
        self.len
    }
    fn split(self, at: usize) -> (Self, Self) {
        (
            Remote {
                len: at,
                offset: self.offset,
                read: self.read,
                failed: self.failed,
            },
            Remote {
                len: self.len - at,
                offset: self.offset + at as u64,
                read: self.read,
                failed: self.failed,
            },
        )
    }
    fn hash_leaf(self, offset: u64) -> blake3::hazmat::ChainingValue {
        use blake3::hazmat::HasherExt;
        let mut h = blake3::Hasher::new();
        h.set_input_offset(offset);
        self.feed(&mut h);
        if h.count() == 0 {
            // A read failed before any byte: the hash is discarded (the
            // error is the result), but an empty subtree may not be
            // finalized.
            h.update(&[0]);
        }
        h.finalize_non_root()
    }
    fn hash_root(self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        self.feed(&mut h);
        *h.finalize().as_bytes()
    }
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
    use blake3::hazmat::{merge_subtrees_root, Mode};
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
    let (l, r) = halves(data, 0, threads);
    *merge_subtrees_root(&l, &r, Mode::Hash).as_bytes()
}

/// How `threads` threads share a subtree of `len` bytes whose left subtree
/// is `left` bytes: (left's threads, right's threads), right's 0 when it
/// is hashed on the left's first thread after the left. BLAKE3's left
/// subtree is the largest power of two of chunks below the whole, so the
/// halves are rarely equal: an arena of 64 MiB and 16 bytes (LLVM's
/// recorded size) splits into 64 MiB and 16 bytes, and halving the thread
/// count at each level (as before) left one thread with all of it.
/// Threads follow the bytes instead.
fn allot(len: usize, left: usize, threads: usize) -> (usize, usize) {
    let right = (len - left) as u128;
    let rt = ((threads as u128 * right + len as u128 / 2) / len.max(1) as u128) as usize;
    let rt = rt.min(threads - 1);
    (threads - rt, rt)
}

/// The chaining values of the left and right subtrees of `data` (at input
/// offset `offset`), hashed by `threads` threads (this one included).
fn halves<L: Leaf>(
    data: L,
    offset: u64,
    threads: usize,
) -> (blake3::hazmat::ChainingValue, blake3::hazmat::ChainingValue) {
    let split = blake3::hazmat::left_subtree_len(data.len() as u64) as usize;
    let (lt, rt) = allot(data.len(), split, threads);
    let (left, right) = data.split(split);
    let right_offset = offset + split as u64;
    if rt == 0 {
        let l = subtree_cv(left, offset, lt);
        return (l, subtree_cv(right, right_offset, 1));
    }
    let (l, r) = std::thread::scope(|s| {
        let r = s.spawn(|| subtree_cv(right, right_offset, rt));
        let l = subtree_cv(left, offset, lt);
        (l, r.join())
    });
    // Hashing (and the back-translation) cannot panic on any input; a
    // panic there is a bug, raised here as it was raised there.
    let r = r.unwrap_or_else(|e| std::panic::resume_unwind(e));
    (l, r)
}

/// Chaining value of the BLAKE3 subtree `data` starting at byte `offset` of
/// the input (a subtree boundary), hashed by `threads` threads.
fn subtree_cv<L: Leaf>(data: L, offset: u64, threads: usize) -> blake3::hazmat::ChainingValue {
    use blake3::hazmat::{merge_subtrees_non_root, Mode};
    if threads < 2 || data.len() <= 2 * blake3::CHUNK_LEN || data.len() < PARALLEL_HASH_MIN / 2 {
        return data.hash_leaf(offset);
    }
    let (l, r) = halves(data, offset, threads);
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
        // Read piece by piece: equal, and a failed read is the result.
        for len in [0, 1000, PARALLEL_HASH_MIN + 77, data.len()] {
            let d = &data[..len];
            let read = |b: &mut [u8], at: u64| {
                b.copy_from_slice(&d[at as usize..at as usize + b.len()]);
                Ok(())
            };
            assert_eq!(
                parallel_blake3_read(len as u64, &read).unwrap(),
                *blake3::hash(d).as_bytes(),
                "{len}"
            );
        }
        let fail = |_: &mut [u8], at: u64| {
            if at >= 1 << 20 {
                Err(std::io::Error::from_raw_os_error(libc::ESRCH))
            } else {
                Ok(())
            }
        };
        let e = parallel_blake3_read(data.len() as u64, &fail).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH));
        for threads in 1..9 {
            for len in [(6 << 20) + 5, (8 << 20) + 16, 9 << 20] {
                let d = &data[..len];
                let (l, r) = halves::<&[u8]>(d, 0, threads);
                let root = blake3::hazmat::merge_subtrees_root(&l, &r, blake3::hazmat::Mode::Hash);
                assert_eq!(root, blake3::hash(d), "{threads} threads, {len} bytes");
            }
        }
    }

    /// The most bytes one thread hashes when `threads` share `len` bytes
    /// the way `halves` shares them.
    fn busiest(len: usize, threads: usize) -> usize {
        fn tree(len: usize, threads: usize) -> Vec<usize> {
            if threads < 2 || len <= 2 * blake3::CHUNK_LEN || len < PARALLEL_HASH_MIN / 2 {
                return vec![len];
            }
            let split = blake3::hazmat::left_subtree_len(len as u64) as usize;
            let (lt, rt) = allot(len, split, threads);
            let mut l = tree(split, lt);
            if rt == 0 {
                l[0] += len - split; // hashed after the left, on its first thread
                return l;
            }
            l.extend(tree(len - split, rt));
            l
        }
        tree(len, threads).into_iter().max().unwrap_or(0)
    }

    #[test]
    fn threads_share_an_arena_of_a_power_of_two_and_a_few_bytes_evenly() {
        // LLVM records a 64 MiB arena as 64 MiB and 16 bytes: its left
        // subtree is all but 16 bytes, and one thread used to hash it all.
        let mib = 1 << 20;
        assert!(busiest(64 * mib + 16, 2) <= 32 * mib + 16);
        assert!(busiest(1024 * mib + 16, 16) <= 64 * mib + 16);
        assert!(busiest(64 * mib, 2) <= 32 * mib);
        assert!(busiest(96 * mib, 3) <= 32 * mib);
        // A power-of-two thread count gets even shares of a power-of-two
        // arena; others (the tree splits in halves) at most twice one.
        for threads in 2..=16 {
            for len in [64 * mib + 16, 100 * mib + 7, 1024 * mib + 16] {
                let even = len / threads;
                let b = busiest(len, threads);
                assert!(
                    b <= 2 * even + 2 * mib,
                    "{threads} threads, {len} bytes: {b}"
                );
                if threads.is_power_of_two() && len != 100 * mib + 7 {
                    assert!(b <= even + 16, "{threads} threads, {len} bytes: {b}");
                }
            }
        }
        assert_eq!(allot(64 * mib + 16, 64 * mib, 2), (2, 0));
    }
}
