//! A part's chunk locations from the index (`part_chunks` joined with
//! `chunks` and `packs`), checked to be complete: the start of every read of
//! stored bytes.

use std::path::Path;

use rrstore_format::chunk::Codec;
use rusqlite::Connection;

use crate::error::{Result, StoreError};
use crate::index::{hash32, u};
use crate::pack::reader::ChunkLoc;

/// Chunk locations of a part by its hash, in order.
pub(crate) fn part_locations(
    conn: &Connection,
    dir: &Path,
    part: &[u8; 32],
) -> Result<Vec<ChunkLoc>> {
    let ierr = |source| StoreError::Index {
        path: dir.join(crate::layout::INDEX_FILE),
        context: "reading a part's chunk list".into(),
        source,
    };
    let nchunks: Option<i64> = {
        use rusqlite::OptionalExtension;
        conn.prepare_cached("SELECT nchunks FROM parts WHERE hash = ?1")
            .and_then(|mut s| s.query_row([&part[..]], |r| r.get(0)).optional())
            .map_err(ierr)?
    };
    let nchunks = nchunks.ok_or_else(|| StoreError::PartRows {
        part: rrstore_format::id::hex(part),
        reason: "it is not in the index".into(),
    })?;
    let mut stmt = conn
        .prepare_cached(
            "SELECT pc.chunk, c.hash, p.name, c.offset, c.stored_len, c.len, c.codec \
             FROM part_chunks pc LEFT JOIN chunks c ON c.hash = pc.chunk \
             LEFT JOIN packs p ON p.id = c.pack WHERE pc.part = ?1 ORDER BY pc.seq",
        )
        .map_err(ierr)?;
    let rows = stmt
        .query_map([&part[..]], |r| {
            Ok((
                hash32(r.get(0)?),
                r.get::<_, Option<Vec<u8>>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, Option<i64>>(6)?,
            ))
        })
        .map_err(ierr)?;
    let mut out = Vec::with_capacity(nchunks.max(0) as usize);
    for row in rows {
        let (hash, found, pack, offset, stored_len, len, codec) = row.map_err(ierr)?;
        let missing = || StoreError::PartRows {
            part: rrstore_format::id::hex(part),
            reason: format!(
                "chunk {} is missing from the index",
                rrstore_format::id::hex(&hash)
            ),
        };
        if found.is_none() {
            return Err(missing());
        }
        let (Some(pack), Some(offset), Some(stored_len), Some(len), Some(codec)) =
            (pack, offset, stored_len, len, codec)
        else {
            return Err(StoreError::PartRows {
                part: rrstore_format::id::hex(part),
                reason: format!(
                    "chunk {} points to a pack that is not in the index",
                    rrstore_format::id::hex(&hash)
                ),
            });
        };
        let codec = Codec::from_u8(codec as u8).ok_or_else(|| StoreError::PartRows {
            part: rrstore_format::id::hex(part),
            reason: format!(
                "chunk {} has unknown codec {codec}",
                rrstore_format::id::hex(&hash)
            ),
        })?;
        out.push(ChunkLoc {
            hash,
            pack,
            offset: u(offset),
            stored_len: stored_len as u32,
            len: len as u32,
            codec,
        });
    }
    if out.len() as i64 != nchunks {
        return Err(StoreError::PartRows {
            part: rrstore_format::id::hex(part),
            reason: format!("the index lists {} chunks, expected {nchunks}", out.len()),
        });
    }
    Ok(out)
}
