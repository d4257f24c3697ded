//! The local store side of transfers: chunk and part lookups, reading
//! stored chunk entries, and committing pulled chunks and recordings into
//! the index with the same invariants as `import` (spec/STORE.md).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;

use rrstore_format::chunk::{ChunkHash, Codec};
use rrstore_format::{Recording, RecordingId};
use rusqlite::OptionalExtension;

use super::v2::layout::{self, ChunkRef};
use crate::error::{Result, StoreError};
use crate::index::recording_rows::insert_recording_rows;
use crate::index::write::{self, AsPartRow, ChunkRow, Keep, Outcome, PartRow, Recheck, Write};
use crate::index::{hash32, lookup, u};
use crate::pack::reader::ChunkLoc;
use crate::pack::{EntryHeader, ENTRY_HEADER_LEN};
use crate::Store;

impl Store {
    /// Run `f`'s lookups in one read transaction. Outside a transaction
    /// every statement takes and drops SQLite's shared locks itself (file
    /// locks on the index and its `-shm`: a jacobi pull made 2,105 `fcntl`
    /// calls for its per-chunk lookups); inside one they are taken once.
    /// `f` must only read. Inside an open transaction `f` just runs.
    pub(crate) fn xfer_reading<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&Store) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        if !self.conn.is_autocommit() {
            return f(self);
        }
        self.conn
            .execute_batch("BEGIN DEFERRED")
            .map_err(self.ierr("starting a read transaction"))
            .map_err(E::from)?;
        let r = f(self);
        // A read transaction has nothing to keep: end it either way.
        let end = self
            .conn
            .execute_batch("COMMIT")
            .map_err(self.ierr("ending a read transaction"));
        let v = r?;
        end.map_err(E::from)?;
        Ok(v)
    }

    /// Of `hashes`, those the index lacks, in order; one read transaction.
    pub(crate) fn xfer_lacking_chunks(&self, hashes: &[ChunkHash]) -> Result<Vec<bool>> {
        self.xfer_reading(|s| {
            hashes
                .iter()
                .map(|h| Ok(!s.has_chunk(h)?))
                .collect::<Result<_>>()
        })
    }

    /// The store holds no chunk at all (a new store).
    pub(crate) fn xfer_holds_no_chunk(&self) -> Result<bool> {
        self.conn
            .query_row("SELECT NOT EXISTS (SELECT 1 FROM chunks)", [], |r| r.get(0))
            .map_err(self.ierr("counting chunks"))
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
        crate::read::part_locations(&self.conn, &self.dir, part)
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
            let loc = self
                .xfer_chunk_loc(h)?
                .ok_or_else(|| StoreError::ChunkGone {
                    chunk: rrstore_format::id::hex(h),
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

impl Store {
    /// Start a pull's writes (spec/STORE.md, "Pull durability"): its
    /// commits are atomic but not synced one by one (`synchronous=NORMAL`);
    /// [`Store::xfer_pull_durable`] makes them durable together.
    pub(crate) fn xfer_pull_begin(&mut self) -> Result<()> {
        self.conn
            .pragma_update(None, "synchronous", "normal")
            .map_err(self.ierr("setting synchronous=normal for a pull"))
    }

    /// End a pull's writes: one fsync of the index's log makes every commit
    /// since [`Store::xfer_pull_begin`] durable (frames a checkpoint moved
    /// into the database file were synced by that checkpoint), then the
    /// connection is back to `synchronous=FULL`.
    pub(crate) fn xfer_pull_durable(&mut self) -> Result<()> {
        crate::recovery::sync::sync_index_log(&self.dir)?;
        self.conn
            .pragma_update(None, "synchronous", "full")
            .map_err(self.ierr("restoring synchronous=full after a pull"))
    }
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
        let mut sizes: HashMap<&str, u64> = HashMap::new();
        for c in chunks {
            let s = sizes.entry(&c.pack).or_insert(0);
            *s = (*s).max(c.pack_size);
        }
        let packs: Vec<(String, u64)> = sizes.iter().map(|(n, s)| (n.to_string(), *s)).collect();
        let rows: Vec<ChunkRow> = chunks
            .iter()
            .map(|c| ChunkRow {
                hash: c.header.hash,
                pack: c.pack.clone(),
                offset: c.offset,
                stored_len: c.header.stored_len,
                len: c.header.len,
                codec: c.header.codec,
            })
            .collect();
        let no_heal = HashSet::new();
        let w = Write {
            packs: &packs,
            chunks: &rows,
            ..pulled(&[], &[], &no_heal)
        };
        let index = self.index_path();
        write::commit(&mut self.conn, &index, &w, None).map(drop)
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
        let manifest = rmp_serde::to_vec_named(rec).map_err(|e| StoreError::Encode {
            what: format!("the manifest of recording {id}"),
            reason: e.to_string(),
        })?;
        let reused: Vec<[u8; 32]> = rec
            .parts
            .iter()
            .map(|p| p.blake3)
            .filter(|h| !new_parts.iter().any(|n| n.hash == *h))
            .collect();
        let keep = Keep {
            context: "adding a pulled recording",
            present: &|tx| lookup::has_recording(tx, &id),
            insert: &|tx| {
                insert_recording_rows(tx, &id, rec, &manifest, source, label, crate::now_unix())?;
                let mut tag_ins = tx.prepare_cached(
                    "INSERT OR REPLACE INTO tags (recording, key, value) VALUES (?1, ?2, ?3)",
                )?;
                for (k, v) in tags {
                    tag_ins.execute(rusqlite::params![&id.0[..], k, v])?;
                }
                Ok(())
            },
        };
        let outcome = self.commit_pulled_parts(&reused, new_parts, &keep)?;
        if outcome == Outcome::Committed {
            crate::recovery::write_recording(&self.conn, self.dir(), &id, &self.meta_sync)?;
        }
        Ok(pull_outcome(outcome))
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
        let reused: Vec<[u8; 32]> = if new_parts.iter().any(|n| n.hash == *hash) {
            Vec::new()
        } else {
            vec![*hash]
        };
        let keep = Keep {
            context: "adding a pulled image",
            present: &|tx| lookup::has_image(tx, hash),
            insert: &|tx| {
                tx.execute(
                    "INSERT INTO images (hash, hash_hex, len, target, label, source, added_at) \
                     VALUES (?1, ?2, (SELECT len FROM parts WHERE hash = ?1), ?3, ?4, ?5, ?6)",
                    rusqlite::params![&hash[..], e.hash, e.target, e.label, source, e.added_at],
                )
                .map(drop)
            },
        };
        Ok(pull_outcome(
            self.commit_pulled_parts(&reused, new_parts, &keep)?,
        ))
    }

    /// Index the new parts of a pull (their chunks were committed by its
    /// chunk batches: all re-checked, as is every reused part) and `keep`.
    fn commit_pulled_parts(
        &mut self,
        reused_parts: &[[u8; 32]],
        new_parts: &[PulledPart],
        keep: &Keep<'_>,
    ) -> Result<Outcome> {
        let reused_chunks: Vec<ChunkHash> = new_parts
            .iter()
            .flat_map(|p| p.chunks.iter().copied())
            .collect();
        let parts: Vec<PartRow> = new_parts.iter().map(AsPartRow::part_row).collect();
        let no_heal = HashSet::new();
        let w = Write {
            parts: &parts,
            ..pulled(reused_parts, &reused_chunks, &no_heal)
        };
        let index = self.index_path();
        write::commit(&mut self.conn, &index, &w, Some(keep))
    }
}

impl AsPartRow for PulledPart {
    fn part_row(&self) -> PartRow<'_> {
        PartRow {
            hash: self.hash,
            len: self.len,
            chunks: &self.chunks,
        }
    }
}

/// A pull's write: what it reuses was committed by earlier transactions (its
/// chunk batches, parts stored before), so it is always checked again.
fn pulled<'a>(
    reused_parts: &'a [[u8; 32]],
    reused_chunks: &'a [ChunkHash],
    healed: &'a HashSet<ChunkHash>,
) -> Write<'a> {
    Write {
        recheck: Recheck::Always,
        reused_parts,
        reused_chunks,
        packs: &[],
        chunks: &[],
        healed,
        parts: &[],
    }
}

/// The pull's view of a commit: added, there already, or raced by gc.
fn pull_outcome(o: Outcome) -> Option<bool> {
    match o {
        Outcome::Committed => Some(true),
        Outcome::Present => Some(false),
        Outcome::Raced => None,
    }
}
