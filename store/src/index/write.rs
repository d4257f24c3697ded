//! The one write path for stored data: every import, `.rra` copy, stand-alone
//! object and pull indexes its chunks, parts and the row that keeps them
//! through [`commit`], and repeats an attempt that gc raced through
//! [`retry_raced`]; the edits that only remove or relabel rows (`rm`,
//! `image rm`, tags) run their typed statements in [`in_transaction`].
//!
//! Invariant (spec/STORE.md, "Index writes"): the pack bytes a write indexes
//! are synced before it starts; one `BEGIN IMMEDIATE` transaction then
//! checks that every row the write reuses from earlier lookups is still
//! there (only gc deletes such rows, and it bumps `gc_epoch` when it does),
//! and inserts the packs, chunks, parts, part chunk lists and the keeping row
//! (recording, image, object link) together, or nothing at all.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rrstore_format::chunk::{ChunkHash, Codec};
use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::{i, lookup};
use crate::error::{Result, StoreError};

/// A chunk appended (and synced) to a pack, not yet indexed.
pub(crate) struct ChunkRow {
    pub(crate) hash: ChunkHash,
    pub(crate) pack: String,
    pub(crate) offset: u64,
    pub(crate) stored_len: u32,
    pub(crate) len: u32,
    pub(crate) codec: Codec,
}

/// A part to index: its blake3, length and chunk list.
pub(crate) struct PartRow<'a> {
    pub(crate) hash: [u8; 32],
    pub(crate) len: u64,
    pub(crate) chunks: &'a [ChunkHash],
}

/// A part a writer has assembled (import, pull), as the rows to index.
pub(crate) trait AsPartRow {
    fn part_row(&self) -> PartRow<'_>;
}

/// When the rows a write reuses are checked again in its transaction.
#[derive(Clone, Copy)]
pub(crate) enum Recheck {
    /// Only if gc deleted rows since this `gc_epoch` was read (the reused
    /// rows were looked up after it).
    SinceEpoch(i64),
    /// Always (the reused rows were committed by earlier transactions of
    /// this write, e.g. a pull's chunk batches).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    Always,
}

/// Everything one transaction indexes.
pub(crate) struct Write<'a> {
    pub(crate) recheck: Recheck,
    pub(crate) reused_parts: &'a [[u8; 32]],
    pub(crate) reused_chunks: &'a [ChunkHash],
    /// Pack names and synced sizes; only those `chunks` point into are
    /// recorded.
    pub(crate) packs: &'a [(String, u64)],
    pub(crate) chunks: &'a [ChunkRow],
    /// Chunks whose existing rows point at a pack that lost them: their
    /// rows are repointed at the new copy (the others are `INSERT OR
    /// IGNORE`: a concurrent writer's copy wins, ours is garbage).
    pub(crate) healed: &'a HashSet<ChunkHash>,
    pub(crate) parts: &'a [PartRow<'a>],
}

/// The row that keeps what a write adds.
pub(crate) struct Keep<'a> {
    /// Error context of its statements ("adding the recording").
    pub(crate) context: &'a str,
    /// Whether it is there already (another process committed it first).
    pub(crate) present: &'a dyn Fn(&Transaction) -> rusqlite::Result<bool>,
    pub(crate) insert: &'a dyn Fn(&Transaction) -> rusqlite::Result<()>,
}

/// What [`commit`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Committed,
    /// The keeping row was there already: only healed chunk rows (if any)
    /// were written.
    Present,
    /// gc removed a reused row: nothing was written; start the attempt over.
    Raced,
}

/// Index `w` and, unless it is present, `keep`'s row, in one transaction.
pub(crate) fn commit(
    conn: &mut Connection,
    index: &Path,
    w: &Write<'_>,
    keep: Option<&Keep<'_>>,
) -> Result<Outcome> {
    let err = |context| super::err(index, context);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err("starting the index transaction"))?;
    if !reused_still_there(&tx, w).map_err(err("re-checking reused parts and chunks"))? {
        return Ok(Outcome::Raced);
    }
    let present = match keep {
        Some(k) => (k.present)(&tx).map_err(err(k.context))?,
        None => false,
    };
    if present && w.healed.is_empty() {
        return Ok(Outcome::Present);
    }
    let pack_ids = insert_packs(&tx, w).map_err(err("recording a pack"))?;
    insert_chunks(&tx, w, &pack_ids, present).map_err(err("adding chunks"))?;
    if present {
        tx.commit().map_err(err("committing the healed chunks"))?;
        return Ok(Outcome::Present);
    }
    insert_parts(&tx, w.parts).map_err(err("adding parts"))?;
    if let Some(k) = keep {
        (k.insert)(&tx).map_err(err(k.context))?;
    }
    tx.commit().map_err(err("committing"))?;
    Ok(Outcome::Committed)
}

