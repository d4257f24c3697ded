//! Recording IDs: the content address of a recording.
//!
//! The ID is blake3 over the canonical *logical* manifest: the MessagePack
//! encoding (named fields, declaration order, smallest integer forms, as
//! `rmp_serde::to_vec_named` writes) of the [`Recording`] itself. The
//! recording holds the normalized descriptor, the verbatim original
//! descriptor and each part's role, length and blake3, and nothing about
//! chunking or compression, so the same recording always gets the same ID
//! whatever the archive or store settings. spec/FORMAT.md pins the encoding.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::model::Recording;

/// Domain separation so a recording ID can never equal a chunk hash.
const ID_CONTEXT: &[u8] = b"rrstore recording id v1\0";

/// 32-byte recording ID, shown as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RecordingId(pub [u8; 32]);

impl RecordingId {
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// The first 12 hex digits, as `ls` shows them.
    pub fn short(&self) -> String {
        let mut s = self.to_hex();
        s.truncate(12);
        s
    }
}

impl fmt::Display for RecordingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for RecordingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordingId({})", self.to_hex())
    }
}

/// Error parsing a full 64-digit hex ID.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a recording ID: expected 64 hexadecimal digits")]
pub struct ParseIdError(pub String);

impl FromStr for RecordingId {
    type Err = ParseIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_hex32(s)
            .map(RecordingId)
            .ok_or_else(|| ParseIdError(s.to_string()))
    }
}

/// Lowercase hex of any byte string.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Parse exactly 64 hex digits into 32 bytes.
pub fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

/// The canonical logical manifest bytes the ID is computed over.
pub fn logical_manifest(rec: &Recording) -> Vec<u8> {
    // Serializing plain data with derived Serialize into a Vec cannot fail.
    rmp_serde::to_vec_named(rec).unwrap_or_default()
}

/// blake3(context || logical manifest).
pub fn recording_id(rec: &Recording) -> RecordingId {
    let mut h = blake3::Hasher::new();
    h.update(ID_CONTEXT);
    h.update(&logical_manifest(rec));
    RecordingId(*h.finalize().as_bytes())
}
