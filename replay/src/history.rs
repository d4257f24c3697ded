//! The replay history row: what [`crate::engine::replay`] did, as the
//! store's [`HistoryEntry`], with the launch it used (team/thread counts and
//! what overrode the recorded ones). Appending it is the only write a replay
//! makes to a store.

use std::collections::BTreeMap;

use rrstore_format::{Recording, RecordingId};
use rrstore_store::{HistoryEntry, Store};

use crate::engine::{ReplayOptions, ReplayReport};
use crate::error::ReplayError;

/// The history row for `report` of recording `id`, when the options it ran
/// with are not known (only the environment's `OMP_*` is recorded as an
/// override).
pub fn entry(id: RecordingId, report: &ReplayReport) -> HistoryEntry {
    row(id, report, None)
}

/// The history row for `report` of recording `id`, run with `opts`.
pub fn entry_for(id: RecordingId, report: &ReplayReport, opts: &ReplayOptions) -> HistoryEntry {
    row(id, report, Some(opts))
}

/// What overrode the recorded launch: `num_teams=N` / `num_threads=N` for
/// the options, then the host runner's `OMP_*` environment (inherited from
/// this process, plus the options' extra environment; the variables the
/// count options set themselves are left out: the option says it).
/// Other backends take no `OMP_*` from the environment.
///
/// `recorded`: the recording's launch environment, which the runner got
/// over this process' `OMP_*`: a variable it sets is not overridden by
/// this process' (and is the recording's own, not an override).
fn overrides(
    backend: &str,
    counts: (u64, u64),
    opts: Option<&ReplayOptions>,
    recorded: &[(String, String)],
) -> String {
    let mut out = Vec::new();
    let mut set_by_options: &[&str] = &[];
    if let Some(o) = opts {
        if o.num_teams.is_some() {
            out.push(format!("num_teams={}", counts.0));
        }
        if o.num_threads.is_some() {
            out.push(format!("num_threads={}", counts.1));
        }
        set_by_options = match (o.num_teams.is_some(), o.num_threads.is_some()) {
            (true, true) => &["OMP_NUM_TEAMS", "OMP_NUM_THREADS", "OMP_TEAMS_THREAD_LIMIT"],
            (true, false) => &["OMP_NUM_TEAMS"],
            (false, true) => &["OMP_NUM_THREADS", "OMP_TEAMS_THREAD_LIMIT"],
            (false, false) => &[],
        };
    }
    if backend == "host" {
        let mut env: BTreeMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
            .filter(|(k, _)| k.starts_with("OMP_"))
            .filter(|(k, _)| !recorded.iter().any(|(r, _)| r == k))
            .collect();
        for (k, v) in opts
            .map(|o| o.backends.host.env.as_slice())
            .unwrap_or_default()
        {
            if let Some(k) = k.to_str().filter(|k| k.starts_with("OMP_")) {
                env.insert(k.to_string(), v.to_string_lossy().into_owned());
            }
        }
        for (k, v) in env {
            if !set_by_options.contains(&k.as_str()) {
                out.push(format!("{k}={v}"));
            }
        }
    }
    out.join(" ")
}

/// Whether history row `e` ran with the launch a replay of `rec` with
/// `opts` would get now: the same team and thread counts and the same
/// overrides (options and the host runner's `OMP_*` environment). Rows
/// that predate launch recording never match: their launch is unknown.
pub fn same_launch(e: &HistoryEntry, rec: &Recording, opts: &ReplayOptions) -> bool {
    let counts = (
        opts.num_teams.unwrap_or(rec.launch.num_teams),
        opts.num_threads.unwrap_or(rec.launch.num_threads),
    );
    e.num_teams == Some(counts.0)
        && e.num_threads == Some(counts.1)
        && e.launch_overrides
            == overrides(
                &e.backend,
                counts,
                Some(opts),
                rec.environment.as_deref().unwrap_or_default(),
            )
}

