//! `rrstore history --changes`: recordings whose replays did not all produce
//! the same output, grouped by output hash, with the images, backends and
//! devices that produced each output. A run without an output (crashed,
//! timed out, failed) is its own group, keyed by its verdict.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::Result;
use crate::Store;

/// The runs of one recording that produced one output.
#[derive(Clone, Debug, Serialize)]
pub struct OutputGroup {
    /// blake3 of the output arena (hex), or `None` for runs without output.
    pub output: Option<String>,
    /// Whether this output is the recorded output snapshot.
    pub recorded: bool,
    pub verdicts: Vec<String>,
    /// History row IDs.
    pub rows: Vec<i64>,
    /// Image hashes (hex) with their labels (empty when unknown).
    pub images: Vec<(String, String)>,
    pub backends: Vec<String>,
    pub devices: Vec<String>,
    pub first_at: i64,
    pub last_at: i64,
}

/// A recording with more than one output across its replays.
#[derive(Clone, Debug, Serialize)]
pub struct RecordingChanges {
    pub recording: String,
    pub kernel: String,
    pub label: String,
    /// Oldest group first.
    pub outputs: Vec<OutputGroup>,
}

impl Store {
    /// Recordings whose output hash differs between replays.
    pub fn history_changes(&self) -> Result<Vec<RecordingChanges>> {
        let mut by_rec: BTreeMap<String, BTreeMap<String, OutputGroup>> = BTreeMap::new();
        let mut recs = BTreeMap::new();
        for e in self.history(None)? {
            let key = match &e.output_blake3 {
                Some(h) => rrstore_format::id::hex(h),
                None => format!("no output: {}", e.verdict),
            };
            recs.entry(e.recording.to_hex()).or_insert(e.recording);
            let g = by_rec
                .entry(e.recording.to_hex())
                .or_default()
                .entry(key)
                .or_insert_with(|| OutputGroup {
                    output: e.output_blake3.map(|h| rrstore_format::id::hex(&h)),
                    recorded: false,
                    verdicts: Vec::new(),
                    rows: Vec::new(),
                    images: Vec::new(),
                    backends: Vec::new(),
                    devices: Vec::new(),
                    first_at: e.started_at,
                    last_at: e.started_at,
                });
            g.rows.push(e.id);
            g.first_at = g.first_at.min(e.started_at);
            g.last_at = g.last_at.max(e.started_at);
            push_unique(&mut g.verdicts, &e.verdict);
            push_unique(&mut g.backends, &e.backend);
            push_unique(&mut g.devices, &e.device);
            let img = rrstore_format::id::hex(&e.image_hash);
            if !g.images.iter().any(|(h, _)| *h == img) {
                let label = self.image_label(&e.image_hash)?;
                g.images.push((img, label));
            }
        }
        let mut out = Vec::new();
        for (hex, groups) in by_rec {
            if groups.len() < 2 {
                continue;
            }
            let Some(id) = recs.get(&hex) else { continue };
            let (kernel, label, recorded_output) = match self.recording(id) {
                Ok(r) => {
                    let label = self.recording_label(id)?;
                    let out = r
                        .part(rrstore_format::PartRole::Output)
                        .map(|p| rrstore_format::id::hex(&p.blake3));
                    (r.kernel, label, out)
                }
                // Removed from the store since: its history stays.
                Err(_) => ("(removed)".to_string(), String::new(), None),
            };
            let mut outputs: Vec<OutputGroup> = groups.into_values().collect();
            for g in &mut outputs {
                g.recorded = g.output.is_some() && g.output == recorded_output;
            }
            outputs.sort_by_key(|g| (g.first_at, g.rows.first().copied().unwrap_or(0)));
            out.push(RecordingChanges {
                recording: hex,
                kernel,
                label,
                outputs,
            });
        }
        Ok(out)
    }

    /// The label a recording was imported with.
    pub fn recording_label(&self, id: &rrstore_format::RecordingId) -> Result<String> {
        use rusqlite::OptionalExtension;
        let v: Option<String> = self
            .conn()
            .prepare_cached("SELECT label FROM recordings WHERE id = ?1")
            .and_then(|mut s| s.query_row([&id.0[..]], |r| r.get(0)).optional())
            .map_err(self.ierr("reading a recording label"))?;
        Ok(v.unwrap_or_default())
    }
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}
