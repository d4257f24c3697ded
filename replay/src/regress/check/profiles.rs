//! The run profiles a check row's outcome is decided with, read from the
//! history (`run_profiles`, [`crate::verify::profile`]): the run's, the
//! baseline's, and the union of the bytes that varied in the recording's
//! recent runs (the learned mask).
//!
//! A baseline written without a profile (`replay --confirm 0`, a row
//! pulled from another store, an older rrstore) stands in through the
//! newest profiled run of the same image and launch: that one's replays
//! were compared, the baseline's were not.

use std::ops::Range;

use rrstore_format::RecordingId;
use rrstore_store::Store;

use super::super::run::Run;
use super::super::RegressError;
use crate::verify::profile::{union, Profile};

/// What the history's profiles say about a run and its baseline.
#[derive(Clone, Debug, Default)]
pub struct Profiles {
    /// The run's (None: its replays were not compared, or it verified).
    pub run: Option<Profile>,
    /// The baseline's, or that of the newest comparable run standing in.
    pub baseline: Option<Profile>,
    /// The bytes that varied between the replays of any recent run of
    /// the recording (sorted, merged).
    pub learned: Vec<Range<u64>>,
}

impl Profiles {
    /// Read them for `run` and `baseline` of recording `id`. A profile that
    /// does not decode counts as none (the rule then falls back to the
    /// output hashes).
    pub fn read(
        store: &Store,
        id: &RecordingId,
        run: &Run,
        baseline: Option<&Run>,
    ) -> Result<Profiles, RegressError> {
        // A run that verified (or failed) is decided without them.
        if !matches!(run.verdict.as_str(), "mismatch" | "nondeterministic") {
            return Ok(Profiles::default());
        }
        let recent = store.recent_run_profiles(id)?;
        let decoded: Vec<(i64, Profile)> = recent
            .iter()
            .filter_map(|(row, bytes)| Some((*row, Profile::decode(bytes).ok()?)))
            .collect();
        let learned = union(decoded.iter().map(|(_, p)| &p.varying[..]));
        let own = |row: i64| -> Result<Option<Profile>, RegressError> {
            Ok(store
                .run_profile(row)?
                .and_then(|b| Profile::decode(&b).ok()))
        };
        let mut baseline_profile = match baseline {
            Some(b) => own(b.row)?,
            None => None,
        };
        if let Some(b) = baseline.filter(|b| baseline_profile.is_none() && b.output.is_some()) {
            let rows: std::collections::HashMap<i64, _> = store
                .history(Some(*id))?
                .into_iter()
                .map(|e| (e.id, e))
                .collect();
            baseline_profile = decoded
                .iter()
                .find(|(row, _)| {
                    *row != run.row
                        && rows
                            .get(row)
                            .is_some_and(|e| e.image_hash == b.image && e.launch_text() == b.launch)
                })
                .map(|(_, p)| p.clone());
        }
        Ok(Profiles {
            run: own(run.row)?,
            baseline: baseline_profile,
            learned,
        })
    }
}

// A byte range in a list: what a profile holds.
#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn run(row: i64, verdict: &str) -> Run {
        Run {
            row,
            cached: false,
            image: [0; 32],
            verdict: verdict.into(),
            output: Some([1; 32]),
            kernel_ns: None,
            kernel_times_ns: Vec::new(),
            launch: String::new(),
            detail: String::new(),
            output_kept: false,
            compiled: None,
            runner_output: Default::default(),
        }
    }

    /// A profile in the index that does not decode (damaged, or written
    /// by a newer rrstore) counts as none: the run falls back to the
    /// digest rule, and the recording's other profiles still teach the
    /// mask. A verified run reads nothing.
    #[test]
    fn a_damaged_profile_counts_as_none() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let id = RecordingId([7; 32]);
        store.set_run_profile(1, &id, b"\x01garbage").unwrap();
        let varied = Profile {
            varying: vec![64..128],
            stable: Some(Vec::new()),
        };
        store.set_run_profile(2, &id, &varied.encode()).unwrap();
        let p = Profiles::read(&store, &id, &run(1, "mismatch"), None).unwrap();
        assert!(p.run.is_none());
        assert_eq!(p.learned, varied.varying);
        let p = Profiles::read(&store, &id, &run(2, "nondeterministic"), None).unwrap();
        assert_eq!(p.run, Some(varied));
        let p = Profiles::read(&store, &id, &run(2, "verified"), None).unwrap();
        assert!(p.run.is_none() && p.learned.is_empty());
    }
}