fn row(id: RecordingId, report: &ReplayReport, opts: Option<&ReplayOptions>) -> HistoryEntry {
    let mut detail = report
        .error
        .as_ref()
        .map(|e| e.to_string())
        .unwrap_or_default();
    if let Some(m) = &report.mismatch {
        detail = m.describe(report.arena_base).join("\n");
    }
    // A nondeterministic row's detail starts with the variation's summary
    // (its stable digest, which `check` compares with a baseline's).
    if let Some(c) = &report.confirmation {
        let mut lines = c.describe(report.arena_base);
        if !detail.is_empty() {
            lines.push(detail);
        }
        detail = lines.join("\n");
    }
    if let Some(h) = &report.thread_hint {
        detail = format!("{detail}\n{}", h.describe());
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
        // The history's column is not nullable: a replay that stopped
        // before loading an image is stored with zeros there.
        image_hash: report.image_blake3.unwrap_or([0; 32]),
        backend: report.backend.clone(),
        device: report.device.clone(),
        runtime_versions: report.runtime_libraries.join(" "),
        started_at: report.started_at,
        wall_ns: report.timing.wall_ns,
        kernel_ns: report.timing.kernel_ns.clone(),
        output_blake3: report.output_blake3,
        verdict: report.verdict.as_str().to_string(),
        detail,
        num_teams: Some(report.num_teams),
        num_threads: Some(report.num_threads),
        launch_overrides: overrides(
            &report.backend,
            (report.num_teams, report.num_threads),
            opts,
            &report.recorded_environment,
        ),
        // fleet (issue 21): which device of the machine.
        device_ordinal: Some(u64::from(opts.map_or(0, |o| o.device))),
        // The GPU child reports its device's; the host's is derived here.
        device_uuid: if report.device_uuid.is_empty() {
            crate::fleet::devices::uuid_of(&report.backend, opts.map_or(0, |o| o.device))
        } else {
            report.device_uuid.clone()
        },
        placement: report
            .placement
            .as_ref()
            .map(|p| p.summary())
            .unwrap_or_default(),
        machine: String::new(),
        uid: String::new(),
        // An image compiled from IR: where it came from (spec/COMPILE.md).
        compiled: report
            .compiled
            .as_ref()
            .map(crate::compile::Provenance::compilation),
    }
}

/// Append the row for `report` to `store`; returns the row ID. Prefer
/// [`record_for`], which also records the options' launch overrides.
pub fn record(store: &Store, id: RecordingId, report: &ReplayReport) -> Result<i64, ReplayError> {
    let row = store.append_history(&entry(id, report))?;
    keep_profile(store, row, &id, report)?;
    Ok(row)
}

/// Keep the profile of a run whose replays were compared (`--confirm`)
/// with its row: `check` compares later runs with it.
fn keep_profile(
    store: &Store,
    row: i64,
    id: &RecordingId,
    report: &ReplayReport,
) -> Result<(), ReplayError> {
    if let Some(p) = report
        .confirmation
        .as_ref()
        .and_then(|c| c.profile.as_ref())
    {
        store.set_run_profile(row, id, &p.encode())?;
    }
    Ok(())
}

/// Append the row for `report`, run with `opts`, to `store`; returns the
/// row ID.
pub fn record_for(
    store: &Store,
    id: RecordingId,
    report: &ReplayReport,
    opts: &ReplayOptions,
) -> Result<i64, ReplayError> {
    let row = store.append_history(&entry_for(id, report, opts))?;
    keep_profile(store, row, &id, report)?;
    Ok(row)
}

/// Add the image a replay compiled from IR to the store's image library,
/// labelled with its provenance ([`crate::compile::Provenance::label`]),
/// so that `image ls`, the report and every command that names images by
/// label say where it came from. Nothing to do for a native image, one
/// compiled without a cache, or one already there.
pub fn register_compiled(store: &mut Store, report: &ReplayReport) -> Result<(), ReplayError> {
    let Some(c) = &report.compiled else {
        return Ok(());
    };
    let (Some(path), Some(hash)) = (
        &c.cached_image,
        rrstore_format::id::parse_hex32(&c.image_blake3),
    ) else {
        return Ok(());
    };
    if store.image(&hash)?.is_none() {
        store.add_image(path, &c.label())?;
    }
    Ok(())
}
