//! Run profiles (schema 10, table `run_profiles`): what the replays of a
//! run that differed from its recording showed, kept per history row as
//! bytes the replay crate encodes (`rrstore_replay::verify::profile`,
//! spec/STORE.md). The store only keeps and returns them: by row, and the
//! newest of a recording (the union of everything that ever varied
//! between its replays is `check`'s mask).

use rrstore_format::RecordingId;
use rusqlite::OptionalExtension;

use crate::error::Result;
use crate::Store;

/// A recording's profiles read back at most: the newest ones; enough to
/// have seen what varies, bounded however long the history grows.
pub const RECENT_PROFILES: u32 = 64;

impl Store {
    /// Keep `profile` for history row `history_id` of `recording`.
    pub fn set_run_profile(
        &self,
        history_id: i64,
        recording: &RecordingId,
        profile: &[u8],
    ) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT OR REPLACE INTO run_profiles (history_id, recording, profile) \
                 VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut s| s.execute(rusqlite::params![history_id, &recording.0[..], profile]))
            .map_err(self.ierr("recording a run's profile"))?;
        Ok(())
    }

    /// The profile of history row `history_id`, if it has one.
    pub fn run_profile(&self, history_id: i64) -> Result<Option<Vec<u8>>> {
        self.conn()
            .prepare_cached("SELECT profile FROM run_profiles WHERE history_id = ?1")
            .and_then(|mut s| s.query_row([history_id], |r| r.get(0)).optional())
            .map_err(self.ierr("reading a run's profile"))
    }

    /// The newest [`RECENT_PROFILES`] profiles of `recording`'s runs, as
    /// (history row, profile).
    pub fn recent_run_profiles(&self, recording: &RecordingId) -> Result<Vec<(i64, Vec<u8>)>> {
        let read = || -> rusqlite::Result<Vec<(i64, Vec<u8>)>> {
            let mut s = self.conn().prepare_cached(
                "SELECT history_id, profile FROM run_profiles WHERE recording = ?1 \
                 ORDER BY history_id DESC LIMIT ?2",
            )?;
            let rows = s.query_map(rusqlite::params![&recording.0[..], RECENT_PROFILES], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
            rows.collect()
        };
        read().map_err(self.ierr("reading a recording's run profiles"))
    }
}
