//! Confirming a differing output (`--confirm N`): a replay whose output
//! differs from the recorded one is replayed `N` more times, each output
//! kept in a scratch file; when the replays disagree among themselves the
//! verdict becomes [`Verdict::Nondeterministic`], with the bytes that vary
//! between replays apart from those that differ in every one
//! ([`crate::verify::variation`]). A verified replay costs nothing extra:
//! confirmation starts only after a difference.
//!
//! Then, for host replays when asked ([`ReplayOptions::thread_hint`]),
//! the thread-count hint: the recording is replayed once at 1 and once at
//! 2 threads (`OMP_NUM_THREADS`, where that is not the current setting),
//! since LLVM's files do not store the environment a program recorded
//! under, and a reduction's rounding or a race follows the thread count
//! (a recording made by `rrstore record` stores it and gets no hint).
//!
//! The extra replays append no history rows: the first replay's row
//! carries the verdict and what they found.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use rrstore_format::PartRole;

use super::report::{Confirmation, ReplayReport, ThreadHint, ThreadTry, Verdict};
use super::ReplayOptions;
use crate::source::ReplaySource;
use crate::verify::{arg_pointers, variation};

/// The CLI's default `--confirm`: two more replays after a difference, so
/// three outputs to compare (a majority, and two confirmations that a
/// deterministic mismatch is one).
pub const DEFAULT_CONFIRM: u32 = 2;

/// A scratch file for one kept output, unique in this process (parallel
/// checks replay in several threads).
pub(super) fn scratch_path(opts: &ReplayOptions, what: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = opts.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
    dir.join(format!(
        "rrstore-confirm-{}-{n}-{what}.out",
        std::process::id()
    ))
}

/// One more replay of `src` as `opts` say, with nothing confirmed and its
/// output written to `save`.
fn again(src: &mut ReplaySource, opts: &ReplayOptions, save: Option<PathBuf>) -> ReplayReport {
    let mut o = opts.clone();
    o.confirm = 0;
    o.thread_hint = false;
    o.lookahead = None;
    o.repetitions = 1;
    o.save_output = save;
    o.save_relocated = false;
    super::replay(src, &o)
}

/// Confirm `report` when it differs (see the module documentation), then
/// remove the scratch copy of its output.
pub(super) fn confirm(src: &mut ReplaySource, opts: &ReplayOptions, report: &mut ReplayReport) {
    let first = report.differing_output.take();
    if report.verdict == Verdict::Mismatch && opts.confirm > 0 {
        let c = confirmation(src, opts, report, first.as_ref().map(|f| f.0.clone()));
        if c.distinct_outputs > 1 && c.incomplete.is_none() {
            report.verdict = Verdict::Nondeterministic;
        }
        report.confirmation = Some(c);
        // Only a guess for recordings that do not say what they ran
        // under: LLVM's files do not; a recording that stores its launch
        // environment (`rrstore record`) already replayed with it.
        if opts.thread_hint
            && report.backend == "host"
            && opts.num_threads.is_none()
            && src.recording.environment.is_none()
        {
            report.thread_hint = Some(thread_hint(src, opts));
        }
    }
    if let Some((path, true)) = first {
        let _ = std::fs::remove_file(path);
    }
}

fn confirmation(
    src: &mut ReplaySource,
    opts: &ReplayOptions,
    report: &ReplayReport,
    first: Option<PathBuf>,
) -> Confirmation {
    let mut hashes = vec![report.output_blake3];
    let mut files: Vec<PathBuf> = first.into_iter().collect();
    let mut scratch = Vec::new();
    let mut incomplete = None;
    for i in 0..opts.confirm {
        let path = scratch_path(opts, &format!("again{i}"));
        scratch.push(path.clone());
        let r = again(src, opts, Some(path.clone()));
        if r.output_blake3.is_none() || r.saved_output.is_none() {
            incomplete = Some(format!(
                "confirmation replay {} of {} ended {}{}",
                i + 1,
                opts.confirm,
                r.verdict.as_str(),
                r.error.map(|e| format!(": {e}")).unwrap_or_default()
            ));
            break;
        }
        hashes.push(r.output_blake3);
        files.push(path);
    }
    let mut distinct = hashes.clone();
    distinct.sort();
    distinct.dedup();
    let mut c = Confirmation {
        replays: hashes.len() as u32,
        distinct_outputs: distinct.len() as u32,
        varying: None,
        stable: None,
        stable_digest: None,
        incomplete,
        profile: None,
    };
    if c.incomplete.is_none() {
        // Compared even when every replay agreed: the profile (what differs
        // and how) is what `check` compares with other runs.
        let unique: Vec<PathBuf> = if c.distinct_outputs == 1 {
            files.iter().take(1).cloned().collect()
        } else {
            files.clone()
        };
        match compare(src, &unique, c.distinct_outputs) {
            Ok(v) if c.distinct_outputs == 1 => {
                // Every replay the same: the first one's mismatch is stable.
                c.stable = report.mismatch.clone();
                c.profile = Some(v.profile);
            }
            Ok(v) => {
                c.varying = v.varying;
                c.stable = v.stable;
                c.stable_digest = v.stable_digest;
                c.profile = Some(v.profile);
            }
            Err(e) => c.incomplete = Some(format!("comparing the kept outputs: {e}")),
        }
    }
    for p in scratch {
        let _ = std::fs::remove_file(p);
    }
    c
}

