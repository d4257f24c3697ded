//! The replay sequence: check the recording and the options, open the
//! backend the image needs (through its configuration, [`BackendConfig`]),
//! drive it (place the arena, load the image, globals, fill, launch;
//! repeated for `--repetitions`), then one streamed pass over the arena
//! that verifies it against the recorded output, hashes it and saves it.
//!
//! [`replay`] never fails once a recording is resolved: every outcome,
//! errors included, becomes a [`ReplayReport`] with a [`Verdict`], because
//! every replay gets a history row.
//!
//! * [`options`]: [`ReplayOptions`] and the checks made before any backend
//!   work.
//! * [`rehydrate`]: the small parts, and the input offered to the backend's
//!   [`Backend::fill`].
//! * [`output`]: the read-back (compare, hash, save).
//! * [`report`]: [`ReplayReport`], [`Verdict`], [`Timing`].
//! * [`confirm`]: replaying a differing recording again (`--confirm`),
//!   the `nondeterministic` verdict and the thread-count hint.
//!
//! The engine names no backend: what differs between them is behind
//! [`Backend`] (the rehydration contract: [`crate::backend::rehydrate`]) and
//! [`BackendConfig::open`].

mod confirm;
mod ir;
mod options;
mod output;
mod rehydrate;
mod report;

use std::time::{Instant, SystemTime};

use rrstore_format::PartRole;

use crate::backend::{Backend, BackendError, LaunchParams, OpenRequest};
pub use crate::backend::{BackendConfig, BackendKind};
use crate::error::ReplayError;
use crate::placement::globals;
use crate::placement::PlacementReport;
use crate::source::ReplaySource;
pub use confirm::DEFAULT_CONFIRM;
pub use ir::uses_bitcode_part;
pub(crate) use options::preflight;
pub use options::{ReplayOptions, VerifyMode};
pub use report::{
    Confirmation, RehydratePath, ReplayReport, ThreadHint, ThreadTry, Timing, Verdict,
};

/// Replay `src` as `opts` say. See the module documentation.
pub fn replay(src: &mut ReplaySource, opts: &ReplayOptions) -> ReplayReport {
    let t0 = Instant::now();
    let rec = &src.recording;
    let started_at = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut report = ReplayReport {
        recording_id: src.id.to_hex(),
        kernel: rec.kernel.clone(),
        source: src.origin.to_string(),
        backend: String::new(),
        device: String::new(),
        device_uuid: String::new(),
        runtime_libraries: Vec::new(),
        sandbox: None,
        image_blake3: None,
        arena_base: rec.arena.base,
        arena_size: rec.arena.size,
        args: rec.args.clone(),
        num_teams: opts.num_teams.unwrap_or(rec.launch.num_teams),
        num_threads: opts.num_threads.unwrap_or(rec.launch.num_threads),
        repetitions: opts.repetitions.max(1),
        verdict: Verdict::Error,
        error: None,
        mismatch: None,
        tolerance: None,
        confirmation: None,
        thread_hint: None,
        differing_output: None,
        output_blake3: None,
        saved_output: None,
        saved_output_form: None,
        placement: None,
        recorded_environment: Vec::new(),
        started_at,
        timing: Default::default(),
        compiled: None,
        runner_output: Default::default(),
    };
    if let Err(e) = run(src, opts, &mut report) {
        report.verdict = Verdict::of_failure(&e);
        report.error = Some(e);
    }
    // The backend is gone, its runners ended: what they printed (before
    // the confirmation, whose replays take their own runners' output).
    report.runner_output = crate::sandbox::output::RunnerOutput::take();
    confirm::confirm(src, opts, &mut report);
    report.timing.wall_ns = t0.elapsed().as_nanos() as u64;
    report
}

