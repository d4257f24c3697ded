//! The local store side of transfers: chunk and part lookups, reading
//! stored chunk entries, and committing pulled chunks and recordings into
//! the index with the same invariants as `import` (spec/STORE.md).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use rrstore_format::chunk::{ChunkHash, Codec};
use rrstore_format::{Recording, RecordingId};
use rusqlite::{OptionalExtension, TransactionBehavior};

use super::layout::{self, ChunkRef};
use crate::error::{Result, StoreError};
use crate::index::{hash32, i, u};
use crate::pack::reader::ChunkLoc;
use crate::pack::{EntryHeader, ENTRY_HEADER_LEN};
use crate::Store;

impl Store {
    pub(crate) fn xfer_has_chunk(&self, h: &ChunkHash) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT 1 FROM chunks WHERE hash = ?1")
            .and_then(|mut s| s.exists([&h[..]]))
            .map_err(self.ierr("looking up a chunk"))
    }

    pub(crate) fn xfer_has_part(&self, h: &[u8; 32]) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT 1 FROM parts WHERE hash = ?1")
            .and_then(|mut s| s.exists([&h[..]]))
            .map_err(self.ierr("looking up a part"))
    }

    /// Where a chunk is stored now.
    pub(crate) fn xfer_chunk_loc(&self, h: &ChunkHash) -> Result<Option<ChunkLoc>> {
        let row: Option<(String, i64, i64, i64, i64)> = self
            .conn
            .prepare_cached(
                "SELECT p.name, c.offset, c.stored_len, c.len, c.codec FROM chunks c \
                 JOIN packs p ON p.id = c.pack WHERE c.hash = ?1",
            )
            .and_then(|mut s| {
                s.query_row([&h[..]], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .optional()
            })
            .map_err(self.ierr("locating a chunk"))?;
        Ok(row.map(|(pack, offset, stored_len, len, codec)| ChunkLoc {
            hash: *h,
            pack,
            offset: u(offset),
            stored_len: stored_len as u32,
            len: len as u32,
            codec: Codec::from_u8(codec as u8).unwrap_or(Codec::Raw),
        }))
    }

    /// Chunk locations of a stored part, in order.
    pub(crate) fn xfer_part_locs(&self, part: &[u8; 32]) -> Result<Vec<ChunkLoc>> {
        crate::export::part_locations(&self.conn, &self.dir, part)
    }

    /// Label, tags, source and import time of a stored recording.
    pub(crate) fn xfer_recording_meta(
        &self,
        id: &RecordingId,
    ) -> Result<(
        String,
        std::collections::BTreeMap<String, String>,
        String,
        i64,
    )> {
        let rows = self.list(&crate::LsFilter {
            ids: vec![*id],
            ..Default::default()
        })?;
        let r = rows
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::NotFound(id.to_hex()))?;
        Ok((r.label, r.tags, r.source, r.imported_at))
    }

    /// Read a chunk's stored entry (header + stored bytes) and check it:
    /// the header against the index, the bytes against the chunk's blake3.
    pub(crate) fn xfer_read_entry(
        &self,
        files: &mut HashMap<String, File>,
        h: &ChunkHash,
    ) -> Result<Vec<u8>> {
        // gc may move a chunk between the lookup and the read: look it up
        // again once when its pack is gone.
        for attempt in 0..2 {
            let loc = self.xfer_chunk_loc(h)?.ok_or_else(|| {
                StoreError::Invalid(format!(
                    "chunk {} is not in the store (was it removed by gc while pushing?)",
                    rrstore_format::id::hex(h)
                ))
            })?;
            let path = crate::layout::pack_path(&self.dir, &loc.pack);
            if !files.contains_key(&loc.pack) {
                match File::open(&path) {
                    Ok(f) => {
                        files.insert(loc.pack.clone(), f);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt == 0 => continue,
                    Err(e) => return Err(StoreError::io(&path, e)),
                }
            }
            let Some(f) = files.get(&loc.pack) else {
                continue;
            };
            let corrupt = |reason: String| StoreError::CorruptPack {
                path: path.clone(),
                offset: loc.offset,
                reason,
            };
            let mut buf = vec![0u8; ENTRY_HEADER_LEN + loc.stored_len as usize];
            f.read_exact_at(&mut buf, loc.offset)
                .map_err(|e| corrupt(format!("reading the chunk entry: {e}")))?;
            check_entry(&buf, h).map_err(corrupt)?;
            return Ok(buf);
        }
        Err(StoreError::Busy(format!(
            "chunk {} kept moving (gc): push again",
            rrstore_format::id::hex(h)
        )))
    }

    /// Call `f` with every local part's chunk list (one scan of the index).
    pub(crate) fn xfer_each_part(&self, f: &mut dyn FnMut([u8; 32], &[ChunkRef])) -> Result<()> {
        let ierr = self.ierr("reading part chunk lists");
        let mut stmt = self
            .conn
            .prepare(
                "SELECT pc.part, pc.chunk, c.len FROM part_chunks pc \
                 JOIN chunks c ON c.hash = pc.chunk ORDER BY pc.part, pc.seq",
            )
            .map_err(&ierr)?;
        let mut rows = stmt.query([]).map_err(&ierr)?;
        let mut cur: Option<[u8; 32]> = None;
        let mut refs: Vec<ChunkRef> = Vec::new();
        while let Some(r) = rows.next().map_err(&ierr)? {
            let part = hash32(r.get(0).map_err(&ierr)?);
            let chunk = hash32(r.get(1).map_err(&ierr)?);
            let len: i64 = r.get(2).map_err(&ierr)?;
            if cur != Some(part) {
                if let Some(p) = cur {
                    f(p, &refs);
                }
                refs.clear();
                cur = Some(part);
            }
            refs.push((chunk, len as u32));
        }
        if let Some(p) = cur {
            f(p, &refs);
        }
        Ok(())
    }

    /// A local part's chunk list, in order.
    pub(crate) fn xfer_part_refs(&self, part: &[u8; 32]) -> Result<Vec<ChunkRef>> {
        let ierr = self.ierr("reading a part's chunk list");
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT pc.chunk, c.len FROM part_chunks pc \
                 JOIN chunks c ON c.hash = pc.chunk WHERE pc.part = ?1 ORDER BY pc.seq",
            )
            .map_err(&ierr)?;
        let rows = stmt
            .query_map([&part[..]], |r| {
                Ok((hash32(r.get(0)?), r.get::<_, i64>(1)? as u32))
            })
            .map_err(&ierr)?;
        rows.collect::<rusqlite::Result<_>>().map_err(&ierr)
    }
}

