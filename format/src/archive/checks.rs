//! The checks [`super::reader::Reader::open`] makes of an archive's index
//! before it serves anything: every chunk-table row against the file, and
//! every part's chunk list against the table and the recording.

use std::sync::Arc;

use super::layout::{ChunkEntry, Index, HEADER_LEN};
use super::reader::{ChunkInfo, PartChunks};
use crate::chunk::Codec;
use crate::model::Recording;

/// Check every chunk table row against the file: offsets inside the payload
/// region, lengths within the chunking limits, a known codec.
pub(super) fn validate_chunks(
    rows: &[ChunkEntry],
    max_len: u32,
    payload_end: u64,
) -> Result<Vec<ChunkInfo>, (usize, String)> {
    let mut out = Vec::with_capacity(rows.len());
    for (i, e) in rows.iter().enumerate() {
        let ChunkEntry(hash, offset, stored_len, len, codec) = *e;
        let codec = Codec::from_u8(codec).ok_or((i, format!("unknown codec {codec}")))?;
        if len == 0 || len > max_len {
            return Err((i, format!("length {len} is outside 1..={max_len}")));
        }
        if stored_len > len || (codec == Codec::Raw && stored_len != len) {
            return Err((
                i,
                format!(
                    "stored length {stored_len} does not fit uncompressed length {len} ({codec:?})"
                ),
            ));
        }
        let end = offset.checked_add(u64::from(stored_len));
        if offset < HEADER_LEN || end.is_none_or(|e| e > payload_end) {
            return Err((
                i,
                format!("stored bytes at {offset}+{stored_len} lie outside the chunk region {HEADER_LEN}..{payload_end}"),
            ));
        }
        out.push(ChunkInfo {
            hash: hash.0,
            offset,
            stored_len,
            len,
            codec,
        });
    }
    Ok(out)
}

/// Check the index's parts against the recording: same roles in the same
/// order, chunk rows that exist, chunk lengths adding up to each part's.
pub(super) fn validate_parts(
    rec: &Recording,
    index: &Index,
    chunks: &[ChunkInfo],
) -> Result<Vec<PartChunks>, String> {
    if index.parts.len() != rec.parts.len() {
        return Err(format!(
            "the index lists {} parts, the recording {}",
            index.parts.len(),
            rec.parts.len()
        ));
    }
    let mut out = Vec::with_capacity(rec.parts.len());
    for (p, info) in index.parts.iter().zip(&rec.parts) {
        if p.role != info.role || p.len != info.len {
            return Err(format!(
                "index part {} ({} bytes) does not match the recording's {} part ({} bytes)",
                p.role, p.len, info.role, info.len
            ));
        }
        let mut total = 0u64;
        for &c in &p.chunks {
            let ci = chunks.get(c as usize).ok_or_else(|| {
                format!(
                    "the {} part refers to chunk row {c}, but the table has {} rows",
                    p.role,
                    chunks.len()
                )
            })?;
            total = total.saturating_add(u64::from(ci.len));
        }
        if total != p.len {
            return Err(format!(
                "the {} part's chunks add up to {total} bytes, not its length {}",
                p.role, p.len
            ));
        }
        out.push((info.clone(), Arc::from(&p.chunks[..])));
    }
    Ok(out)
}
