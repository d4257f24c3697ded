//! Replay history: one row per replay, appended by the replay engine (the
//! only write a replay makes to the store) and listed by `rrstore history`:
//! what ran (image, backend, device), its launch (team/thread counts and
//! overrides), times, output hash and verdict, the machine it ran on and
//! the row's identity (`uid`), which every copy of the row keeps: shared
//! history (spec/REMOTE.md) merges rows from other stores by it
//! ([`Store::merge_history`]). In JSON every hash and ID is a hex string.

use rrstore_format::RecordingId;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::history_compiled::Compilation;
use crate::index::{hash32, i, u};
use crate::Store;

/// One replay of one recording.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Row ID (assigned by [`Store::append_history`]; ignored on append).
    pub id: i64,
    /// Recording ID (64 hex digits in JSON).
    #[serde(with = "hex_id")]
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
    /// verified | within-tolerance | mismatch | nondeterministic |
    /// unverified | crashed | timed-out | error
    pub verdict: String,
    pub detail: String,
    /// Team and thread counts the launch was given (None in rows written
    /// before they were recorded).
    #[serde(default)]
    pub num_teams: Option<u64>,
    #[serde(default)]
    pub num_threads: Option<u64>,
    /// What overrode the recorded launch, space-separated: the replay's
    /// count options (`num_teams=N`, `num_threads=N`), then the host
    /// runner's `OMP_*` environment, e.g. `num_threads=4 OMP_PROC_BIND=close`;
    /// empty when nothing did.
    #[serde(default)]
    pub launch_overrides: String,
    /// The device's ordinal on its backend (None in rows written before
    /// devices were recorded).
    #[serde(default)]
    pub device_ordinal: Option<u64>,
    /// The device's UUID (`rrstore devices`); empty when unknown.
    #[serde(default)]
    pub device_uuid: String,
    /// Where the arena was placed: `recorded 0xADDR`, or `relocated
    /// 0xADDR (recorded 0xADDR; rebased ...)`; empty in rows written
    /// before placement was recorded, and when the replay stopped first.
    #[serde(default)]
    pub placement: String,
    /// The machine it ran on (the store's [`Store::machine`], else the
    /// host name; set by [`Store::append_history`]); empty in rows written before
    /// machines were recorded (schema 7), by this store or the one it
    /// was pulled from.
    #[serde(default)]
    pub machine: String,
    /// The row's identity: 32 hex digits, random, assigned at append (or
    /// at the schema 7 migration), the same in every store and on every
    /// remote that has the row.
    #[serde(default)]
    pub uid: String,
    /// How the image run was compiled from LLVM IR (schema 9); None for a
    /// native image and in rows written before.
    #[serde(default)]
    pub compiled: Option<Compilation>,
}

/// The machine name history rows get: `named` (the caller's setting,
/// `$RRSTORE_MACHINE` in the CLI: for tests, and for hosts whose name says
/// nothing) when not blank, else the host name.
pub fn machine(named: Option<&str>) -> String {
    match named.map(str::trim) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => rrstore_format::output::host_name(),
    }
}

