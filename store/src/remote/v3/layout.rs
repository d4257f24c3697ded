//! Layout version 3 (spec/REMOTE.md, "Version 3"): the objects that hold
//! version 2's chunks, tree nodes and part objects as blobs inside pack
//! objects, the index objects that find them, and the layout marker.
//!
//! ```text
//! rrstore-layout          "rrstore remote layout 3\n"
//! packs/<ab>/<blake3>     blobs back to back
//! index/<blake3>          "RRX4" (`fanout_index`: sorted, with a fanout), or the older
//!                         "RRX3" | zstd(n_packs u32 | packs | n u64 | n x entry)
//! ```

use rrstore_format::id::hex;

pub const MARKER: &str = "rrstore-layout";
pub const MARKER_BODY: &[u8] = b"rrstore remote layout 3\n";
pub const PACKS: &str = "packs/";
pub const INDEX: &str = "index/";
/// An index object lists at most this many blobs.
pub const INDEX_MAX: usize = 200_000;

const INDEX_MAGIC: &[u8; 4] = b"RRX3";
/// An index object is at most this large decompressed.
const MAX_INDEX: usize = 256 << 20;
/// An "RRX3" object decompresses to at most this many times its size
/// (plus [`EXPANSION_SLACK`]): each entry's 32-byte blob name and each
/// pack name are blake3 hashes, which do not compress, so an honest
/// object's 49-byte entries take at least ~33 compressed bytes (1.5x).
/// One that claims more is forged: without the bound, a 1 MB object
/// listing 2 million entries cost a pull 277 MB of memory and a 280 MB
/// cache file (issue 39).
pub const MAX_EXPANSION: usize = 2;
const EXPANSION_SLACK: usize = 4096;
const ENTRY: usize = 1 + 32 + 4 + 8 + 4;
/// No pack is larger (a push closes one at 64 MiB at most, plus one blob).
const MAX_PACK: u64 = 1 << 32;

/// What a blob is (its version 2 object).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Chunk = 0,
    Node = 1,
    Part = 2,
}

impl Kind {
    pub fn from_u8(k: u8) -> Option<Kind> {
        match k {
            0 => Some(Kind::Chunk),
            1 => Some(Kind::Node),
            2 => Some(Kind::Part),
            _ => None,
        }
    }
    pub fn word(self) -> &'static str {
        match self {
            Kind::Chunk => "chunk",
            Kind::Node => "node",
            Kind::Part => "part",
        }
    }
}

pub fn pack_key(h: &[u8; 32]) -> String {
    let x = hex(h);
    format!("{PACKS}{}/{x}", &x[..2])
}

pub fn index_key(h: &[u8; 32]) -> String {
    format!("{INDEX}{}", hex(h))
}

/// The hash an `index/<hex>` key names.
pub fn index_of_key(key: &str) -> Option<[u8; 32]> {
    rrstore_format::id::parse_hex32(key.strip_prefix(INDEX)?)
}

/// Where one blob is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub name: [u8; 32],
    pub pack: [u8; 32],
    pub offset: u64,
    pub len: u32,
}

/// Encode an index object ("RRX4"); returns (name, body).
pub fn encode_index(entries: &[Entry]) -> Result<([u8; 32], Vec<u8>), String> {
    super::fanout_index::encode(entries)
}

/// Encode an index object for `remote`: "RRX4", or the older "RRX3" form
/// under the test hook [`RemoteOptions::index_rrx3`](crate::remote::options::RemoteOptions)
/// (to test that remotes holding it stay readable).
pub fn encode_index_for(
    remote: &crate::remote::Remote,
    entries: &[Entry],
) -> Result<([u8; 32], Vec<u8>), String> {
    if remote.options.index_rrx3 {
        return encode_index_v3(entries);
    }
    encode_index(entries)
}

/// Encode an "RRX3" index object (one zstd frame, unsorted).
pub fn encode_index_v3(entries: &[Entry]) -> Result<([u8; 32], Vec<u8>), String> {
    let mut packs: Vec<[u8; 32]> = Vec::new();
    let mut number = std::collections::HashMap::new();
    for e in entries {
        number.entry(e.pack).or_insert_with(|| {
            packs.push(e.pack);
            packs.len() as u32 - 1
        });
    }
    let mut raw = Vec::with_capacity(12 + packs.len() * 32 + entries.len() * ENTRY);
    raw.extend_from_slice(&(packs.len() as u32).to_le_bytes());
    for p in &packs {
        raw.extend_from_slice(p);
    }
    raw.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for e in entries {
        raw.push(e.kind as u8);
        raw.extend_from_slice(&e.name);
        raw.extend_from_slice(&number[&e.pack].to_le_bytes());
        raw.extend_from_slice(&e.offset.to_le_bytes());
        raw.extend_from_slice(&e.len.to_le_bytes());
    }
    let mut body = INDEX_MAGIC.to_vec();
    body.extend_from_slice(&zstd::bulk::compress(&raw, 3).map_err(|e| e.to_string())?);
    Ok((*blake3::hash(&body).as_bytes(), body))
}

