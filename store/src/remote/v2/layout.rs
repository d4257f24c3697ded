//! Object keys and object encodings of a remote (spec/REMOTE.md).
//!
//! Layout version 2 (version 1 objects are still read):
//!
//! ```text
//! chunks/<ab>/<chunk blake3>   store pack entry: 52-byte entry header + stored bytes
//! lists/<ab>/<node blake3>     list block "RRL1" | n u32 | n x (chunk blake3 | len u32)
//!                              or inner node "RRI2" | n u32 | n x node blake3
//! parts/<ab>/<part blake3>     "RRP2" | len u64 | chunks u64 | height u8 | n u32 | n x node
//!                              (v1: "RRP1" | len u64 | chunks u64 | n u32 | n x list block)
//! recordings/<recording ID>    "RRM2" | zstd(MessagePack manifest)   (v1: MessagePack)
//!                              (v3: "RRM3" | zstd with a fixed dictionary, `v3::manifest`)
//! images/<ab>/<image blake3>   "RRG2" | zstd(MessagePack image entry)
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

pub const IMAGES: &str = "images/";

const LIST_MAGIC: &[u8; 4] = b"RRL1";
const INNER_MAGIC: &[u8; 4] = b"RRI2";
const PART_MAGIC_V1: &[u8; 4] = b"RRP1";
const PART_MAGIC_V2: &[u8; 4] = b"RRP2";
const MANIFEST_MAGIC: &[u8; 4] = b"RRM2";
const IMAGE_MAGIC: &[u8; 4] = b"RRG2";
/// A part object names a tree at most this high.
pub const MAX_HEIGHT: u8 = 16;

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
pub fn image_key(h: &[u8; 32]) -> String {
    fanned(IMAGES, h)
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

fn count_at(b: &[u8], what: &str, magic: &[u8; 4], entry: usize) -> Result<usize, String> {
    if b.len() < 8 || &b[..4] != magic {
        return Err(format!("not {what} (bad magic)"));
    }
    let n = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
    if b.len() != 8 + n * entry {
        return Err(format!(
            "{what} of {n} entries must be {} bytes, not {}",
            8 + n * entry,
            b.len()
        ));
    }
    Ok(n)
}

fn hash_at(b: &[u8]) -> [u8; 32] {
    let mut h = [0u8; 32];
    h.copy_from_slice(&b[..32]);
    h
}

pub fn decode_list(b: &[u8]) -> Result<Vec<ChunkRef>, String> {
    count_at(b, "a chunk list", LIST_MAGIC, 36)?;
    Ok(b[8..]
        .chunks_exact(36)
        .map(|e| (hash_at(e), u32::from_le_bytes([e[32], e[33], e[34], e[35]])))
        .collect())
}

/// An inner node of a part's chunk-list tree (v2): the names of its
/// children, one level down.
pub fn encode_inner(children: &[[u8; 32]]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + children.len() * 32);
    v.extend_from_slice(INNER_MAGIC);
    v.extend_from_slice(&(children.len() as u32).to_le_bytes());
    for h in children {
        v.extend_from_slice(h);
    }
    v
}

pub fn decode_inner(b: &[u8]) -> Result<Vec<[u8; 32]>, String> {
    count_at(b, "an inner chunk-list node", INNER_MAGIC, 32)?;
    Ok(b[8..].chunks_exact(32).map(hash_at).collect())
}

/// A part object: its length, chunk count and the top of its chunk-list
/// tree. `height` 0: `top` names list blocks (v1 parts are always so, cut
/// with [`tree::V1`]); `height` h > 0: `top` names inner nodes h levels
/// above the list blocks.
///
/// [`tree::V1`]: crate::remote::tree::V1
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartObject {
    pub len: u64,
    pub nchunks: u64,
    /// Layout version it was read in (1 or 2): picks the tree scheme.
    pub version: u8,
    pub height: u8,
    pub top: Vec<[u8; 32]>,
}