/// Check a stored entry (header + stored bytes) holds chunk `h`: header
/// checksum, lengths, hash, and the decoded bytes' blake3.
pub(crate) fn check_entry(buf: &[u8], h: &ChunkHash) -> std::result::Result<EntryHeader, String> {
    if buf.len() < ENTRY_HEADER_LEN {
        return Err(format!(
            "{} bytes is shorter than a chunk entry header",
            buf.len()
        ));
    }
    let mut hb = [0u8; ENTRY_HEADER_LEN];
    hb.copy_from_slice(&buf[..ENTRY_HEADER_LEN]);
    let header = EntryHeader::decode(&hb)?;
    if header.hash != *h {
        return Err(format!(
            "the entry holds chunk {}, not {}",
            rrstore_format::id::hex(&header.hash),
            rrstore_format::id::hex(h)
        ));
    }
    let stored = &buf[ENTRY_HEADER_LEN..];
    if stored.len() != header.stored_len as usize {
        return Err(format!(
            "the entry has {} stored bytes, its header says {}",
            stored.len(),
            header.stored_len
        ));
    }
    rrstore_format::chunk::decode(header.codec, stored, header.len as usize, h)
        .map_err(|e| e.to_string())?;
    Ok(header)
}

/// A chunk appended to a local pack by a pull, not yet in the index.
pub(crate) struct PulledChunk {
    pub header: EntryHeader,
    pub pack: String,
    pub pack_size: u64,
    pub offset: u64,
}

