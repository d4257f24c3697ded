//! Index objects of format "RRX4" (spec/REMOTE.md, "Index objects with a
//! fanout"): entries sorted by blob name behind an uncompressed fanout
//! table, so a reader that needs a few blobs can fetch the header, the
//! fanout slots and the entries of the buckets its names fall in with
//! ranged GETs instead of the whole object. This module owns the byte
//! layout: encoding, decoding a whole object, and checking the pieces a
//! ranged lookup reads (`cold_lookup` issues the requests).
//!
//! ```text
//! 0    "RRX4"
//! 4    k u32           fanout bits, 0..=24
//! 8    n_packs u32
//! 12   0 u32           reserved
//! 16   n u64           entries
//! 24   fanout          (2^k + 1) x u32: fanout[b] = entries whose name's top k bits are < b
//! F    entries         n x (kind u8 | name 32 | pack u32 | offset u64 | len u32), sorted by (name, kind)
//! E    packs           n_packs x pack blake3 (32)
//! ```

use crate::remote::v3::{Entry, Kind};

pub const MAGIC: &[u8; 4] = b"RRX4";
pub const HEADER: u64 = 24;
pub const ENTRY: u64 = 1 + 32 + 4 + 8 + 4;
const MAX_BITS: u32 = 24;
/// No pack is larger (a push closes one at 64 MiB at most, plus one blob).
const MAX_PACK: u64 = 1 << 32;
/// An index object holds at most this many entries (as RRX3: 256 MiB).
const MAX_ENTRIES: u64 = (256 << 20) / ENTRY;
/// [`Header::guess`] tries objects of up to this many packs.
const GUESS_PACKS: u32 = 4096;

/// The fixed-size start of an RRX4 object: enough to find every section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub bits: u32,
    pub n_packs: u32,
    pub n: u64,
}

impl Header {
    pub fn buckets(&self) -> u64 {
        1u64 << self.bits
    }
    /// Where fanout slot `b` is.
    pub fn slot_at(&self, b: u64) -> u64 {
        HEADER + 4 * b
    }
    pub fn entries_at(&self) -> u64 {
        self.slot_at(self.buckets() + 1)
    }
    /// Where entry `i` is.
    pub fn entry_at(&self, i: u64) -> u64 {
        self.entries_at() + ENTRY * i
    }
    /// Where pack number `p`'s name is.
    pub fn pack_at(&self, p: u32) -> u64 {
        self.entry_at(self.n) + 32 * u64::from(p)
    }
    /// The object's size.
    pub fn size(&self) -> u64 {
        self.pack_at(self.n_packs)
    }
    /// The bucket of a blob name: its top `bits` bits.
    pub fn bucket(&self, name: &[u8; 32]) -> u64 {
        if self.bits == 0 {
            return 0;
        }
        let top = u32::from_be_bytes([name[0], name[1], name[2], name[3]]);
        u64::from(top >> (32 - self.bits))
    }
    /// The header rrstore's writer gives an object of `size` bytes (with
    /// [`bits_for`] fanout bits, or [`bits_for_v1`] for objects written
    /// before, and as few packs as the size allows), so a
    /// cold lookup can ask for fanout slots in the same round as the
    /// header. A guess only: the header read with it decides.
    pub fn guess(size: u64) -> Option<Header> {
        for n_packs in 0..=GUESS_PACKS {
            let Some(rest) = size.checked_sub(HEADER + 32 * u64::from(n_packs)) else {
                break;
            };
            for bits in 0..=MAX_BITS {
                let fanout = 4 * ((1u64 << bits) + 1);
                let Some(e) = rest.checked_sub(fanout) else {
                    break;
                };
                let n = e / ENTRY;
                if e % ENTRY == 0 && (bits_for(n) == bits || bits_for_v1(n) == bits) {
                    return Some(Header {
                        bits,
                        n_packs,
                        n: e / ENTRY,
                    });
                }
            }
        }
        None
    }
    /// Read the header of an object of `size` bytes and check it is
    /// consistent with that size.
    pub fn decode(b: &[u8], size: u64) -> Result<Header, String> {
        let b = b.get(..HEADER as usize).ok_or("shorter than its header")?;
        if &b[..4] != MAGIC {
            return Err("not an index object (bad magic)".into());
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut n = [0u8; 8];
        n.copy_from_slice(&b[16..24]);
        let h = Header {
            bits: u32_at(4),
            n_packs: u32_at(8),
            n: u64::from_le_bytes(n),
        };
        if h.bits > MAX_BITS || h.n > MAX_ENTRIES || u32_at(12) != 0 {
            return Err(format!(
                "its header ({} fanout bits, {} entries) is out of range",
                h.bits, h.n
            ));
        }
        if h.size() != size {
            return Err(format!(
                "its header describes {} bytes, the object has {size}",
                h.size()
            ));
        }
        Ok(h)
    }
}

/// Fanout bits for `n` entries: one to two buckets per entry, so the
/// bucket of a name holds, besides the name, half to one entry on average
/// and a cold lookup reads ~95 bytes per name (slots and entries); the
/// fanout is ~8-14% of the object. (With half as many buckets,
/// [`bits_for_v1`], a lookup read ~130 bytes per name, and the index bytes
/// were the largest part of the metadata a pull of a similar recording
/// reads; with twice as many, a pull that reads the object whole, as one
/// of many recordings does, pays more than the lookups save.) Readers take
/// any `k` up to [`MAX_BITS`].
fn bits_for(n: u64) -> u32 {
    (bits_for_v1(n) + 1).min(MAX_BITS)
}

/// The fanout bits of objects written before [`bits_for`] (rrstore up to
/// 2026-12-02): `n >> k <= 1`. Kept for guessing their headers.
fn bits_for_v1(n: u64) -> u32 {
    let mut k = 0;
    while k < MAX_BITS && (n >> k) > 1 {
        k += 1;
    }
    k
}

/// Encode an RRX4 index object; returns (name, body).
pub fn encode(entries: &[Entry]) -> Result<([u8; 32], Vec<u8>), String> {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by_key(|e| (e.name, e.kind as u8));
    // A blob listed twice (in one object) is found as well once.
    sorted.dedup_by_key(|e| (e.name, e.kind as u8));
    let mut packs: Vec<[u8; 32]> = Vec::new();
    let mut number = std::collections::HashMap::new();
    for e in &sorted {
        number.entry(e.pack).or_insert_with(|| {
            packs.push(e.pack);
            packs.len() as u32 - 1
        });
    }
    let h = Header {
        bits: bits_for(sorted.len() as u64),
        n_packs: u32::try_from(packs.len()).map_err(|_| "too many packs")?,
        n: sorted.len() as u64,
    };
    if h.n > MAX_ENTRIES {
        return Err(format!(
            "{} entries is more than one index object holds",
            h.n
        ));
    }
    let mut b = Vec::with_capacity(h.size() as usize);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&h.bits.to_le_bytes());
    b.extend_from_slice(&h.n_packs.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&h.n.to_le_bytes());
    let mut i = 0usize;
    for bucket in 0..=h.buckets() {
        while i < sorted.len() && h.bucket(&sorted[i].name) < bucket {
            i += 1;
        }
        b.extend_from_slice(&(i as u32).to_le_bytes());
    }
    for e in &sorted {
        b.push(e.kind as u8);
        b.extend_from_slice(&e.name);
        b.extend_from_slice(&number[&e.pack].to_le_bytes());
        b.extend_from_slice(&e.offset.to_le_bytes());
        b.extend_from_slice(&e.len.to_le_bytes());
    }
    for p in &packs {
        b.extend_from_slice(p);
    }
    Ok((*blake3::hash(&b).as_bytes(), b))
}

