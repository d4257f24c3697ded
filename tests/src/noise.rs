//! Deterministic pseudo-random numbers and bytes (xorshift64): data that
//! does not compress or deduplicate, the same on every run.

/// A xorshift64 generator.
pub struct XorShift(u64);

impl XorShift {
    /// A generator seeded with `seed` (made odd: zero is a fixed point).
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `n` bytes, one per number, taken `shift` bits up.
    pub fn bytes(&mut self, n: usize, shift: u32) -> Vec<u8> {
        (0..n).map(|_| (self.next_u64() >> shift) as u8).collect()
    }

    /// `n` bytes: the numbers little-endian, eight bytes each.
    pub fn words(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(n);
        out
    }
}

/// `n` noise bytes for `seed` (bits 24..32 of each number).
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    XorShift::new(seed).bytes(n, 24)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_the_same_for_a_seed_and_differs_across_seeds() {
        assert_eq!(noise(64, 7), noise(64, 7));
        assert_ne!(noise(64, 7), noise(64, 8));
        assert_eq!(XorShift::new(3).words(13).len(), 13);
    }
}
