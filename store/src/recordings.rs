//! Changing what is indexed about recordings: `rm` and tags. Removing a
//! recording only drops its index rows; `gc` reclaims the space.

use rrstore_format::RecordingId;

use crate::error::{Result, StoreError};
use crate::index::write;
use crate::Store;

impl Store {
    /// Remove recordings from the index (their chunks stay until `gc`).
    /// Returns how many were removed.
    pub fn remove(&mut self, ids: &[RecordingId]) -> Result<usize> {
        let index = self.index_path();
        let n = write::in_transaction(&mut self.conn, &index, "removing recordings", |tx| {
            ids.iter()
                .try_fold(0, |n, id| Ok(n + write::delete_recording(tx, &id.0)?))
        })?;
        for id in ids {
            crate::recovery::remove_recording(self.dir(), id)?;
        }
        Ok(n)
    }

    /// Set tags (`key = value`, replacing a previous value) and remove keys.
    ///
    /// An error means nothing changed. Once the index commit is made the
    /// tags are set, whatever follows: the recovery metadata is rewritten
    /// after the commit (spec/STORE.md, "Recovery metadata"), and when
    /// that fails (a full disk) the error is returned as `Ok(Some(_))`, the
    /// tags committed and the metadata file still holding the old ones
    /// until the next successful `tag` of the recording rewrites it.
    pub fn tag(
        &mut self,
        id: &RecordingId,
        set: &[(String, String)],
        remove: &[String],
    ) -> Result<Option<StoreError>> {
        for (k, _) in set {
            if k.is_empty() || k.contains('=') {
                return Err(StoreError::BadTagKey { key: k.clone() });
            }
        }
        if !self.contains(id)? {
            return Err(StoreError::NotFound(id.to_hex()));
        }
        let index = self.index_path();
        write::in_transaction(&mut self.conn, &index, "updating tags", |tx| {
            for k in remove {
                write::remove_tag(tx, &id.0, k)?;
            }
            for (k, v) in set {
                write::set_tag(tx, &id.0, k, v)?;
            }
            Ok(())
        })?;
        let refreshed =
            crate::recovery::write_recording(self.conn(), self.dir(), id, &self.meta_sync)
                .and_then(|()| self.meta_sync.flush());
        Ok(refreshed.err())
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
