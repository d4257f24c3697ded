//! Pack files: append-only files of self-describing chunk entries.
//!
//! ```text
//! pack   = header entry*
//! header = "RRSPACK\0" (8) | version u32 LE = 1 | reserved u32 = 0 | pack id (16)
//! entry  = "RRCH" (4) | codec u8 | 0u8 | 0u16 | len u32 LE | stored_len u32 LE
//!          | blake3 of uncompressed bytes (32) | check u32 LE | stored bytes
//! check  = first 4 bytes (LE) of blake3 of the 48 entry-header bytes before it
//! ```
//!
//! A pack can be re-indexed by walking its entries without the SQLite index.

pub mod reader;
pub mod writer;

use rrstore_format::chunk::{ChunkHash, Codec};

pub const PACK_MAGIC: &[u8; 8] = b"RRSPACK\0";
pub const PACK_VERSION: u32 = 1;
pub const PACK_HEADER_LEN: u64 = 32;
pub const ENTRY_MAGIC: &[u8; 4] = b"RRCH";
pub const ENTRY_HEADER_LEN: usize = 52;
/// A writer starts a new pack once its current one reaches this size.
pub const PACK_TARGET_SIZE: u64 = 128 << 20;

/// Decoded entry header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    pub codec: Codec,
    pub len: u32,
    pub stored_len: u32,
    pub hash: ChunkHash,
}

impl EntryHeader {
    pub fn encode(&self) -> [u8; ENTRY_HEADER_LEN] {
        let mut h = [0u8; ENTRY_HEADER_LEN];
        h[..4].copy_from_slice(ENTRY_MAGIC);
        h[4] = self.codec as u8;
        h[8..12].copy_from_slice(&self.len.to_le_bytes());
        h[12..16].copy_from_slice(&self.stored_len.to_le_bytes());
        h[16..48].copy_from_slice(&self.hash);
        let check = header_check(&h[..48]);
        h[48..52].copy_from_slice(&check.to_le_bytes());
        h
    }

    /// Parse and check an entry header; the error says what is wrong.
    pub fn decode(h: &[u8; ENTRY_HEADER_LEN]) -> Result<EntryHeader, String> {
        if &h[..4] != ENTRY_MAGIC {
            return Err("no chunk entry starts here (bad entry magic)".into());
        }
        let check = u32::from_le_bytes([h[48], h[49], h[50], h[51]]);
        if check != header_check(&h[..48]) {
            return Err("the chunk entry header fails its checksum".into());
        }
        let codec = Codec::from_u8(h[4]).ok_or_else(|| format!("unknown codec {}", h[4]))?;
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&h[16..48]);
        Ok(EntryHeader {
            codec,
            len: u32::from_le_bytes([h[8], h[9], h[10], h[11]]),
            stored_len: u32::from_le_bytes([h[12], h[13], h[14], h[15]]),
            hash,
        })
    }
}

fn header_check(bytes: &[u8]) -> u32 {
    let h = blake3::hash(bytes);
    let b = h.as_bytes();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Encode a pack file header.
pub fn pack_header(id: &[u8; 16]) -> [u8; PACK_HEADER_LEN as usize] {
    let mut h = [0u8; PACK_HEADER_LEN as usize];
    h[..8].copy_from_slice(PACK_MAGIC);
    h[8..12].copy_from_slice(&PACK_VERSION.to_le_bytes());
    h[16..32].copy_from_slice(id);
    h
}

/// Check a pack file's 32-byte header (magic, version, reserved bytes, and
/// the pack ID, which is the file name); the error says what is wrong.
pub fn check_header(head: &[u8], name: &str) -> Result<(), String> {
    if head.len() < PACK_HEADER_LEN as usize {
        return Err("the file is shorter than a pack header".into());
    }
    if &head[..8] != PACK_MAGIC {
        return Err("its header has a bad magic (not a pack file, or damaged)".into());
    }
    let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if version != PACK_VERSION {
        return Err(format!(
            "its header has version {version} (expected {PACK_VERSION}): damaged, or written by a newer rrstore"
        ));
    }
    if head[12..16] != [0u8; 4] {
        return Err("its header's reserved bytes 12..16 are not zero (damaged)".into());
    }
    if rrstore_format::id::hex(&head[16..32]) != name {
        return Err(
            "its header's pack ID (bytes 16..32) differs from its file name (damaged)".into(),
        );
    }
    Ok(())
}
