//! gc phase 1: remove the parts and chunks no recording, image or saved
//! output references, in one transaction that bumps the gc epoch.

use rusqlite::TransactionBehavior;

use super::GcReport;
use crate::error::Result;
use crate::Store;

impl Store {
    /// Phase 1: one transaction removes unreferenced parts and chunks and
    /// bumps the gc epoch so concurrent imports re-check what they reuse.
    pub(super) fn gc_mark(&mut self, report: &mut GcReport) -> Result<()> {
        let err = self.ierr("gc: removing unreferenced rows");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let parts = tx
            .execute(
                "DELETE FROM parts WHERE NOT EXISTS \
                 (SELECT 1 FROM recording_parts rp WHERE rp.part = parts.hash) \
                 AND NOT EXISTS (SELECT 1 FROM images im WHERE im.hash = parts.hash) \
                 AND NOT EXISTS (SELECT 1 FROM saved_outputs so WHERE so.part = parts.hash)",
                [],
            )
            .map_err(&err)?;
        tx.execute(
            "DELETE FROM part_chunks WHERE NOT EXISTS \
             (SELECT 1 FROM parts WHERE parts.hash = part_chunks.part)",
            [],
        )
        .map_err(&err)?;
        let chunks = tx
            .execute(
                "DELETE FROM chunks WHERE NOT EXISTS \
                 (SELECT 1 FROM part_chunks pc WHERE pc.chunk = chunks.hash)",
                [],
            )
            .map_err(&err)?;
        if parts + chunks > 0 {
            tx.execute(
                "UPDATE meta SET value = value + 1 WHERE key = 'gc_epoch'",
                [],
            )
            .map_err(&err)?;
        }
        tx.commit().map_err(&err)?;
        report.parts_removed = parts as u64;
        report.chunks_removed = chunks as u64;
        Ok(())
    }
}
