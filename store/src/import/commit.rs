//! The end of an import attempt: make the packs durable, then commit the
//! plan (chunks, parts, the recording's rows) in one transaction of the
//! index's write path (`index::write`, spec/STORE.md "Index writes").

use std::time::Instant;

use rrstore_format::stages::{self, Stage};
use rrstore_format::{Recording, RecordingId};

use super::pipeline::worker_panicked;
use super::{ImportOptions, Plan, Writers};
use crate::error::{Result, StoreError};
use crate::index::recording_rows::insert_recording_rows;
use crate::index::write::{self, AsPartRow, Keep, Outcome, PartRow, Recheck};
use crate::Store;

impl Store {
    /// Make the packs durable, then commit the plan in one index
    /// transaction (`index::write`); afterwards keep only the current
    /// writer.
    pub(crate) fn sync_and_commit(
        &mut self,
        rec: &Recording,
        id: &RecordingId,
        opts: &ImportOptions,
        plan: &Plan,
        epoch0: i64,
        writers: &Writers,
    ) -> Result<Outcome> {
        let Ok(mut ws) = writers.lock() else {
            return Err(worker_panicked());
        };
        let t = Instant::now();
        for w in ws.iter_mut() {
            w.sync()?;
        }
        stages::add(Stage::Sync, t, 0);
        let packs: Vec<(String, u64)> =
            ws.iter().map(|w| (w.name().to_string(), w.len())).collect();
        drop(ws);
        let manifest = rmp_serde::to_vec_named(rec).map_err(|e| StoreError::Encode {
            what: format!("the manifest of recording {id}"),
            reason: e.to_string(),
        })?;
        let parts: Vec<PartRow> = plan.new_parts.iter().map(AsPartRow::part_row).collect();
        let w = write::Write {
            recheck: Recheck::SinceEpoch(epoch0),
            reused_parts: &plan.reused_parts,
            reused_chunks: &plan.reused_chunks,
            packs: &packs,
            chunks: &plan.new_chunks,
            healed: &plan.healed,
            parts: &parts,
        };
        let keep = Keep {
            context: "adding the recording",
            present: &|tx| crate::index::lookup::has_recording(tx, id),
            insert: &|tx| {
                let now = crate::now_unix();
                insert_recording_rows(tx, id, rec, &manifest, &opts.source, &opts.label, now)
            },
        };
        let index = self.index_path();
        // Durable with the command's other writes (spec/STORE.md, "Import
        // durability"); set for every commit, since a history row in
        // between sets `synchronous` back to FULL.
        self.conn
            .pragma_update(None, "synchronous", "normal")
            .map_err(self.ierr("setting synchronous=normal for an import"))?;
        self.meta_sync.defer_index();
        let t = Instant::now();
        let outcome = write::commit(&mut self.conn, &index, &w, Some(&keep))?;
        stages::add(Stage::Commit, t, 0);
        // Chunks committed now live in the index; a finished writer can be
        // closed (its lock released) once nothing uncommitted is in it.
        if let Ok(mut ws) = writers.lock() {
            let keep = ws.pop();
            ws.clear();
            ws.extend(keep);
        }
        Ok(outcome)
    }
}
