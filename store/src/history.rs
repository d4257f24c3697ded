//! Replay history: one row per replay, appended by the replay engine (the
//! only write a replay makes to the store) and listed by `rrstore history`.

use rrstore_format::RecordingId;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::index::{hash32, i, u};
use crate::Store;

/// One replay of one recording.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Row ID (assigned by [`Store::append_history`]; ignored on append).
    pub id: i64,
    pub recording: RecordingId,
    /// blake3 of the image actually run.
    #[serde(with = "hex32")]
    pub image_hash: [u8; 32],
    pub backend: String,
    pub device: String,
    pub runtime_versions: String,
    /// Unix seconds.
    pub started_at: i64,
    pub wall_ns: u64,
    pub kernel_ns: Vec<u64>,
    #[serde(with = "opt_hex32")]
    pub output_blake3: Option<[u8; 32]>,
    /// verified | mismatch | crashed | timed-out | error
    pub verdict: String,
    pub detail: String,
}

impl Store {
    /// Append a history row; returns its row ID.
    pub fn append_history(&self, e: &HistoryEntry) -> Result<i64> {
        let kernel_ns = serde_json::to_string(&e.kernel_ns).unwrap_or_else(|_| "[]".into());
        // A history row is a measurement, not data: it is committed with
        // synchronous=NORMAL (in WAL mode: atomic and consistent, but the last
        // rows may be lost on power failure) and the connection skips the
        // checkpoint on close, so a replay does not pay 4-5 fsyncs for it.
        // Imports keep synchronous=FULL: it is restored right after.
        let conn = self.conn();
        conn.pragma_update(None, "synchronous", "normal")
            .map_err(self.ierr("setting synchronous=normal for a history row"))?;
        let _ = conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        );
        // Without the checkpoint on close the write-ahead log would only be
        // folded back by SQLite's default autocheckpoint at 1000 pages, and
        // every later process re-reads the whole log when it opens the store
        // (measured: +45% on a small replay with an 8 MB log). Checkpointing
        // every 32 pages keeps it small at the cost of one fsync per ~10
        // replays; the size limit truncates the file after large imports.
        conn.pragma_update(None, "wal_autocheckpoint", 32)
            .map_err(self.ierr("setting wal_autocheckpoint for a history row"))?;
        conn.pragma_update(None, "journal_size_limit", 1 << 20)
            .map_err(self.ierr("setting journal_size_limit for a history row"))?;
        let r = self.insert_history(e, &kernel_ns);
        conn.pragma_update(None, "synchronous", "full")
            .map_err(self.ierr("restoring synchronous=full after a history row"))?;
        r
    }

    fn insert_history(&self, e: &HistoryEntry, kernel_ns: &str) -> Result<i64> {
        self.conn()
            .prepare_cached(
                "INSERT INTO replay_history (recording, image_hash, backend, device, \
                 runtime_versions, started_at, wall_ns, kernel_ns, output_blake3, verdict, detail) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )
            .and_then(|mut s| {
                s.execute(rusqlite::params![
                    &e.recording.0[..],
                    &e.image_hash[..],
                    e.backend,
                    e.device,
                    e.runtime_versions,
                    e.started_at,
                    i(e.wall_ns),
                    kernel_ns,
                    e.output_blake3.as_ref().map(|h| &h[..]),
                    e.verdict,
                    e.detail,
                ])
            })
            .map_err(self.ierr("appending a replay history row"))?;
        Ok(self.conn().last_insert_rowid())
    }

    /// History rows, oldest first, of one recording or of all.
    pub fn history(&self, filter: Option<RecordingId>) -> Result<Vec<HistoryEntry>> {
        let sql = "SELECT id, recording, image_hash, backend, device, runtime_versions, \
                   started_at, wall_ns, kernel_ns, output_blake3, verdict, detail \
                   FROM replay_history";
        let map = |r: &rusqlite::Row| -> rusqlite::Result<HistoryEntry> {
            let kernel_ns: String = r.get(8)?;
            Ok(HistoryEntry {
                id: r.get(0)?,
                recording: RecordingId(hash32(r.get(1)?)),
                image_hash: hash32(r.get(2)?),
                backend: r.get(3)?,
                device: r.get(4)?,
                runtime_versions: r.get(5)?,
                started_at: r.get(6)?,
                wall_ns: u(r.get(7)?),
                kernel_ns: serde_json::from_str(&kernel_ns).unwrap_or_default(),
                output_blake3: r.get::<_, Option<Vec<u8>>>(9)?.map(hash32),
                verdict: r.get(10)?,
                detail: r.get(11)?,
            })
        };
        let rows = match filter {
            Some(id) => self
                .conn()
                .prepare_cached(&format!(
                    "{sql} WHERE recording = ?1 ORDER BY started_at, id"
                ))
                .and_then(|mut s| s.query_map([&id.0[..]], map)?.collect()),
            None => self
                .conn()
                .prepare_cached(&format!("{sql} ORDER BY started_at, id"))
                .and_then(|mut s| s.query_map([], map)?.collect()),
        };
        rows.map_err(self.ierr("reading the replay history"))
    }
}

mod hex32 {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&rrstore_format::id::hex(v))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let s = String::deserialize(d)?;
        rrstore_format::id::parse_hex32(&s)
            .ok_or_else(|| serde::de::Error::custom("expected 64 hex digits"))
    }
}

mod opt_hex32 {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &Option<[u8; 32]>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(h) => s.serialize_some(&rrstore_format::id::hex(h)),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[u8; 32]>, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        match s {
            None => Ok(None),
            Some(s) => rrstore_format::id::parse_hex32(&s)
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom("expected 64 hex digits")),
        }
    }
}
