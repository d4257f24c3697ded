//! Object keys and object encodings of a remote (spec/REMOTE.md).
//!
//! ```text
//! chunks/<ab>/<chunk blake3>   store pack entry: 52-byte entry header + stored bytes
//! lists/<ab>/<list blake3>     "RRL1" | n u32 | n x (chunk blake3 (32) | len u32)
//! parts/<ab>/<part blake3>     "RRP1" | part len u64 | chunks u64 | n u32 | n x list blake3
//! recordings/<recording ID>    MessagePack manifest (recording, label, tags, ...)
//! ```
//! Every object is immutable and named by a hash its reader checks.

use std::collections::BTreeMap;

use rrstore_format::chunk::ChunkHash;
use rrstore_format::id::hex;
use rrstore_format::{Recording, RecordingId};
use serde::{Deserialize, Serialize};

pub const CHUNKS: &str = "chunks/";
pub const LISTS: &str = "lists/";
pub const PARTS: &str = "parts/";
pub const RECORDINGS: &str = "recordings/";

const LIST_MAGIC: &[u8; 4] = b"RRL1";
const PART_MAGIC: &[u8; 4] = b"RRP1";
/// A chunk list block ends after a chunk whose hash's last byte has these
/// low bits clear (content-defined: 16 chunks on average), or at this size.
const LIST_MASK: u8 = 15;
const LIST_MAX: usize = 64;

fn fanned(dir: &str, h: &[u8]) -> String {
    let x = hex(h);
    format!("{dir}{}/{x}", &x[..2])
}

pub fn chunk_key(h: &ChunkHash) -> String {
    fanned(CHUNKS, h)
}
pub fn list_key(h: &[u8; 32]) -> String {
    fanned(LISTS, h)
}
pub fn part_key(h: &[u8; 32]) -> String {
    fanned(PARTS, h)
}
pub fn recording_key(id: &RecordingId) -> String {
    format!("{RECORDINGS}{}", id.to_hex())
}

/// The hash at the end of a fanned key (`dir/ab/<64 hex>`), if it is one.
pub fn hash_of_key(key: &str, dir: &str) -> Option<[u8; 32]> {
    let rest = key.strip_prefix(dir)?;
    let (fan, name) = rest.split_once('/')?;
    let h = rrstore_format::id::parse_hex32(name)?;
    (fan.len() == 2 && name.starts_with(fan)).then_some(h)
}

/// The recording ID of a `recordings/<id>` key.
pub fn id_of_key(key: &str) -> Option<RecordingId> {
    key.strip_prefix(RECORDINGS)?.parse().ok()
}

/// One chunk of a part: address and uncompressed length.
pub type ChunkRef = (ChunkHash, u32);

/// Split a part's chunk list into content-defined blocks, so two parts that
/// share most chunks share most blocks.
pub fn cut_blocks(chunks: &[ChunkRef]) -> Vec<&[ChunkRef]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, (h, _)) in chunks.iter().enumerate() {
        if h[31] & LIST_MASK == 0 || i + 1 - start == LIST_MAX {
            out.push(&chunks[start..=i]);
            start = i + 1;
        }
    }
    if start < chunks.len() {
        out.push(&chunks[start..]);
    }
    out
}

pub fn encode_list(block: &[ChunkRef]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + block.len() * 36);
    v.extend_from_slice(LIST_MAGIC);
    v.extend_from_slice(&(block.len() as u32).to_le_bytes());
    for (h, len) in block {
        v.extend_from_slice(h);
        v.extend_from_slice(&len.to_le_bytes());
    }
    v
}

pub fn decode_list(b: &[u8]) -> Result<Vec<ChunkRef>, String> {
    if b.len() < 8 || &b[..4] != LIST_MAGIC {
        return Err("not a chunk list (bad magic)".into());
    }
    let n = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
    if b.len() != 8 + n * 36 {
        return Err(format!(
            "a list of {n} chunks must be {} bytes, not {}",
            8 + n * 36,
            b.len()
        ));
    }
    Ok(b[8..]
        .chunks_exact(36)
        .map(|e| {
            let mut h = [0u8; 32];
            h.copy_from_slice(&e[..32]);
            (h, u32::from_le_bytes([e[32], e[33], e[34], e[35]]))
        })
        .collect())
}