/// Run `attempt` until gc does not race it (`Some`), `attempts` times at
/// most; then [`StoreError::Busy`] naming `what` (of the state after the
/// last attempt) and the writer (`by`).
pub(crate) fn retry_raced<S, T, E: From<StoreError>>(
    state: &mut S,
    attempts: u32,
    what: &dyn Fn(&S) -> String,
    by: &str,
    attempt: &mut dyn FnMut(&mut S) -> std::result::Result<Option<T>, E>,
) -> std::result::Result<T, E> {
    for _ in 0..attempts {
        if let Some(done) = attempt(state)? {
            return Ok(done);
        }
    }
    Err(StoreError::Busy(format!(
        "{}: gc kept removing chunks this {by} reused",
        what(state)
    ))
    .into())
}

/// Run `edit` in one `BEGIN IMMEDIATE` transaction of the index at `index`
/// (all of it or nothing); a failed statement is an error naming `context`.
/// The edits that only remove or relabel rows (rm, image rm, tags) go
/// through here; they reuse nothing, so there is nothing to re-check.
pub(crate) fn in_transaction<T>(
    conn: &mut Connection,
    index: &Path,
    context: &str,
    edit: impl FnOnce(&Transaction) -> rusqlite::Result<T>,
) -> Result<T> {
    let err = super::err(index, context);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(&err)?;
    let v = edit(&tx).map_err(&err)?;
    tx.commit().map_err(&err)?;
    Ok(v)
}

/// Drop the rows of recording `id` (recording, part list, tags, manifest);
/// 1 when it was there. Its parts and chunks stay until gc.
pub(crate) fn delete_recording(tx: &Transaction, id: &[u8; 32]) -> rusqlite::Result<usize> {
    let n = tx.execute("DELETE FROM recordings WHERE id = ?1", [&id[..]])?;
    for sql in [
        "DELETE FROM recording_parts WHERE recording = ?1",
        "DELETE FROM tags WHERE recording = ?1",
        "DELETE FROM manifests WHERE id = ?1",
    ] {
        tx.execute(sql, [&id[..]])?;
    }
    Ok(n)
}

/// Drop the image library row of `hash`; 1 when it was there. Its part
/// stays until gc.
pub(crate) fn delete_image(tx: &Transaction, hash: &[u8; 32]) -> rusqlite::Result<usize> {
    tx.execute("DELETE FROM images WHERE hash = ?1", [&hash[..]])
}

/// Set `key = value` on recording `id`, replacing a previous value.
pub(crate) fn set_tag(
    tx: &Transaction,
    id: &[u8; 32],
    key: &str,
    value: &str,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO tags (recording, key, value) VALUES (?1, ?2, ?3) \
         ON CONFLICT (recording, key) DO UPDATE SET value = excluded.value",
        rusqlite::params![&id[..], key, value],
    )
    .map(drop)
}

/// Remove the tag `key` of recording `id` (nothing when it has none).
pub(crate) fn remove_tag(tx: &Transaction, id: &[u8; 32], key: &str) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM tags WHERE recording = ?1 AND key = ?2",
        rusqlite::params![&id[..], key],
    )
    .map(drop)
}