/// Decode a whole RRX4 object (its name already checked by the caller).
pub fn decode(b: &[u8]) -> Result<Vec<Entry>, String> {
    let h = Header::decode(b, b.len() as u64)?;
    let slots = slots(&b[h.slot_at(0) as usize..h.entries_at() as usize]);
    check_fanout(&h, 0, &slots)?;
    let packs: Vec<[u8; 32]> = b[h.pack_at(0) as usize..]
        .chunks_exact(32)
        .map(arr32)
        .collect();
    let mut out = Vec::with_capacity(h.n as usize);
    for bucket in 0..h.buckets() {
        let (s, e) = (slots[bucket as usize], slots[bucket as usize + 1]);
        let raw = &b[h.entry_at(s) as usize..h.entry_at(e) as usize];
        for r in bucket_entries(&h, bucket, raw)? {
            out.push(r.resolve(&h, |p| Ok(packs[p as usize]))?);
        }
    }
    Ok(out)
}

/// Fanout slots as numbers.
pub fn slots(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(4)
        .map(|s| u64::from(u32::from_le_bytes([s[0], s[1], s[2], s[3]])))
        .collect()
}

/// Check fanout slots starting at slot `first`: non-decreasing, within
/// `n`, and the table's ends 0 and `n`.
pub fn check_fanout(h: &Header, first: u64, slots: &[u64]) -> Result<(), String> {
    let bad = |why: String| Err(format!("damaged fanout: {why}"));
    for (i, w) in slots.windows(2).enumerate() {
        if w[0] > w[1] {
            return bad(format!(
                "slot {} ({}) > slot {}",
                first + i as u64,
                w[0],
                w[1]
            ));
        }
    }
    for (i, &s) in slots.iter().enumerate() {
        let at = first + i as u64;
        if s > h.n || (at == 0 && s != 0) || (at == h.buckets() && s != h.n) {
            return bad(format!("slot {at} is {s} of {} entries", h.n));
        }
    }
    Ok(())
}

/// An entry as stored: its pack still a number.
#[derive(Clone, Debug)]
pub struct Raw {
    pub kind: Kind,
    pub name: [u8; 32],
    pub pack: u32,
    pub offset: u64,
    pub len: u32,
}

impl Raw {
    pub fn resolve(
        &self,
        h: &Header,
        pack: impl FnOnce(u32) -> Result<[u8; 32], String>,
    ) -> Result<Entry, String> {
        if self.pack >= h.n_packs {
            return Err(format!("pack number {} of {}", self.pack, h.n_packs));
        }
        Ok(Entry {
            kind: self.kind,
            name: self.name,
            pack: pack(self.pack)?,
            offset: self.offset,
            len: self.len,
        })
    }
}