/// A part object: its length, chunk count and chunk list blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartObject {
    pub len: u64,
    pub nchunks: u64,
    pub lists: Vec<[u8; 32]>,
}

pub fn encode_part(p: &PartObject) -> Vec<u8> {
    let mut v = Vec::with_capacity(24 + p.lists.len() * 32);
    v.extend_from_slice(PART_MAGIC);
    v.extend_from_slice(&p.len.to_le_bytes());
    v.extend_from_slice(&p.nchunks.to_le_bytes());
    v.extend_from_slice(&(p.lists.len() as u32).to_le_bytes());
    for h in &p.lists {
        v.extend_from_slice(h);
    }
    v
}

pub fn decode_part(b: &[u8]) -> Result<PartObject, String> {
    if b.len() < 24 || &b[..4] != PART_MAGIC {
        return Err("not a part object (bad magic)".into());
    }
    let u64_at = |o: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(x)
    };
    let n = u32::from_le_bytes([b[20], b[21], b[22], b[23]]) as usize;
    if b.len() != 24 + n * 32 {
        return Err(format!(
            "a part of {n} lists must be {} bytes, not {}",
            24 + n * 32,
            b.len()
        ));
    }
    let lists = b[24..]
        .chunks_exact(32)
        .map(|c| {
            let mut h = [0u8; 32];
            h.copy_from_slice(c);
            h
        })
        .collect();
    Ok(PartObject {
        len: u64_at(4),
        nchunks: u64_at(12),
        lists,
    })
}

/// A recording on a remote: written last, after every object it needs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// Layout version (1).
    pub version: u32,
    pub recording: Recording,
    pub label: String,
    pub tags: BTreeMap<String, String>,
    /// Where the pushing store imported it from.
    pub source: String,
    /// When the pushing store imported it (Unix seconds).
    pub imported_at: i64,
}

pub const MANIFEST_VERSION: u32 = 1;

pub fn encode_manifest(m: &Manifest) -> Result<Vec<u8>, String> {
    rmp_serde::to_vec_named(m).map_err(|e| e.to_string())
}

/// Decode a manifest and check that its recording hashes to `id`.
pub fn decode_manifest(b: &[u8], id: &RecordingId) -> Result<Manifest, String> {
    let m: Manifest = rmp_serde::from_slice(b).map_err(|e| format!("does not decode: {e}"))?;
    if m.version != MANIFEST_VERSION {
        return Err(format!(
            "layout version {} (this rrstore reads {MANIFEST_VERSION}): upgrade rrstore",
            m.version
        ));
    }
    let actual = m.recording.id();
    if actual != *id {
        return Err(format!("its recording hashes to {actual}"));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_parts_round_trip_and_blocks_realign() {
        let chunks: Vec<ChunkRef> = (0..500u32)
            .map(|i| (*blake3::hash(&i.to_le_bytes()).as_bytes(), i))
            .collect();
        let blocks = cut_blocks(&chunks);
        assert_eq!(blocks.iter().map(|b| b.len()).sum::<usize>(), 500);
        assert!(blocks.iter().all(|b| b.len() <= LIST_MAX));
        for b in &blocks {
            assert_eq!(decode_list(&encode_list(b)).unwrap(), b.to_vec());
        }
        // Change one chunk in the middle: all but one or two blocks stay.
        let mut other = chunks.clone();
        other[250].0 = [7u8; 32];
        let a: Vec<Vec<u8>> = blocks.iter().map(|b| encode_list(b)).collect();
        let b: Vec<Vec<u8>> = cut_blocks(&other).iter().map(|b| encode_list(b)).collect();
        let shared = b.iter().filter(|x| a.contains(x)).count();
        assert!(shared + 2 >= a.len(), "{shared} of {}", a.len());
        let p = PartObject {
            len: 9,
            nchunks: 3,
            lists: vec![[1; 32], [2; 32]],
        };
        assert_eq!(decode_part(&encode_part(&p)).unwrap(), p);
        assert!(decode_part(b"RRP1").is_err());
        let h = [0xabu8; 32];
        assert_eq!(hash_of_key(&chunk_key(&h), CHUNKS), Some(h));
    }
}
