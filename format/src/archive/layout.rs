//! The on-disk structures of a `.rra` archive, version 1: the fixed-size
//! header and trailer (little-endian binary) and the MessagePack manifest and
//! index. spec/FORMAT.md describes the same bytes for independent readers;
//! keep the two in step.
//!
//! ```text
//! offset 0                 header (16 bytes): magic, major, minor
//! offset 16                chunk payloads, back to back (zstd frames or raw)
//! manifest_offset          manifest (MessagePack map)
//! index_offset             index (MessagePack map)
//! file_len - 104           trailer (104 bytes): offsets, lengths, blake3s, end magic
//! ```

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

use crate::chunk::ChunkHash;
use crate::model::{PartRole, Recording};

/// First 8 bytes of every archive: a non-ASCII byte, "RRA", CR LF, ^Z, LF
/// (catches text-mode transfers, like PNG's signature).
pub const MAGIC: [u8; 8] = *b"\x89RRA\r\n\x1a\n";
/// Last 8 bytes of every complete archive.
pub const END_MAGIC: [u8; 8] = *b"RRA-END\n";
/// Major format version this code writes and reads.
pub const MAJOR: u32 = 1;
/// Minor format version this code writes (readers accept any minor).
pub const MINOR: u32 = 0;
/// Minor version of an archive whose recording has an `environment`
/// (spec/FORMAT.md, version 1.1); the others keep [`MINOR`], so their
/// bytes are unchanged.
pub const MINOR_ENVIRONMENT: u32 = 1;
pub const HEADER_LEN: u64 = 16;
pub const TRAILER_LEN: u64 = 104;
/// Upper bound on the manifest block (descriptor, globals list): refuses
/// absurd lengths before allocating.
pub const MAX_MANIFEST_LEN: u64 = 64 << 20;
/// Upper bound on the index block (about 40 bytes per chunk: 1 GiB covers
/// ~25 million chunks, i.e. terabytes of parts at the default chunk size).
pub const MAX_INDEX_LEN: u64 = 1 << 30;
/// The chunking algorithm name recorded in the manifest.
pub const CHUNKING_ALGORITHM: &str = "fastcdc-2020";
/// The compression codec name recorded in the manifest.
pub const COMPRESSION_CODEC: &str = "zstd";

/// The 16-byte header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub major: u32,
    pub minor: u32,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut b = [0u8; HEADER_LEN as usize];
        b[..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.major.to_le_bytes());
        b[12..16].copy_from_slice(&self.minor.to_le_bytes());
        b
    }

    /// Parse the header; `None` when the magic is wrong.
    pub fn decode(b: &[u8; HEADER_LEN as usize]) -> Option<Header> {
        if b[..8] != MAGIC {
            return None;
        }
        Some(Header {
            major: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            minor: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        })
    }
}

/// The 104-byte trailer at the very end of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    pub manifest_offset: u64,
    pub manifest_len: u64,
    pub index_offset: u64,
    pub index_len: u64,
    /// blake3 of the manifest block.
    pub manifest_blake3: [u8; 32],
    /// blake3 of the index block.
    pub index_blake3: [u8; 32],
}

impl Trailer {
    pub fn encode(&self) -> [u8; TRAILER_LEN as usize] {
        let mut b = [0u8; TRAILER_LEN as usize];
        b[0..8].copy_from_slice(&self.manifest_offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.manifest_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.index_offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.index_len.to_le_bytes());
        b[32..64].copy_from_slice(&self.manifest_blake3);
        b[64..96].copy_from_slice(&self.index_blake3);
        b[96..104].copy_from_slice(&END_MAGIC);
        b
    }

    /// Parse the trailer; `None` when the end magic is wrong.
    pub fn decode(b: &[u8; TRAILER_LEN as usize]) -> Option<Trailer> {
        if b[96..104] != END_MAGIC {
            return None;
        }
        let u64_at = |i: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(v)
        };
        let mut manifest_blake3 = [0u8; 32];
        manifest_blake3.copy_from_slice(&b[32..64]);
        let mut index_blake3 = [0u8; 32];
        index_blake3.copy_from_slice(&b[64..96]);
        Some(Trailer {
            manifest_offset: u64_at(0),
            manifest_len: u64_at(8),
            index_offset: u64_at(16),
            index_len: u64_at(24),
            manifest_blake3,
            index_blake3,
        })
    }
}

/// 32 bytes stored as a MessagePack `bin 8` of length 32 (reads an array
/// of 32 integers too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bytes32(pub [u8; 32]);