/// A part a pull adds: its hash, length and chunk list.
pub(crate) struct PulledPart {
    pub hash: [u8; 32],
    pub len: u64,
    pub chunks: Vec<ChunkHash>,
    /// The chunk list with lengths (to cut the part's tree once stored).
    pub refs: Vec<ChunkRef>,
}

impl Store {
    /// Index chunks a pull appended (and synced). Unreferenced chunk rows are
    /// allowed: gc may drop them, which `commit_pulled` detects.
    pub(crate) fn xfer_commit_chunks(&mut self, chunks: &[PulledChunk]) -> Result<()> {
        if chunks.is_empty() {
            return Ok(());
        }
        let ierr = self.ierr("adding pulled chunks");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&ierr)?;
        {
            let mut pack_ins = tx
                .prepare_cached(
                    "INSERT INTO packs (name, size) VALUES (?1, ?2) \
                     ON CONFLICT (name) DO UPDATE SET size = max(size, excluded.size)",
                )
                .map_err(&ierr)?;
            let mut pack_id = tx
                .prepare_cached("SELECT id FROM packs WHERE name = ?1")
                .map_err(&ierr)?;
            let mut chunk_ins = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO chunks (hash, pack, offset, stored_len, len, codec) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(&ierr)?;
            let mut ids: HashMap<&str, i64> = HashMap::new();
            let mut sizes: HashMap<&str, u64> = HashMap::new();
            for c in chunks {
                let s = sizes.entry(&c.pack).or_insert(0);
                *s = (*s).max(c.pack_size);
            }
            for (name, size) in &sizes {
                pack_ins
                    .execute(rusqlite::params![name, i(*size)])
                    .map_err(&ierr)?;
                let pid: i64 = pack_id.query_row([name], |r| r.get(0)).map_err(&ierr)?;
                ids.insert(name, pid);
            }
            for c in chunks {
                let pid = ids.get(c.pack.as_str()).copied().unwrap_or(-1);
                chunk_ins
                    .execute(rusqlite::params![
                        &c.header.hash[..],
                        pid,
                        i(c.offset),
                        c.header.stored_len,
                        c.header.len,
                        c.header.codec as u8
                    ])
                    .map_err(&ierr)?;
            }
        }
        tx.commit().map_err(&ierr)
    }

    /// Add a pulled recording in one transaction: every chunk of its new
    /// parts and every part it reuses must still be indexed (else `Ok(None)`:
    /// gc removed something, pull it again). `Ok(Some(false))`: another
    /// process added it first.
    pub(crate) fn xfer_commit_pulled(
        &mut self,
        rec: &Recording,
        new_parts: &[PulledPart],
        label: &str,
        source: &str,
        tags: &std::collections::BTreeMap<String, String>,
    ) -> Result<Option<bool>> {
        let id = rec.id();
        let ierr = self.ierr("adding a pulled recording");
        let manifest = rmp_serde::to_vec_named(rec)
            .map_err(|e| StoreError::Invalid(format!("cannot encode the manifest: {e}")))?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&ierr)?;
        {
            if tx
                .prepare_cached("SELECT 1 FROM recordings WHERE id = ?1")
                .and_then(|mut s| s.exists([&id.0[..]]))
                .map_err(&ierr)?
            {
                return Ok(Some(false));
            }
            if !insert_parts(&tx, new_parts).map_err(&ierr)? {
                return Ok(None);
            }
            let mut part_q = tx
                .prepare_cached("SELECT 1 FROM parts WHERE hash = ?1")
                .map_err(&ierr)?;
            for p in &rec.parts {
                if new_parts.iter().any(|n| n.hash == p.blake3) {
                    continue;
                }
                if !part_q.exists([&p.blake3[..]]).map_err(&ierr)? {
                    return Ok(None);
                }
            }
            crate::import::insert_recording(&tx, &id, rec, &manifest, source, label)
                .map_err(&ierr)?;
            let mut tag_ins = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO tags (recording, key, value) VALUES (?1, ?2, ?3)",
                )
                .map_err(&ierr)?;
            for (k, v) in tags {
                tag_ins
                    .execute(rusqlite::params![&id.0[..], k, v])
                    .map_err(&ierr)?;
            }
        }
        tx.commit().map_err(&ierr)?;
        crate::recovery::write_recording(&self.conn, self.dir(), &id)?;
        Ok(Some(true))
    }
}