/// Decode index object `name` and check it.
pub fn decode_index(b: &[u8], name: &[u8; 32]) -> Result<Vec<Entry>, String> {
    if blake3::hash(b).as_bytes() != name {
        return Err("its bytes do not hash to its name".into());
    }
    if b.starts_with(super::fanout_index::MAGIC) {
        return super::fanout_index::decode(b);
    }
    let z = b
        .strip_prefix(&INDEX_MAGIC[..])
        .ok_or("not an index object (bad magic)")?;
    // The bound also caps the buffer `decompress` allocates up front.
    let cap = z
        .len()
        .saturating_mul(MAX_EXPANSION)
        .saturating_add(EXPANSION_SLACK)
        .min(MAX_INDEX);
    let raw = zstd::bulk::decompress(z, cap).map_err(|e| {
        format!(
            "it decompresses to more than {cap} bytes ({e}), more than an index object of {} bytes \
             can hold ({MAX_EXPANSION}x: blob names do not compress): a forged index object",
            b.len()
        )
    })?;
    let short = || format!("{} decompressed bytes is too short", raw.len());
    let n_packs = u32::from_le_bytes(
        raw.get(..4)
            .ok_or_else(short)?
            .try_into()
            .map_err(|_| short())?,
    ) as usize;
    let packs_end = n_packs
        .checked_mul(32)
        .and_then(|x| x.checked_add(4))
        .ok_or_else(short)?;
    let packs: Vec<[u8; 32]> = raw
        .get(4..packs_end)
        .ok_or_else(short)?
        .chunks_exact(32)
        .map(arr32)
        .collect();
    let n_bytes = raw.get(packs_end..packs_end + 8).ok_or_else(short)?;
    let n = u64::from_le_bytes(n_bytes.try_into().map_err(|_| short())?) as usize;
    let rest = &raw[packs_end + 8..];
    if Some(rest.len()) != n.checked_mul(ENTRY) {
        return Err(format!(
            "{n} entries need {} bytes, the object has {}",
            n.saturating_mul(ENTRY),
            rest.len()
        ));
    }
    rest.chunks_exact(ENTRY)
        .map(|e| {
            let kind = Kind::from_u8(e[0]).ok_or_else(|| format!("unknown blob kind {}", e[0]))?;
            let p = u32::from_le_bytes([e[33], e[34], e[35], e[36]]) as usize;
            let pack = *packs
                .get(p)
                .ok_or_else(|| format!("pack number {p} of {n_packs}"))?;
            let mut off = [0u8; 8];
            off.copy_from_slice(&e[37..45]);
            let offset = u64::from_le_bytes(off);
            let len = u32::from_le_bytes([e[45], e[46], e[47], e[48]]);
            // Readers slice packs at offset..offset+len.
            if offset
                .checked_add(u64::from(len))
                .is_none_or(|end| end > MAX_PACK)
            {
                return Err(format!("a blob at {offset}+{len} is past any pack's end"));
            }
            Ok(Entry {
                kind,
                name: arr32(&e[1..33]),
                pack,
                offset,
                len,
            })
        })
        .collect()
}

fn arr32(b: &[u8]) -> [u8; 32] {
    let mut h = [0u8; 32];
    h.copy_from_slice(&b[..32]);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_objects_round_trip_and_are_checked() {
        let e = |k, n: u8, p: u8, o| Entry {
            kind: k,
            name: [n; 32],
            pack: [p; 32],
            offset: o,
            len: 7,
        };
        let es = vec![
            e(Kind::Chunk, 1, 9, 0),
            e(Kind::Node, 2, 9, 7),
            e(Kind::Part, 3, 8, 0),
        ];
        let (name, body) = encode_index_v3(&es).unwrap();
        assert_eq!(decode_index(&body, &name).unwrap(), es);
        let (name4, body4) = encode_index(&es).unwrap();
        assert!(body4.starts_with(b"RRX4"));
        let mut sorted = es.clone();
        sorted.sort_by_key(|e| e.name);
        assert_eq!(decode_index(&body4, &name4).unwrap(), sorted);
        assert!(decode_index(&body, &[0; 32]).is_err());
        let mut bad = body.clone();
        bad[5] ^= 1;
        assert!(decode_index(&bad, blake3::hash(&bad).as_bytes()).is_err());
        assert_eq!(index_of_key(&index_key(&name)), Some(name));
        // An entry past any pack's end is refused, not trusted.
        let (name, body) = encode_index_v3(&[e(Kind::Chunk, 1, 9, u64::MAX)]).unwrap();
        assert!(decode_index(&body, &name).unwrap_err().contains("past"));
        let (name, body) = encode_index(&[e(Kind::Chunk, 1, 9, u64::MAX)]).unwrap();
        assert!(decode_index(&body, &name).unwrap_err().contains("past"));
        // Entries that compress far better than blake3 names can: forged.
        let many: Vec<Entry> = (0..100_000).map(|_| e(Kind::Chunk, 1, 9, 0)).collect();
        let (name, body) = encode_index_v3(&many).unwrap();
        assert!(body.len() * MAX_EXPANSION < many.len() * ENTRY);
        assert!(decode_index(&body, &name).unwrap_err().contains("forged"));
        // Honest objects (random names) stay far below the bound.
        let honest: Vec<Entry> = (0..20_000u32)
            .map(|i| Entry {
                name: *blake3::hash(&i.to_le_bytes()).as_bytes(),
                offset: u64::from(i) * 4000,
                len: 3000 + i % 1000,
                ..e(Kind::Chunk, 0, (i % 7) as u8, 0)
            })
            .collect();
        let (name, body) = encode_index_v3(&honest).unwrap();
        assert_eq!(decode_index(&body, &name).unwrap().len(), honest.len());
    }
}
