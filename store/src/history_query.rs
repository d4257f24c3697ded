//! Choosing replay history rows: by recording (kernel or label glob, as
//! `ls` chooses them), by start time, and the most recent N.

use std::collections::HashSet;

use crate::error::Result;
use crate::{HistoryEntry, LsFilter, Store};

/// Which history rows [`Store::history_query`] returns.
#[derive(Clone, Debug, Default)]
pub struct HistoryFilter {
    /// Shell glob on the recording's kernel name.
    pub kernel: Option<String>,
    /// Shell glob on the recording's label.
    pub label: Option<String>,
    /// Started at or after (Unix seconds).
    pub since: Option<i64>,
    /// Only the last N rows of those chosen (still oldest first).
    pub limit: Option<u64>,
}

impl Store {
    /// History rows, oldest first, that `filter` chooses among `rows`. A
    /// row of a recording no longer stored has no kernel or label, so a
    /// kernel or label glob leaves it out.
    pub fn history_query(
        &self,
        mut rows: Vec<HistoryEntry>,
        filter: &HistoryFilter,
    ) -> Result<Vec<HistoryEntry>> {
        if filter.kernel.is_some() || filter.label.is_some() {
            let ls = LsFilter {
                kernel: filter.kernel.clone(),
                label: filter.label.clone(),
                ..Default::default()
            };
            let ids: HashSet<String> = self.list(&ls)?.into_iter().map(|r| r.id).collect();
            rows.retain(|e| ids.contains(&e.recording.to_hex()));
        }
        if let Some(since) = filter.since {
            rows.retain(|e| e.started_at >= since);
        }
        if let Some(n) = filter.limit {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            let skip = rows.len().saturating_sub(n);
            rows.drain(..skip);
        }
        Ok(rows)
    }
}