/// The kept outputs `files` against the recorded output of `src`.
fn compare(
    src: &mut ReplaySource,
    files: &[PathBuf],
    distinct: u32,
) -> std::io::Result<variation::Variation> {
    let rec = &src.recording;
    let size = rec.arena.size;
    let pointers = arg_pointers(&rec.args, rec.arena.base.unwrap_or(0), size);
    let mut outputs: Vec<Box<dyn std::io::Read>> = Vec::new();
    for f in files {
        outputs.push(Box::new(std::io::BufReader::new(std::fs::File::open(f)?)));
    }
    let mut recorded = src
        .parts
        .open_part(PartRole::Output)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    variation::compare(&mut recorded, &mut outputs, size, &pointers, distinct)
}

/// The runner's `OMP_NUM_THREADS` for `opts`: the options' extra
/// environment, else this process's (which the runner inherits).
fn current_threads(opts: &ReplayOptions) -> Option<String> {
    let own = opts
        .backends
        .host
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "OMP_NUM_THREADS")
        .map(|(_, v)| v.to_string_lossy().into_owned());
    own.or_else(|| std::env::var("OMP_NUM_THREADS").ok())
}

/// Replay at 1 and at 2 threads (those that are not the current setting)
/// until one verifies.
fn thread_hint(src: &mut ReplaySource, opts: &ReplayOptions) -> ThreadHint {
    let current = current_threads(opts);
    let mut hint = ThreadHint {
        current: current.clone(),
        tried: Vec::new(),
        verifies_at: None,
    };
    for n in [1u64, 2] {
        if current.as_deref().map(str::trim) == Some(n.to_string().as_str()) {
            continue;
        }
        let mut o = opts.clone();
        o.backends
            .host
            .env
            .push(("OMP_NUM_THREADS".into(), n.to_string().into()));
        let r = again(src, &o, None);
        hint.tried.push(ThreadTry {
            threads: n,
            verdict: r.verdict.as_str().to_string(),
        });
        if r.verdict == Verdict::Verified {
            hint.verifies_at = Some(n);
            break;
        }
    }
    hint
}

impl ThreadHint {
    /// One line for people: which count verifies, or that none tried did.
    pub fn describe(&self) -> String {
        let now = match &self.current {
            Some(v) => format!("OMP_NUM_THREADS={v}"),
            None => "OMP_NUM_THREADS unset".to_string(),
        };
        match self.verifies_at {
            Some(n) => format!(
                "hint: the output verifies with OMP_NUM_THREADS={n} (this replay ran with {now}): the recording was probably made at {n} thread(s), which LLVM's files do not store; replay with OMP_NUM_THREADS={n}"
            ),
            None => {
                let tried: Vec<String> = self
                    .tried
                    .iter()
                    .map(|t| format!("{} ({})", t.threads, t.verdict))
                    .collect();
                format!(
                    "hint: the thread count does not explain the difference: replays at OMP_NUM_THREADS {} did not verify either (this replay ran with {now})",
                    if tried.is_empty() { "-".to_string() } else { tried.join(", ") }
                )
            }
        }
    }
}

impl Confirmation {
    /// Human-readable lines (the history's detail and `replay`'s text).
    pub fn describe(&self, base: Option<u64>) -> Vec<String> {
        if let Some(why) = &self.incomplete {
            return vec![format!("not confirmed: {why}")];
        }
        if self.distinct_outputs <= 1 {
            return vec![format!(
                "confirmed: the same output in all {} replays (a deterministic difference)",
                self.replays
            )];
        }
        variation::Variation {
            replays: self.replays,
            distinct_outputs: self.distinct_outputs,
            varying: self.varying.clone(),
            stable: self.stable.clone(),
            stable_digest: self.stable_digest.clone(),
            profile: Default::default(),
        }
        .describe(base)
    }
}