impl Serialize for Bytes32 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes32 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = Bytes32;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("32 bytes")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Bytes32, E> {
                <[u8; 32]>::try_from(v)
                    .map(Bytes32)
                    .map_err(|_| E::invalid_length(v.len(), &self))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes32, A::Error> {
                let mut out = [0u8; 32];
                for (i, b) in out.iter_mut().enumerate() {
                    *b = seq
                        .next_element()?
                        .ok_or_else(|| de::Error::invalid_length(i, &self))?;
                }
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(33, &self));
                }
                Ok(Bytes32(out))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// FastCDC parameters as recorded in the manifest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ChunkingInfo {
    /// Always [`CHUNKING_ALGORITHM`] in version 1.
    pub algorithm: String,
    pub min: u32,
    pub avg: u32,
    pub max: u32,
}

/// Compression settings as recorded in the manifest (informational: every
/// chunk says itself whether it is zstd or raw).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CompressionInfo {
    /// Always [`COMPRESSION_CODEC`] in version 1.
    pub codec: String,
    pub level: i32,
}

/// The manifest block: what the archive holds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Manifest {
    /// The recording ID ([`crate::id`]); readers recompute and compare it.
    pub id: Bytes32,
    pub recording: Recording,
    pub chunking: ChunkingInfo,
    pub compression: CompressionInfo,
}

/// One row of the chunk table, a MessagePack array of 5:
/// `[blake3 (bin 32), offset, stored_len, len, codec]`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkEntry(
    /// blake3 of the uncompressed chunk.
    pub Bytes32,
    /// Absolute file offset of the stored bytes.
    pub u64,
    /// Stored (possibly compressed) length.
    pub u32,
    /// Uncompressed length.
    pub u32,
    /// 0 = raw, 1 = zstd.
    pub u8,
);

/// One part: its role, length and the chunk table rows that make it up.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PartEntry {
    pub role: PartRole,
    pub len: u64,
    /// Indices into [`Index::chunks`], in order; repeats allowed.
    pub chunks: Vec<u32>,
}

/// The index block: where every chunk is and which chunks make each part.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Index {
    /// Unique chunks, in the order their payloads appear in the file.
    pub chunks: Vec<ChunkEntry>,
    /// One entry per part of the recording, in the recording's part order.
    pub parts: Vec<PartEntry>,
}

/// Convenience: the chunk hash type used in the table.
pub fn hash_of(e: &ChunkEntry) -> ChunkHash {
    e.0 .0
}

/// Re-seal a complete archive after `edit` changed its manifest: the
/// manifest is re-encoded with the recording ID recomputed, and the trailer
/// gets fresh offsets and checksums, so a reader's *validation* (not a
/// checksum) is what judges the edited recording. For tests and fuzzing
/// (hand-made hostile archives); `None` when `archive` is not a complete
/// version 1 archive.
#[doc(hidden)]
pub fn reseal_with(archive: &[u8], edit: impl FnOnce(&mut Manifest)) -> Option<Vec<u8>> {
    reseal_both(archive, |m, _| edit(m))
}

/// The trailer, manifest and index of a complete version 1 archive,
/// decoded without checking their checksums (for tests that edit them);
/// `None` when `archive` is not one.
#[doc(hidden)]
pub fn blocks(archive: &[u8]) -> Option<(Trailer, Manifest, Index)> {
    let tail = archive.len().checked_sub(TRAILER_LEN as usize)?;
    let t = Trailer::decode(archive[tail..].try_into().ok()?)?;
    let block = |off: u64, len: u64| {
        let start = usize::try_from(off).ok()?;
        archive.get(start..start.checked_add(usize::try_from(len).ok()?)?)
    };
    let manifest = rmp_serde::from_slice(block(t.manifest_offset, t.manifest_len)?).ok()?;
    let index = rmp_serde::from_slice(block(t.index_offset, t.index_len)?).ok()?;
    Some((t, manifest, index))
}

/// [`reseal_with`] editing the index too (e.g. a part dropped or repeated
/// in both, so that only the recording's own consistency is wrong).
#[doc(hidden)]
pub fn reseal_both(
    archive: &[u8],
    edit: impl FnOnce(&mut Manifest, &mut Index),
) -> Option<Vec<u8>> {
    let (t, mut manifest, mut index) = blocks(archive)?;
    edit(&mut manifest, &mut index);
    manifest.id = Bytes32(manifest.recording.id().0);
    let manifest = rmp_serde::to_vec_named(&manifest).ok()?;
    let index = rmp_serde::to_vec_named(&index).ok()?;
    let mut out = archive[..usize::try_from(t.manifest_offset).ok()?].to_vec();
    let manifest_offset = out.len() as u64;
    out.extend_from_slice(&manifest);
    let index_offset = out.len() as u64;
    out.extend_from_slice(&index);
    let trailer = Trailer {
        manifest_offset,
        manifest_len: manifest.len() as u64,
        index_offset,
        index_len: index.len() as u64,
        manifest_blake3: *blake3::hash(&manifest).as_bytes(),
        index_blake3: *blake3::hash(&index).as_bytes(),
    };
    out.extend_from_slice(&trailer.encode());
    Some(out)
}