/// Whether `uid` is a row identity: 32 lowercase hex digits.
pub fn valid_uid(uid: &str) -> bool {
    uid.len() == 32 && uid.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl HistoryEntry {
    /// The replay ran to completion and produced an output (whatever its
    /// comparison with the recorded output said).
    pub fn completed(&self) -> bool {
        self.output_blake3.is_some()
            && matches!(
                self.verdict.as_str(),
                "verified" | "within-tolerance" | "mismatch" | "nondeterministic" | "unverified"
            )
    }

    /// `TEAMSxTHREADS` plus the overrides, e.g. `1x1 OMP_NUM_THREADS=3`;
    /// `-` when the row predates launch recording.
    pub fn launch_text(&self) -> String {
        let counts = match (self.num_teams, self.num_threads) {
            (Some(t), Some(n)) => format!("{t}x{n}"),
            _ => "-".to_string(),
        };
        if self.launch_overrides.is_empty() {
            counts
        } else {
            format!("{counts} {}", self.launch_overrides)
        }
    }
}

/// Write-ahead log size above which [`Store::fold_history_log`] checkpoints
/// and truncates the log (32 pages of 4 KiB plus their frame headers).
const WAL_TRUNCATE_AT: u64 = 32 * 4120;

impl Store {
    /// Append a history row of this machine ([`machine`] of
    /// [`Store::machine`]) with a new
    /// identity (`e.machine` and `e.uid` are ignored); returns its row ID.
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
        // Auto-checkpoints are off for this row: see `fold_history_log`.
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(self.ierr("turning auto-checkpoints off for a history row"))?;
        let r = self.insert_history(e, &kernel_ns, &machine(self.machine.as_deref()), None);
        if r.is_ok() {
            // For callers that do not fold the log during their replays.
            self.fold_log_over(2 * WAL_TRUNCATE_AT);
        }
        conn.pragma_update(None, "synchronous", "full")
            .map_err(self.ierr("restoring synchronous=full after a history row"))?;
        conn.pragma_update(None, "wal_autocheckpoint", 1000)
            .map_err(self.ierr("restoring auto-checkpoints after a history row"))?;
        r
    }

    /// Fold the index's write-ahead log back into the index and empty it,
    /// if it has grown past WAL_TRUNCATE_AT (~8 history rows); best effort.
    ///
    /// The log must be folded back now and then: every process that opens
    /// the store is the first connection, rebuilds the WAL index by reading
    /// the whole log, and then cannot restart the log (its rebuilt index
    /// says nothing is checkpointed), so a log left behind only grows, and
    /// SQLite's auto-checkpoint would then run (three fsyncs) on every later
    /// replay. So history rows are appended with auto-checkpoints off and
    /// the log is checkpointed and truncated to zero bytes here: one
    /// checkpoint per ~8 replays, none in between. Call it off the
    /// time to the result (`rrstore replay` does once it has printed it),
    /// so the checkpoint's fsyncs are not in it.
    /// [`Store::append_history`] folds the log itself only when it has
    /// grown past twice that size, for callers that never do.
    ///
    /// The fold also starts the new log, with one small commit (the count
    /// of folds, `meta.history_log_folds`): SQLite syncs a log's header
    /// when it writes the log's first frame, and that sync (~1.7 ms here)
    /// then falls before the replay too, not on its history row.
    pub fn fold_history_log(&self) {
        self.fold_log_over(WAL_TRUNCATE_AT);
    }

    /// [`Store::fold_history_log`] once the log is larger than `limit` bytes.
    fn fold_log_over(&self, limit: u64) {
        if self.wal_len() > limit {
            // A reader in another process can keep part of the log alive
            // (SQLITE_BUSY); a later call tries again. Both steps are best
            // effort: a failure only leaves the log to the next fold.
            let conn = self.conn();
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
            let _ = conn.execute(
                "INSERT INTO meta (key, value) VALUES ('history_log_folds', 1) \
                 ON CONFLICT (key) DO UPDATE SET value = value + 1",
                [],
            );
        }
    }

    /// How many times [`Store::fold_history_log`] folded the log back.
    pub fn history_log_folds(&self) -> Result<i64> {
        self.conn()
            .query_row(
                "SELECT COALESCE((SELECT value FROM meta WHERE key = 'history_log_folds'), 0)",
                [],
                |r| r.get(0),
            )
            .map_err(self.ierr("reading the count of history log folds"))
    }

    /// Bytes in the index's write-ahead log (0 when there is none).
    fn wal_len(&self) -> u64 {
        let mut wal = self.index_path().into_os_string();
        wal.push("-wal");
        std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0)
    }

    /// Insert `e` with `machine`, and identity `uid` (`None`: a new one).
    /// A row whose identity the store has is left as it is (returns 0).
    fn insert_history(
        &self,
        e: &HistoryEntry,
        kernel_ns: &str,
        machine: &str,
        uid: Option<&str>,
    ) -> Result<i64> {
        let n = self
            .conn()
            .prepare_cached(
                "INSERT OR IGNORE INTO replay_history (recording, image_hash, backend, device, \
                 runtime_versions, started_at, wall_ns, kernel_ns, output_blake3, verdict, detail, \
                 num_teams, num_threads, launch_overrides, device_ordinal, device_uuid, placement, \
                 machine, uid, compiled) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
                 ?18, COALESCE(?19, lower(hex(randomblob(16)))), ?20)",
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
                    e.num_teams.map(i),
                    e.num_threads.map(i),
                    e.launch_overrides,
                    e.device_ordinal.map(i),
                    e.device_uuid,
                    e.placement,
                    machine,
                    uid,
                    Compilation::to_column(e.compiled.as_ref()),
                ])
            })
            .map_err(self.ierr("appending a replay history row"))?;
        Ok(if n == 0 {
            0
        } else {
            self.conn().last_insert_rowid()
        })
    }

    /// Merge history rows from another store (a remote's shared history):
    /// each row keeps its machine and identity; rows whose identity the
    /// store has, and rows without a valid identity, are skipped. One
    /// transaction; returns the rows added.
    pub fn merge_history(&self, rows: &[HistoryEntry]) -> Result<u64> {
        let conn = self.conn();
        let tx = conn
            .unchecked_transaction()
            .map_err(self.ierr("starting to merge history rows"))?;
        let mut added = 0u64;
        for e in rows.iter().filter(|e| valid_uid(&e.uid)) {
            let kernel_ns = serde_json::to_string(&e.kernel_ns).unwrap_or_else(|_| "[]".into());
            if self.insert_history(e, &kernel_ns, &e.machine, Some(&e.uid))? != 0 {
                added += 1;
            }
        }
        tx.commit()
            .map_err(self.ierr("committing merged history rows"))?;
        Ok(added)
    }

    /// History rows, oldest first, of one recording or of all.
    pub fn history(&self, filter: Option<RecordingId>) -> Result<Vec<HistoryEntry>> {
        let sql = "SELECT id, recording, image_hash, backend, device, runtime_versions, \
                   started_at, wall_ns, kernel_ns, output_blake3, verdict, detail, \
                   num_teams, num_threads, launch_overrides, device_ordinal, device_uuid, \
                   placement, machine, uid, compiled FROM replay_history";
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
                num_teams: r.get::<_, Option<i64>>(12)?.map(u),
                num_threads: r.get::<_, Option<i64>>(13)?.map(u),
                launch_overrides: r.get(14)?,
                device_ordinal: r.get::<_, Option<i64>>(15)?.map(u),
                device_uuid: r.get(16)?,
                placement: r.get(17)?,
                machine: r.get(18)?,
                uid: r.get::<_, Option<String>>(19)?.unwrap_or_default(),
                compiled: Compilation::from_column(r.get(20)?),
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

mod hex_id {
    use rrstore_format::RecordingId;
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &RecordingId, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.to_hex())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RecordingId, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
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