/// The entries of `bucket` (bytes `raw`), checked: each in its bucket, in
/// order, with a known kind and inside any pack.
pub fn bucket_entries(h: &Header, bucket: u64, raw: &[u8]) -> Result<Vec<Raw>, String> {
    let mut out: Vec<Raw> = Vec::with_capacity(raw.len() / ENTRY as usize);
    for e in raw.chunks_exact(ENTRY as usize) {
        let kind = Kind::from_u8(e[0]).ok_or_else(|| format!("unknown blob kind {}", e[0]))?;
        let name = arr32(&e[1..33]);
        let pack = u32::from_le_bytes([e[33], e[34], e[35], e[36]]);
        let mut off = [0u8; 8];
        off.copy_from_slice(&e[37..45]);
        let offset = u64::from_le_bytes(off);
        let len = u32::from_le_bytes([e[45], e[46], e[47], e[48]]);
        if h.bucket(&name) != bucket {
            return Err(format!(
                "damaged fanout: an entry of bucket {bucket} is not in it"
            ));
        }
        if out
            .last()
            .is_some_and(|p| (p.name, p.kind as u8) >= (name, kind as u8))
        {
            return Err("its entries are not sorted by name".into());
        }
        if offset
            .checked_add(u64::from(len))
            .is_none_or(|end| end > MAX_PACK)
        {
            return Err(format!("a blob at {offset}+{len} is past any pack's end"));
        }
        out.push(Raw {
            kind,
            name,
            pack,
            offset,
            len,
        });
    }
    Ok(out)
}

fn arr32(b: &[u8]) -> [u8; 32] {
    let mut h = [0u8; 32];
    h.copy_from_slice(&b[..32]);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: u32) -> Entry {
        Entry {
            kind: if i.is_multiple_of(3) {
                Kind::Node
            } else {
                Kind::Chunk
            },
            name: *blake3::hash(&i.to_le_bytes()).as_bytes(),
            pack: [(i % 4) as u8; 32],
            offset: u64::from(i) * 100,
            len: 100,
        }
    }

    #[test]
    fn objects_round_trip_sorted_with_a_fanout() {
        for n in [0u32, 1, 2, 3, 784, 5000] {
            let es: Vec<Entry> = (0..n).map(entry).collect();
            let (name, body) = encode(&es).unwrap();
            assert_eq!(*blake3::hash(&body).as_bytes(), name);
            let h = Header::decode(&body, body.len() as u64).unwrap();
            assert_eq!(h.n, u64::from(n));
            assert!(h.buckets() <= 2 * h.n + 2, "fanout stays small: {h:?}");
            assert!(h.buckets() >= h.n, "buckets hold little: {h:?}");
            let mut got = decode(&body).unwrap();
            let mut want = es.clone();
            got.sort_by_key(|e| e.name);
            want.sort_by_key(|e| e.name);
            assert_eq!(got, want);
        }
    }

    #[test]
    fn headers_are_guessed_from_the_size() {
        let mut right = 0;
        for n in [0u32, 1, 2, 3, 100, 784, 5000] {
            let es: Vec<Entry> = (0..n).map(entry).collect();
            let (_, body) = encode(&es).unwrap();
            let h = Header::decode(&body, body.len() as u64).unwrap();
            let g = Header::guess(body.len() as u64).unwrap();
            // Always a header of that size; the right one unless another
            // (fewer packs, more entries) has the same size.
            assert_eq!(g.size(), body.len() as u64);
            right += usize::from(g == h);
        }
        assert!(right >= 6, "{right} of 7 guessed");
        assert_eq!(Header::guess(3), None);
        // Objects written with the sparser fanout before are guessed too.
        let mut right = 0;
        for (n, n_packs) in [(1u64, 1u32), (100, 2), (784, 3), (5000, 1), (200_000, 9)] {
            let old = Header {
                bits: bits_for_v1(n),
                n_packs,
                n,
            };
            let g = Header::guess(old.size()).unwrap();
            assert_eq!(g.size(), old.size());
            right += usize::from(g == old);
        }
        assert!(right >= 4, "{right} of 5 old headers guessed");
    }

    #[test]
    fn damage_is_found() {
        let es: Vec<Entry> = (0..100).map(entry).collect();
        let (_, body) = encode(&es).unwrap();
        let h = Header::decode(&body, body.len() as u64).unwrap();
        // A truncated object no longer matches its header.
        assert!(Header::decode(&body, body.len() as u64 - 1).is_err());
        // A fanout slot that goes backwards.
        let mut bad = body.clone();
        let at = h.slot_at(5) as usize;
        bad[at..at + 4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(decode(&bad).unwrap_err().contains("fanout"));
        // An entry moved into another bucket.
        let mut bad = body.clone();
        let at = h.entry_at(0) as usize + 1;
        bad[at] ^= 0x80;
        assert!(decode(&bad).is_err());
    }
}
