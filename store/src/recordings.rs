//! Changing what is indexed about recordings: `rm` and tags. Removing a
//! recording only drops its index rows; `gc` reclaims the space.

use rrstore_format::RecordingId;
use rusqlite::TransactionBehavior;

use crate::error::{Result, StoreError};
use crate::Store;

impl Store {
    /// Remove recordings from the index (their chunks stay until `gc`).
    /// Returns how many were removed.
    pub fn remove(&mut self, ids: &[RecordingId]) -> Result<usize> {
        let path = self.index_path();
        let err = |source| StoreError::Index {
            path: path.clone(),
            context: "removing recordings".into(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let mut n = 0;
        for id in ids {
            n += tx
                .execute("DELETE FROM recordings WHERE id = ?1", [&id.0[..]])
                .map_err(err)?;
            tx.execute(
                "DELETE FROM recording_parts WHERE recording = ?1",
                [&id.0[..]],
            )
            .map_err(err)?;
            tx.execute("DELETE FROM tags WHERE recording = ?1", [&id.0[..]])
                .map_err(err)?;
            tx.execute("DELETE FROM manifests WHERE id = ?1", [&id.0[..]])
                .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        for id in ids {
            crate::recovery::remove_recording(self.dir(), id)?;
        }
        Ok(n)
    }

    /// Set tags (`key = value`, replacing a previous value) and remove keys.
    pub fn tag(
        &mut self,
        id: &RecordingId,
        set: &[(String, String)],
        remove: &[String],
    ) -> Result<()> {
        for (k, _) in set {
            if k.is_empty() || k.contains('=') {
                return Err(StoreError::BadTagKey { key: k.clone() });
            }
        }
        if !self.contains(id)? {
            return Err(StoreError::NotFound(id.to_hex()));
        }
        let path = self.index_path();
        let err = |source| StoreError::Index {
            path: path.clone(),
            context: "updating tags".into(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        for k in remove {
            tx.execute(
                "DELETE FROM tags WHERE recording = ?1 AND key = ?2",
                rusqlite::params![&id.0[..], k],
            )
            .map_err(err)?;
        }
        for (k, v) in set {
            tx.execute(
                "INSERT INTO tags (recording, key, value) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (recording, key) DO UPDATE SET value = excluded.value",
                rusqlite::params![&id.0[..], k, v],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        crate::recovery::write_recording(self.conn(), self.dir(), id)
    }
}

/// Parse `KEY=VALUE`.
pub fn parse_tag(s: &str) -> Result<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(StoreError::BadTag {
            text: s.to_string(),
        }),
    }
}