fn run(
    src: &mut ReplaySource,
    opts: &ReplayOptions,
    report: &mut ReplayReport,
) -> Result<(), ReplayError> {
    // An IR image is compiled first: the backend is the compiled image's.
    let compiled = ir::compiled_image(src, opts, report)?;
    let image_choice = compiled.as_ref().or(opts.image.as_ref());
    let plan = options::preflight(&src.recording, opts, image_choice)?;
    report.backend = plan.kind.as_str().to_string();
    // Fleet lookahead: the input decoded while the lane's previous kernel
    // ran (waited for here, before any backend is opened or forked).
    let ahead = opts.lookahead.as_ref().and_then(|l| l.take(&src.id));
    let ahead = ahead.as_deref().map(|b| b.as_slice());
    let image = match image_choice {
        Some(o) => o.checked_bytes(&src.recording)?,
        None => rehydrate::read_small(src, PartRole::Image)?,
    };
    let rec = src.recording.clone();
    // The recording's launch environment, under the options' overrides
    // (a host runner's `OMP_*`: `HostSettings::recorded_env`).
    let with_env;
    let backends = match rec.environment.as_deref() {
        Some(env) if !env.is_empty() && plan.kind == BackendKind::Host => {
            let mut b = opts.backends.clone();
            b.host.recorded_env = crate::backend::host::config::launch_env(env);
            report.recorded_environment = env.to_vec();
            with_env = b;
            &with_env
        }
        _ => &opts.backends,
    };
    let mut backend = backends.open(
        plan.kind,
        &OpenRequest {
            arena: (plan.base, rec.arena.size),
            recorded_reservation: rec.arena.reserved,
            launch: opts.launch(),
            timeout: opts.timeout,
            device: opts.device,
        },
    )?;
    let params = LaunchParams {
        num_teams: report.num_teams,
        num_threads: report.num_threads,
        shared_memory: rec.launch.shared_memory,
        loop_trip_count: rec.launch.loop_trip_count,
        timeout: opts.timeout,
    };

    let t = Instant::now();
    // The placement step: the recorded address, or another one with the
    // pointers into the arena rebased (`crate::placement`).
    crate::placement::occupy::occupy(opts.occupy);
    let placed = crate::placement::place(
        backend.as_mut(),
        opts.placement,
        plan.base,
        rec.arena.size,
        opts.relocate_to,
        &image,
    )?;
    let rebaser = placed.rebaser;
    let scan = rebaser.filter(|_| opts.pointer_scan);
    report.placement = Some(PlacementReport {
        mode: if rebaser.is_some() {
            "relocated"
        } else {
            "recorded"
        },
        address: placed.base,
        recorded_address: plan.base,
        scan: rebaser.is_some() && scan.is_some(),
        ..PlacementReport::default()
    });
    if let (Some(p), Some(slack)) = (report.placement.as_mut(), backend.arena_slack()) {
        p.slack = slack.mapped;
        p.slack_short = slack.short;
    }
    report.timing.reserve_ns = t.elapsed().as_nanos() as u64;
    report.timing.rehydrate_bytes = rec.arena.size;
    // The image is loaded right after the arena is placed (nothing it maps
    // can land there any more) and before anything else, so a backend may
    // load it while the engine goes on (the host backend does: its runner
    // runs dlopen, the longest step of a small replay, meanwhile). Only the
    // first fill is announced before: a backend that fills the arena
    // itself starts that first.
    // A backend that cannot rebase what it reads itself is handed the
    // bytes, rebased by the engine.
    // Decoded ahead: the bytes are handed over from memory, never the
    // files.
    let extents = if ahead.is_none() && (scan.is_none() || backend.scan_fills(scan)) {
        rehydrate::input_extents(src)
    } else {
        None
    };
    rehydrate::begin_fill(src, extents.as_ref(), ahead, backend.as_mut())?;
    let t = Instant::now();
    backend.load_image(&image, &rec.kernel)?;
    report.timing.load_image_ns = t.elapsed().as_nanos() as u64;
    report.image_blake3 = Some(*blake3::hash(&image).as_bytes());
    report.device = backend.device_description();
    report.device_uuid = backend.device_uuid().unwrap_or_default();
    let globals_part = rehydrate::read_small(src, PartRole::Globals)?;
    let mut globals = Vec::new();
    for g in &rec.globals {
        let end = g.data_offset.checked_add(g.size);
        let Some(data) = end.and_then(|e| globals_part.get(g.data_offset as usize..e as usize))
        else {
            return Err(ReplayError::GlobalBounds {
                kernel: rec.kernel.clone(),
                name: g.name.clone(),
                offset: g.data_offset,
                size: g.size,
                len: globals_part.len() as u64,
            });
        };
        // Declare-target pointers into the arena, rebased.
        let mut data = data.to_vec();
        if let (Some(r), Some(p)) = (&rebaser, report.placement.as_mut()) {
            p.rebased_globals += crate::placement::scan::rebase_global(r, &mut data);
        }
        globals.push((g.name.as_str(), data));
    }
    let (mut launch_args, rebased_args) = match &rebaser {
        Some(r) => crate::placement::scan::rebase_args(r, &rec.args),
        None => (rec.args.clone(), 0),
    };
    // Addresses of device globals (arguments, stored words) move to the
    // replay's copy, read with the recorded image (issue 44).
    let recorded_image = opts.image.is_none().then_some(image.as_slice());
    let (moves, stored) = globals::prepare(src, recorded_image, backend.as_mut())?;
    let global_args = moves.rebase_args(&mut launch_args);
    if let Some(p) = report.placement.as_mut() {
        p.global_addresses = global_args;
        if global_args > 0 {
            report.args = launch_args.clone();
        }
    }
    // Known before the launch, so a replay that fails from here on
    // reports what was rebased (issue 44).
    if let Some(p) = report.placement.as_mut() {
        p.rebased_args = rebased_args;
        // The values the kernel is passed (`args`: "argument values
        // passed"), rebased into the relocated arena.
        report.args = launch_args.clone();
    }
    // The first launch's globals go right behind the image: a backend that
    // loads it in the background (the host runner) writes them as soon as
    // it is loaded. They live in the image, not the arena, so the fill
    // cannot undo them.
    let write_globals = |backend: &mut Box<dyn Backend>, report: &mut ReplayReport| {
        let t = Instant::now();
        for (name, data) in &globals {
            backend.write_global(name, data)?;
        }
        report.timing.globals_ns += t.elapsed().as_nanos() as u64;
        Ok::<(), BackendError>(())
    };
    write_globals(&mut backend, report)?;
    rehydrate::check_input_len(&rec)?;
    for rep in 0..report.repetitions {
        let t = Instant::now();
        if rep > 0 {
            rehydrate::begin_fill(src, extents.as_ref(), ahead, backend.as_mut())?;
        }
        let (filled, engine_rebased) =
            rehydrate::fill(src, extents.as_ref(), ahead, backend.as_mut(), scan)?;
        if let Some(p) = report.placement.as_mut() {
            p.rebased_pointers = match filled.path {
                RehydratePath::Files => backend.fill_rebased(),
                RehydratePath::Engine => engine_rebased.len() as u64,
            };
        }
        let ns = filled
            .took
            .map_or_else(|| t.elapsed().as_nanos() as u64, |d| d.as_nanos() as u64);
        if !moves.is_empty() {
            globals::rebase_stored(backend.as_mut(), &moves, &stored)?;
            if let Some(p) = report.placement.as_mut() {
                p.global_addresses = global_args + stored.len() as u64;
            }
        }
        report.timing.rehydrate_path = Some(filled.path);
        report.timing.arena_memory = backend.arena_memory();
        report.timing.rehydrate_ns.push(ns);
        if rep > 0 {
            write_globals(&mut backend, report)?;
        }
        if rep == 0 {
            // The lane's next recording is prepared while this kernel runs.
            if let Some(l) = &opts.lookahead {
                l.launching(opts);
            }
        }
        let k = backend.launch(&launch_args, &params);
        // Known once the load's reply came, which a launch waits for (a
        // crashed launch included).
        report.sandbox = backend.sandbox_applied();
        let k = k?;
        report.timing.gpu_upload = backend.upload_stats().map(Into::into);
        report.timing.kernel_ns.push(k.as_nanos() as u64);
        if rep == 0 {
            report.runtime_libraries = backend.runtime_libraries();
        }
    }

    let t = Instant::now();
    // The stored global addresses the kernel left alone get their recorded
    // value back first.
    if !moves.is_empty() && !stored.is_empty() {
        globals::restore_stored(backend.as_mut(), &moves, &stored)?;
    }
    // Back to the recorded addresses before hashing, comparing and saving;
    // in place where the backend can, else on the way down.
    let translate_down = match &rebaser {
        // The relocated form is saved from the bytes on their way down,
        // before they are translated.
        Some(r) if opts.save_relocated && opts.save_output.is_some() => Some(*r),
        Some(r) => match backend.back_translate(r)? {
            Some(n) => {
                if let Some(p) = report.placement.as_mut() {
                    p.back_translated = n;
                }
                None
            }
            None => Some(*r),
        },
        None => None,
    };
    output::check_output(
        src,
        backend.as_mut(),
        opts,
        plan.verify,
        translate_down,
        report,
    )?;
    report.timing.verify_ns = t.elapsed().as_nanos() as u64;
    Ok(())
}