/// Check every chunk of `new_parts` is indexed (`false`: gc removed one)
/// and insert the parts and their chunk lists.
fn insert_parts(tx: &rusqlite::Transaction, new_parts: &[PulledPart]) -> rusqlite::Result<bool> {
    let mut chunk_q = tx.prepare_cached("SELECT 1 FROM chunks WHERE hash = ?1")?;
    for p in new_parts {
        for c in &p.chunks {
            if !chunk_q.exists([&c[..]])? {
                return Ok(false);
            }
        }
    }
    let mut part_ins =
        tx.prepare_cached("INSERT OR IGNORE INTO parts (hash, len, nchunks) VALUES (?1, ?2, ?3)")?;
    let mut pc_ins = tx.prepare_cached(
        "INSERT OR IGNORE INTO part_chunks (part, seq, chunk) VALUES (?1, ?2, ?3)",
    )?;
    for p in new_parts {
        part_ins.execute(rusqlite::params![
            &p.hash[..],
            i(p.len),
            p.chunks.len() as i64
        ])?;
        for (seq, c) in p.chunks.iter().enumerate() {
            pc_ins.execute(rusqlite::params![&p.hash[..], seq as i64, &c[..]])?;
        }
    }
    Ok(true)
}

impl Store {
    /// Whether the image library holds image `hash`.
    pub(crate) fn xfer_has_image(&self, hash: &[u8; 32]) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT 1 FROM images WHERE hash = ?1")
            .and_then(|mut s| s.exists([&hash[..]]))
            .map_err(self.ierr("looking up an image"))
    }

    /// Add a pulled image to the image library in one transaction: its part
    /// (new, or already stored: else `Ok(None)`, gc raced) and its row
    /// (`Ok(Some(false))`: already there).
    pub(crate) fn xfer_commit_image(
        &mut self,
        e: &layout::ImageEntry,
        hash: &[u8; 32],
        new_parts: &[PulledPart],
        source: &str,
    ) -> Result<Option<bool>> {
        let ierr = self.ierr("adding a pulled image");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&ierr)?;
        if tx
            .prepare_cached("SELECT 1 FROM images WHERE hash = ?1")
            .and_then(|mut s| s.exists([&hash[..]]))
            .map_err(&ierr)?
        {
            return Ok(Some(false));
        }
        if !insert_parts(&tx, new_parts).map_err(&ierr)? {
            return Ok(None);
        }
        if !tx
            .prepare_cached("SELECT 1 FROM parts WHERE hash = ?1")
            .and_then(|mut s| s.exists([&hash[..]]))
            .map_err(&ierr)?
        {
            return Ok(None);
        }
        tx.execute(
            "INSERT INTO images (hash, hash_hex, len, target, label, source, added_at) \
             VALUES (?1, ?2, (SELECT len FROM parts WHERE hash = ?1), ?3, ?4, ?5, ?6)",
            rusqlite::params![&hash[..], e.hash, e.target, e.label, source, e.added_at],
        )
        .map_err(&ierr)?;
        tx.commit().map_err(&ierr)?;
        Ok(Some(true))
    }
}