fn reused_still_there(tx: &Transaction, w: &Write<'_>) -> rusqlite::Result<bool> {
    if let Recheck::SinceEpoch(epoch0) = w.recheck {
        if lookup::gc_epoch(tx)? == epoch0 {
            return Ok(true);
        }
    }
    for h in w.reused_parts {
        if !lookup::has_part(tx, h)? {
            return Ok(false);
        }
    }
    for h in w.reused_chunks {
        if !lookup::has_chunk(tx, h)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn insert_packs(tx: &Transaction, w: &Write<'_>) -> rusqlite::Result<HashMap<String, i64>> {
    let mut pack_ins = tx.prepare_cached(
        "INSERT INTO packs (name, size) VALUES (?1, ?2) \
         ON CONFLICT (name) DO UPDATE SET size = max(size, excluded.size)",
    )?;
    let mut pack_id = tx.prepare_cached("SELECT id FROM packs WHERE name = ?1")?;
    let mut ids = HashMap::new();
    for (name, size) in w.packs {
        if ids.contains_key(name) || !w.chunks.iter().any(|c| &c.pack == name) {
            continue;
        }
        pack_ins.execute(rusqlite::params![name, i(*size)])?;
        let pid: i64 = pack_id.query_row([name], |r| r.get(0))?;
        ids.insert(name.clone(), pid);
    }
    Ok(ids)
}

/// With `healed_only` (the keeping row is present), only the healed rows.
fn insert_chunks(
    tx: &Transaction,
    w: &Write<'_>,
    pack_ids: &HashMap<String, i64>,
    healed_only: bool,
) -> rusqlite::Result<()> {
    let mut chunk_ins = tx.prepare_cached(
        "INSERT OR IGNORE INTO chunks (hash, pack, offset, stored_len, len, codec) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut chunk_heal = tx.prepare_cached(
        "INSERT INTO chunks (hash, pack, offset, stored_len, len, codec) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (hash) DO UPDATE SET \
         pack = excluded.pack, offset = excluded.offset, \
         stored_len = excluded.stored_len, len = excluded.len, codec = excluded.codec",
    )?;
    for c in w.chunks {
        let healed = w.healed.contains(&c.hash);
        if healed_only && !healed {
            continue;
        }
        let pid = pack_ids.get(&c.pack).copied().unwrap_or(-1);
        let stmt = if healed {
            &mut chunk_heal
        } else {
            &mut chunk_ins
        };
        stmt.execute(rusqlite::params![
            &c.hash[..],
            pid,
            i(c.offset),
            c.stored_len,
            c.len,
            c.codec as u8
        ])?;
    }
    Ok(())
}

fn insert_parts(tx: &Transaction, parts: &[PartRow<'_>]) -> rusqlite::Result<()> {
    let mut part_ins =
        tx.prepare_cached("INSERT OR IGNORE INTO parts (hash, len, nchunks) VALUES (?1, ?2, ?3)")?;
    let mut pc_ins = tx.prepare_cached(
        "INSERT OR IGNORE INTO part_chunks (part, seq, chunk) VALUES (?1, ?2, ?3)",
    )?;
    for p in parts {
        part_ins.execute(rusqlite::params![
            &p.hash[..],
            i(p.len),
            p.chunks.len() as i64
        ])?;
        for (seq, c) in p.chunks.iter().enumerate() {
            pc_ins.execute(rusqlite::params![&p.hash[..], seq as i64, &c[..]])?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    fn count(store: &Store, table: &str) -> i64 {
        store
            .conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap_or(-1)
    }

    fn chunk(hash: u8) -> ChunkRow {
        ChunkRow {
            hash: [hash; 32],
            pack: "p0".into(),
            offset: 32,
            stored_len: 10,
            len: 10,
            codec: Codec::Raw,
        }
    }

    /// The invariant: a write whose reused chunk gc deleted (the epoch
    /// moved) writes nothing; with the epoch unchanged it is not re-checked;
    /// a present keeping row gets nothing but healed chunks.
    #[test]
    fn raced_writes_nothing_and_present_writes_only_healed_rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open(dir.path()).expect("store");
        let index = store.index_path();
        let epoch0 = lookup::gc_epoch(&store.conn).expect("epoch");
        let gone = [7u8; 32];
        let new = [chunk(1)];
        let list = [[1u8; 32], gone];
        let parts = [PartRow {
            hash: [9; 32],
            len: 20,
            chunks: &list,
        }];
        let packs = [("p0".to_string(), 64)];
        let none = HashSet::new();
        let w = |recheck| Write {
            recheck,
            reused_parts: &[],
            reused_chunks: std::slice::from_ref(&gone),
            packs: &packs,
            chunks: &new,
            healed: &none,
            parts: &parts,
        };
        store
            .conn
            .execute(
                "UPDATE meta SET value = value + 1 WHERE key = 'gc_epoch'",
                [],
            )
            .expect("bump");
        let raced = commit(
            &mut store.conn,
            &index,
            &w(Recheck::SinceEpoch(epoch0)),
            None,
        );
        assert_eq!(raced.ok(), Some(Outcome::Raced));
        assert_eq!(count(&store, "chunks") + count(&store, "parts"), 0);

        let present = Keep {
            context: "test",
            present: &|_| Ok(true),
            insert: &|_| Ok(()),
        };
        let w1 = w(Recheck::SinceEpoch(epoch0 + 1));
        let done = commit(&mut store.conn, &index, &w1, Some(&present));
        assert_eq!(done.ok(), Some(Outcome::Present));
        assert_eq!(count(&store, "chunks") + count(&store, "parts"), 0);

        let done = commit(&mut store.conn, &index, &w1, None);
        assert_eq!(done.ok(), Some(Outcome::Committed));
        assert_eq!((count(&store, "chunks"), count(&store, "parts")), (1, 1));
        assert_eq!(count(&store, "part_chunks"), 2);
    }

    /// An edit is all or nothing: a statement that fails after others
    /// succeeded leaves the index as it was, and the error names the edit
    /// and the index.
    #[test]
    fn a_failed_edit_leaves_the_index_as_it_was() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open(dir.path()).expect("store");
        let index = store.index_path();
        let id = [5u8; 32];
        let rec = "INSERT INTO tags (recording, key, value) VALUES (?1, 'k', 'v')";
        store.conn.execute(rec, [&id[..]]).expect("a tag row");
        let e = in_transaction(&mut store.conn, &index, "updating tags", |tx| {
            remove_tag(tx, &id, "k")?;
            set_tag(tx, &id, "k2", "v2")?;
            tx.execute("INSERT INTO no_such_table VALUES (1)", [])
        })
        .unwrap_err();
        assert_eq!(count(&store, "tags"), 1, "nothing of the edit stayed");
        let msg = e.to_string();
        assert!(msg.contains("updating tags"), "{msg}");
        let n = in_transaction(&mut store.conn, &index, "removing", |tx| {
            Ok(delete_recording(tx, &id)? + delete_image(tx, &id)?)
        })
        .expect("removing");
        assert_eq!((n, count(&store, "tags")), (0, 0), "tags go with the id");
    }
}