/// Encode a v2 part object.
pub fn encode_part(p: &PartObject) -> Vec<u8> {
    let mut v = Vec::with_capacity(25 + p.top.len() * 32);
    v.extend_from_slice(PART_MAGIC_V2);
    v.extend_from_slice(&p.len.to_le_bytes());
    v.extend_from_slice(&p.nchunks.to_le_bytes());
    v.push(p.height);
    v.extend_from_slice(&(p.top.len() as u32).to_le_bytes());
    for h in &p.top {
        v.extend_from_slice(h);
    }
    v
}

/// Decode a v1 (`RRP1`) or v2 (`RRP2`) part object.
pub fn decode_part(b: &[u8]) -> Result<PartObject, String> {
    let (version, head) = match b.get(..4) {
        Some(m) if m == PART_MAGIC_V1 => (1u8, 24usize),
        Some(m) if m == PART_MAGIC_V2 => (2u8, 25usize),
        _ => return Err("not a part object (bad magic)".into()),
    };
    if b.len() < head {
        return Err(format!("{} bytes is shorter than a part header", b.len()));
    }
    let u64_at = |o: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(x)
    };
    let height = if version == 2 { b[20] } else { 0 };
    let n = u32::from_le_bytes([b[head - 4], b[head - 3], b[head - 2], b[head - 1]]) as usize;
    if b.len() != head + n * 32 {
        return Err(format!(
            "a part naming {n} nodes must be {} bytes, not {}",
            head + n * 32,
            b.len()
        ));
    }
    if height > MAX_HEIGHT {
        return Err(format!("tree height {height} is over {MAX_HEIGHT}"));
    }
    Ok(PartObject {
        len: u64_at(4),
        nchunks: u64_at(12),
        version,
        height,
        top: b[head..].chunks_exact(32).map(hash_at).collect(),
    })
}

/// A recording on a remote: written last, after every object it needs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// Layout version it was written in (1 or 2).
    pub version: u32,
    pub recording: Recording,
    pub label: String,
    pub tags: BTreeMap<String, String>,
    /// Where the pushing store imported it from.
    pub source: String,
    /// When the pushing store imported it (Unix seconds).
    pub imported_at: i64,
}

/// The highest layout version this rrstore reads (and writes to a
/// version 3 remote); it reads 1 to 3.
pub const MANIFEST_VERSION: u32 = 3;
/// The manifest version written to a version 2 remote.
pub const MANIFEST_V2: u32 = 2;

/// A manifest (or image entry) body is at most this large decompressed.
const MAX_META: usize = 16 << 20;

/// A manifest of `version` 3: `"RRM3"` | zstd frame with the manifest
/// dictionary ([`crate::remote::v3::manifest`]); of an earlier version (written to a
/// version 2 remote, which older rrstore reads): `"RRM2"` | zstd frame.
pub fn encode_manifest(m: &Manifest) -> Result<Vec<u8>, String> {
    let raw = rmp_serde::to_vec_named(m).map_err(|e| e.to_string())?;
    if m.version >= 3 {
        crate::remote::v3::manifest::pack(&raw)
    } else {
        packed(MANIFEST_MAGIC, &raw)
    }
}

fn packed(magic: &[u8; 4], raw: &[u8]) -> Result<Vec<u8>, String> {
    let mut v = magic.to_vec();
    v.extend_from_slice(&zstd::bulk::compress(raw, 19).map_err(|e| e.to_string())?);
    Ok(v)
}

fn unpacked<'a>(b: &'a [u8], magic: &[u8; 4]) -> Result<std::borrow::Cow<'a, [u8]>, String> {
    match b.strip_prefix(&magic[..]) {
        Some(z) => zstd::bulk::decompress(z, MAX_META)
            .map(Into::into)
            .map_err(|e| format!("does not decompress: {e}")),
        None => Ok(b.into()),
    }
}

