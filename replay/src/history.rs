//! The replay history row: what [`crate::engine::replay`] did, as the
//! store's [`HistoryEntry`]. Appending it is the only write a replay makes
//! to a store.

use rrstore_format::RecordingId;
use rrstore_store::{HistoryEntry, Store};

use crate::engine::ReplayReport;
use crate::error::ReplayError;

/// The history row for `report` of recording `id`.
pub fn entry(id: RecordingId, report: &ReplayReport) -> HistoryEntry {
    let mut detail = report.error.clone().unwrap_or_default();
    if let Some(m) = &report.mismatch {
        detail = m.describe(report.arena_base).join("\n");
    }
    if let Some(t) = &report.tolerance {
        let line = format!(
            "tolerance {:?}: {} of {} elements differ, {} out of bounds, max abs {:e}, max rel {:e}, max ULP {}",
            t.dtype, t.differing, t.elements, t.out_of_bounds, t.max_abs_error, t.max_rel_error, t.max_ulp
        );
        detail = if detail.is_empty() {
            line
        } else {
            format!("{line}\n{detail}")
        };
    }
    HistoryEntry {
        id: 0,
        recording: id,
        image_hash: report.image_hash,
        backend: report.backend.clone(),
        device: report.device.clone(),
        runtime_versions: report.runtime_libraries.join(" "),
        started_at: report.started_at,
        wall_ns: report.timing.wall_ns,
        kernel_ns: report.timing.kernel_ns.clone(),
        output_blake3: report.output_hash,
        verdict: report.verdict.as_str().to_string(),
        detail,
    }
}

/// Append the row for `report` to `store`; returns the row ID.
pub fn record(store: &Store, id: RecordingId, report: &ReplayReport) -> Result<i64, ReplayError> {
    Ok(store.append_history(&entry(id, report))?)
}
