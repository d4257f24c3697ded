//! `rrstore history --changes`: recordings whose completed replays did not
//! all produce the same output, grouped by output hash, with the images,
//! backends, devices, machines and launches (team/thread counts and
//! overrides such as `OMP_NUM_THREADS`) that produced each output, and
//! which of those differ between the outputs. Rows may come from several
//! machines (shared history, spec/REMOTE.md): a different machine is a
//! difference like a different image or device. Only completed replays
//! count: a replay that failed (could not start, wrong target, crashed,
//! timed out) produced no output to compare; its rows are listed apart.
//! Rows whose verdict is `nondeterministic` are left out: their output
//! varies between identical replays, so another one is no change. So are
//! the `mismatch` rows of a recording and image that also have such a
//! row: a kernel whose garbage varies only now and then gives runs whose
//! few replays happened to agree (docs/regress.md, "Kernels whose output
//! varies"); each of their outputs is one draw of the same varying one.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::Result;
use crate::Store;

/// The runs of one recording that produced one output.
#[derive(Clone, Debug, Serialize)]
pub struct OutputGroup {
    /// blake3 of the output arena (hex).
    pub output: String,
    /// Whether this output is the recorded output snapshot.
    pub recorded: bool,
    pub verdicts: Vec<String>,
    /// History row IDs.
    pub rows: Vec<i64>,
    /// Image hashes (hex) with their labels (empty when unknown).
    pub images: Vec<(String, String)>,
    pub backends: Vec<String>,
    pub devices: Vec<String>,
    /// Machines the runs were on (`-`: a row from before machines were
    /// recorded).
    pub machines: Vec<String>,
    /// Launches of these runs: `TEAMSxTHREADS` and overrides, e.g.
    /// `1x1 OMP_NUM_THREADS=3` (see [`crate::HistoryEntry::launch_text`]).
    pub launches: Vec<String>,
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
    /// What the groups do not all share, of `image`, `backend`, `device`,
    /// `machine`, `launch`: the candidates for the cause of the change.
    pub differs: Vec<String>,
    /// History rows of this recording's failed replays (not counted).
    pub failed_rows: Vec<i64>,
}

impl Store {
    /// Recordings whose output hash differs between completed replays.
    pub fn history_changes(&self) -> Result<Vec<RecordingChanges>> {
        self.history_changes_of(self.history(None)?)
    }

    /// [`Store::history_changes`] of the history rows `rows` (this
    /// store's, or a remote's); kernels and labels come from this store.
    pub fn history_changes_of(
        &self,
        rows: Vec<crate::HistoryEntry>,
    ) -> Result<Vec<RecordingChanges>> {
        let mut by_rec: BTreeMap<String, BTreeMap<String, OutputGroup>> = BTreeMap::new();
        let mut failed: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        let mut recs = BTreeMap::new();
        let varies: std::collections::BTreeSet<_> = rows
            .iter()
            .filter(|e| e.verdict == "nondeterministic")
            .map(|e| (e.recording, e.image_hash))
            .collect();
        for e in rows {
            // Its outputs vary between identical replays (verdict
            // `nondeterministic`, `--confirm`): another output is no change.
            if e.verdict == "nondeterministic"
                || (e.verdict == "mismatch" && varies.contains(&(e.recording, e.image_hash)))
            {
                continue;
            }
            recs.entry(e.recording.to_hex()).or_insert(e.recording);
            let Some(out) = e.output_blake3.filter(|_| e.completed()) else {
                failed.entry(e.recording.to_hex()).or_default().push(e.id);
                continue;
            };
            let key = rrstore_format::id::hex(&out);
            let g = by_rec
                .entry(e.recording.to_hex())
                .or_default()
                .entry(key.clone())
                .or_insert_with(|| OutputGroup {
                    output: key.clone(),
                    recorded: false,
                    verdicts: Vec::new(),
                    rows: Vec::new(),
                    images: Vec::new(),
                    backends: Vec::new(),
                    devices: Vec::new(),
                    machines: Vec::new(),
                    launches: Vec::new(),
                    first_at: e.started_at,
                    last_at: e.started_at,
                });
            g.rows.push(e.id);
            g.first_at = g.first_at.min(e.started_at);
            g.last_at = g.last_at.max(e.started_at);
            push_unique(&mut g.verdicts, &e.verdict);
            push_unique(&mut g.backends, &e.backend);
            push_unique(&mut g.devices, &e.device);
            push_unique(
                &mut g.machines,
                if e.machine.is_empty() {
                    "-"
                } else {
                    &e.machine
                },
            );
            push_unique(&mut g.launches, &e.launch_text());
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
                // Removed from the store since (its history stays), or
                // a remote's recording this store never had.
                Err(_) => ("(not in this store)".to_string(), String::new(), None),
            };
            let mut outputs: Vec<OutputGroup> = groups.into_values().collect();
            for g in &mut outputs {
                g.recorded = Some(&g.output) == recorded_output.as_ref();
            }
            outputs.sort_by_key(|g| (g.first_at, g.rows.first().copied().unwrap_or(0)));
            let failed_rows = failed.remove(&hex).unwrap_or_default();
            let differs = differs(&outputs);
            out.push(RecordingChanges {
                differs,
                failed_rows,
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

/// An attribute of a group: its name and its values.
type Attribute = (&'static str, fn(&OutputGroup) -> Vec<String>);

/// The attributes whose values are not the same in every group.
fn differs(groups: &[OutputGroup]) -> Vec<String> {
    let sets: [Attribute; 5] = [
        ("image", |g| g.images.iter().map(|i| i.0.clone()).collect()),
        ("backend", |g| g.backends.clone()),
        ("device", |g| g.devices.clone()),
        ("machine", |g| g.machines.clone()),
        ("launch", |g| g.launches.clone()),
    ];
    let mut out = Vec::new();
    for (name, of) in sets {
        let mut first: Option<Vec<String>> = None;
        for g in groups {
            let mut v = of(g);
            v.sort();
            match &first {
                None => first = Some(v),
                Some(f) if *f != v => {
                    out.push(name.to_string());
                    break;
                }
                Some(_) => {}
            }
        }
    }
    out
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}