/// Decode a manifest (v3: `RRM3` + zstd with the dictionary; v2: `RRM2` +
/// zstd; v1: plain MessagePack) and check that its recording hashes to
/// `id`.
pub fn decode_manifest(b: &[u8], id: &RecordingId) -> Result<Manifest, String> {
    let raw = match b.strip_prefix(&crate::remote::v3::manifest::MAGIC[..]) {
        Some(z) => crate::remote::v3::manifest::unpack(z, MAX_META)?.into(),
        None => unpacked(b, MANIFEST_MAGIC)?,
    };
    let m: Manifest = rmp_serde::from_slice(&raw).map_err(|e| format!("does not decode: {e}"))?;
    if m.version == 0 || m.version > MANIFEST_VERSION {
        return Err(format!(
            "layout version {} (this rrstore reads 1 to {MANIFEST_VERSION}): upgrade rrstore",
            m.version
        ));
    }
    let actual = m.recording.id();
    if actual != *id {
        return Err(format!("its recording hashes to {actual}"));
    }
    Ok(m)
}

/// An image of the store's image library on a remote (`images/<ab>/<image
/// blake3>`), written after the image's part object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageEntry {
    pub version: u32,
    /// blake3 of the image bytes (hex) = the object's name.
    pub hash: String,
    pub len: u64,
    pub target: String,
    pub label: String,
    pub source: String,
    pub added_at: i64,
}

/// `"RRG2"` | zstd frame of the MessagePack image entry.
pub fn encode_image(e: &ImageEntry) -> Result<Vec<u8>, String> {
    packed(
        IMAGE_MAGIC,
        &rmp_serde::to_vec_named(e).map_err(|e| e.to_string())?,
    )
}

/// Decode an image entry and check it names image `hash`.
pub fn decode_image(b: &[u8], hash: &[u8; 32]) -> Result<ImageEntry, String> {
    if !b.starts_with(IMAGE_MAGIC) {
        return Err("not an image entry (bad magic)".into());
    }
    let raw = unpacked(b, IMAGE_MAGIC)?;
    let e: ImageEntry = rmp_serde::from_slice(&raw).map_err(|e| format!("does not decode: {e}"))?;
    if e.version == 0 || e.version > MANIFEST_VERSION {
        return Err(format!(
            "layout version {} (this rrstore reads 1 to {MANIFEST_VERSION}): upgrade rrstore",
            e.version
        ));
    }
    if e.hash != hex(hash) {
        return Err(format!("it describes image {}", e.hash));
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_round_trip() {
        let block: Vec<ChunkRef> = (0..5u32)
            .map(|i| (*blake3::hash(&i.to_le_bytes()).as_bytes(), i))
            .collect();
        assert_eq!(decode_list(&encode_list(&block)).unwrap(), block);
        assert!(decode_list(&encode_list(&block)[..20]).is_err());
        let names = vec![[1u8; 32], [2; 32]];
        assert_eq!(decode_inner(&encode_inner(&names)).unwrap(), names);
        assert!(decode_inner(&encode_list(&block)).is_err());
        let p = PartObject {
            len: 9,
            nchunks: 3,
            version: 2,
            height: 1,
            top: names.clone(),
        };
        assert_eq!(decode_part(&encode_part(&p)).unwrap(), p);
        assert!(decode_part(b"RRP2").is_err());
        // A v1 part object still decodes (height 0).
        let mut v1 = b"RRP1".to_vec();
        v1.extend_from_slice(&9u64.to_le_bytes());
        v1.extend_from_slice(&3u64.to_le_bytes());
        v1.extend_from_slice(&1u32.to_le_bytes());
        v1.extend_from_slice(&[7u8; 32]);
        let d = decode_part(&v1).unwrap();
        assert_eq!((d.version, d.height, d.top), (1, 0, vec![[7u8; 32]]));
        let h = [0xabu8; 32];
        assert_eq!(hash_of_key(&chunk_key(&h), CHUNKS), Some(h));
        let e = ImageEntry {
            version: MANIFEST_VERSION,
            hash: hex(&h),
            len: 4,
            target: "x86_64".into(),
            label: "l".into(),
            source: "/s".into(),
            added_at: 1,
        };
        let b = encode_image(&e).unwrap();
        assert_eq!(decode_image(&b, &h).unwrap(), e);
        assert!(decode_image(&b, &[0u8; 32]).is_err());
    }
}
