//! The results of `check`, `bisect` and `replay` as one test-suite model,
//! which [`crate::junit`] and [`crate::markdown`] write: `check` and
//! `replay` give one case per recording, `bisect` one per kernel (`tune`'s,
//! one per kernel too: [`crate::suite_tune`]).
//!
//! A case is skipped when it is neither a pass nor a regression: `check`'s
//! nondeterministic rows (stable ranges unchanged) and known differences
//! (the baseline already differed alike), a nondeterministic `replay`.
//! A case fails when the command would call it a regression: `check`'s
//! regressed rows, a replay that mismatches, crashes or times out, a
//! bisection that found an image changing the output. A replay that could
//! not run at all (verdict `error`) is an error, not a failure, as JUnit
//! tells the two apart. A case's time is the kernel time (the fastest
//! launch) for `check`, the replay's wall time for `replay`, and the sum of
//! the steps' kernel times for `bisect`. Case names show C++ kernel names
//! demangled; the raw name is the `kernel` property.

use rrstore_replay::regress::bisect::BisectReport;
use rrstore_replay::regress::check::{CheckReport, CheckRow, Status};
use rrstore_replay::regress::run::Run;
use rrstore_replay::{ReplayReport, Verdict};

use crate::names::display;

/// A whole report: one command's results.
#[derive(Clone, Debug, PartialEq)]
pub struct Suite {
    /// `rrstore check`, `rrstore bisect`, `rrstore replay`.
    pub name: String,
    /// Unix seconds when the command ran.
    pub timestamp: i64,
    pub cases: Vec<Case>,
}

/// One recording (or kernel, for bisect).
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The kernel name.
    pub name: String,
    /// `rrstore.<command>.<label>`: CI systems group cases by it.
    pub classname: String,
    pub time_s: f64,
    pub outcome: Outcome,
    /// Facts shown with the case (recording ID, image, history row ...).
    pub properties: Vec<(String, String)>,
    /// What the case's runners printed (JUnit `<system-out>`, which CI
    /// systems show with the case); empty when nothing.
    pub output: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Passed {
        verdict: String,
    },
    /// A regression: `message` is one line (verdict and summary), `detail`
    /// the diff summary or the steps.
    Failed {
        verdict: String,
        message: String,
        detail: String,
    },
    /// Neither passed nor a regression: a nondeterministic output whose
    /// stable ranges did not change, or a difference from the recording
    /// the baseline already had. JUnit `<skipped>`, which GitLab, GitHub
    /// test reporters and Jenkins show apart from passes and failures.
    Skipped {
        verdict: String,
        message: String,
        detail: String,
    },
    /// The replay could not run.
    Error {
        verdict: String,
        message: String,
        detail: String,
    },
}

impl Outcome {
    pub fn verdict(&self) -> &str {
        match self {
            Outcome::Passed { verdict }
            | Outcome::Failed { verdict, .. }
            | Outcome::Skipped { verdict, .. }
            | Outcome::Error { verdict, .. } => verdict,
        }
    }
}

impl Suite {
    pub fn failures(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed { .. }))
    }

    pub fn skipped(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Skipped { .. }))
    }

    pub fn errors(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Error { .. }))
    }

    pub fn time_s(&self) -> f64 {
        self.cases.iter().map(|c| c.time_s).sum()
    }

    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.cases.iter().filter(|c| f(&c.outcome)).count()
    }
}

pub(crate) fn classname(command: &str, label: &str) -> String {
    if label.is_empty() {
        format!("rrstore.{command}")
    } else {
        format!("rrstore.{command}.{label}")
    }
}

pub(crate) fn short(hex: &str) -> &str {
    &hex[..12.min(hex.len())]
}

pub(crate) fn secs(ns: Option<u64>) -> f64 {
    ns.map(|n| n as f64 / 1e9).unwrap_or(0.0)
}

pub(crate) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn changed(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "changed",
        Some(false) => "same",
        None => "-",
    }
}

/// What a regressed check row's failure message says.
fn check_message(r: &CheckRow) -> String {
    let what = match r.run.verdict.as_str() {
        "mismatch" => "the output differs from the recorded output".to_string(),
        "unverified" => "the output differs from the recorded image's run".to_string(),
        "crashed" | "timed-out" | "error" => {
            let d = first_line(&r.run.detail);
            if d.is_empty() {
                "the replay did not finish".to_string()
            } else {
                d.to_string()
            }
        }
        other => other.to_string(),
    };
    format!("REGRESSED ({}): {what}", r.run.verdict)
}

/// What a check row that is neither passed nor regressed says.
fn skipped_message(r: &CheckRow) -> String {
    match r.status {
        Status::Known => "differs from the recording (known): the baseline's output already differed the same way; not a regression of this run".into(),
        _ => format!(
            "NONDETERMINISTIC: the output varies between identical replays; the ranges that differ in every replay did not change, so not a regression ({})",
            first_line(&r.run.detail)
        ),
    }
}

pub(crate) fn run_props(props: &mut Vec<(String, String)>, prefix: &str, r: &Run) {
    props.push((format!("{prefix}history_row"), r.row.to_string()));
    props.push((format!("{prefix}cached"), r.cached.to_string()));
    props.push((format!("{prefix}image"), rrstore_format::id::hex(&r.image)));
    if let Some(ns) = r.kernel_ns {
        props.push((format!("{prefix}kernel_ns"), ns.to_string()));
    }
    // An image compiled from IR: where it came from, as `replay` says it.
    if let Some(c) = &r.compiled {
        props.push((format!("{prefix}compiled_from_ir"), c.ir_blake3.clone()));
        props.push((format!("{prefix}compiler"), c.compiler_version.clone()));
        props.push((format!("{prefix}compiler_flags"), c.flags.join(" ")));
        props.push((format!("{prefix}compile_target"), c.target.clone()));
        props.push((format!("{prefix}compile_cached"), c.cached.to_string()));
    }
}

/// What runners printed, as text (and how much was left out).
pub(crate) fn text(o: &rrstore_replay::sandbox::output::RunnerOutput) -> String {
    let mut s = String::from_utf8_lossy(&o.bytes).into_owned();
    if o.dropped > 0 {
        s += &format!("({} more bytes of output not shown)\n", o.dropped);
    }
    s
}

/// `rrstore check`: one case per recording.
pub fn from_check(report: &CheckReport, timestamp: i64) -> Suite {
    let cases = report
        .rows
        .iter()
        .map(|r| {
            let mut properties = vec![
                ("kernel".to_string(), r.kernel.clone()),
                ("recording".to_string(), r.recording.clone()),
            ];
            run_props(&mut properties, "", &r.run);
            properties.push(("vs_recorded".into(), changed(r.changed_vs_recorded).into()));
            properties.push(("vs_baseline".into(), changed(r.changed_vs_baseline).into()));
            if let Some(t) = r.time_ratio {
                properties.push(("time_ratio".into(), format!("{t:.3}")));
            }
            properties.push(("status".into(), r.status.words().into()));
            let verdict = r.run.verdict.clone();
            let outcome = if matches!(r.status, Status::Known | Status::Nondeterministic) {
                Outcome::Skipped {
                    message: skipped_message(r),
                    detail: r.run.detail.clone(),
                    verdict,
                }
            } else if !r.regressed {
                Outcome::Passed { verdict }
            } else if verdict == "error" {
                Outcome::Error {
                    message: check_message(r),
                    detail: r.run.detail.clone(),
                    verdict,
                }
            } else {
                Outcome::Failed {
                    message: check_message(r),
                    detail: r.run.detail.clone(),
                    verdict,
                }
            };
            Case {
                name: format!("{} ({})", display(&r.kernel), short(&r.recording)),
                classname: classname("check", &r.label),
                time_s: secs(r.run.kernel_ns),
                outcome,
                properties,
                output: text(&r.runner_output()),
            }
        })
        .collect();
    Suite {
        name: "rrstore check".into(),
        timestamp,
        cases,
    }
}

/// `rrstore bisect`: one case per kernel (recording), failed when an
/// image changed its output.
pub fn from_bisect(reports: &[BisectReport], labels: &[String], timestamp: i64) -> Suite {
    let cases = reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let steps: Vec<String> = r
                .steps
                .iter()
                .map(|s| {
                    format!(
                        "step {}: image {} {} ({}) -> {} [{}]{}",
                        s.step,
                        s.index,
                        short(&rrstore_format::id::hex(&s.run.image)),
                        s.label,
                        if s.good { "good" } else { "BAD" },
                        s.run.verdict,
                        if s.run.cached {
                            ", from the history"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            let detail = format!("reference: {}\n{}", r.reference, steps.join("\n"));
            let outcome = match (r.culprit, &r.culprit_image) {
                (Some(c), Some(h)) => Outcome::Failed {
                    verdict: "changed".into(),
                    message: format!(
                        "image {c} {} ({}) is the first to change the output (last good: image {})",
                        short(h),
                        r.culprit_label.as_deref().unwrap_or(""),
                        r.last_good
                    ),
                    detail,
                },
                _ => Outcome::Passed {
                    verdict: "unchanged".into(),
                },
            };
            let mut properties = vec![
                ("kernel".to_string(), r.kernel.clone()),
                ("recording".to_string(), r.recording.clone()),
                ("good".into(), r.good.to_string()),
                ("bad".into(), r.bad.to_string()),
                ("replays".into(), r.replays.to_string()),
                ("cached".into(), r.cached.to_string()),
            ];
            if let Some(c) = r.culprit {
                properties.push(("culprit".into(), c.to_string()));
            }
            Case {
                name: format!("{} ({})", display(&r.kernel), short(&r.recording)),
                classname: classname("bisect", labels.get(i).map_or("", String::as_str)),
                time_s: r.steps.iter().map(|s| secs(s.run.kernel_ns)).sum(),
                outcome,
                properties,
                output: r.steps.iter().map(|s| text(&s.run.runner_output)).collect(),
            }
        })
        .collect();
    Suite {
        name: "rrstore bisect".into(),
        timestamp,
        cases,
    }
}

/// The diff summary of a replay: mismatch ranges, tolerance, error.
pub fn replay_detail(r: &ReplayReport) -> String {
    let mut lines = Vec::new();
    if let Some(e) = &r.error {
        lines.push(e.to_string());
    }
    if let Some(c) = &r.confirmation {
        lines.extend(c.describe(r.arena_base));
    }
    if let Some(h) = &r.thread_hint {
        lines.push(h.describe());
    }
    if let Some(m) = &r.mismatch {
        lines.extend(m.describe(r.arena_base));
    }
    if let Some(t) = &r.tolerance {
        lines.push(format!(
            "tolerance: {} of {} elements differ, {} out of bounds; max abs error {:e}, max rel error {:e}, max ULP {}",
            t.differing, t.elements, t.out_of_bounds, t.max_abs_error, t.max_rel_error, t.max_ulp
        ));
    }
    lines.join("\n")
}

/// `rrstore replay`: one case.
pub fn from_replay(r: &ReplayReport, label: &str, history_row: Option<i64>) -> Suite {
    let verdict = r.verdict.as_str().to_string();
    let detail = replay_detail(r);
    let message = match &r.verdict {
        Verdict::Mismatch => "MISMATCH: the output differs from the recorded output".to_string(),
        Verdict::Nondeterministic => format!(
            "NONDETERMINISTIC: the output differs from the recorded output and varies between identical replays ({})",
            first_line(&detail)
        ),
        Verdict::Crashed { signal } => format!("CRASHED: the kernel was killed by signal {signal}"),
        Verdict::TimedOut => "TIMED OUT: the kernel did not finish in time".to_string(),
        _ => format!("ERROR: {}", first_line(&detail)),
    };
    let outcome = match &r.verdict {
        Verdict::Verified | Verdict::WithinTolerance | Verdict::Unverified => {
            Outcome::Passed { verdict }
        }
        Verdict::Error => Outcome::Error {
            verdict,
            message,
            detail,
        },
        Verdict::Nondeterministic => Outcome::Skipped {
            verdict,
            message,
            detail,
        },
        _ => Outcome::Failed {
            verdict,
            message,
            detail,
        },
    };
    let mut properties = vec![
        ("kernel".to_string(), r.kernel.clone()),
        ("recording".to_string(), r.recording_id.clone()),
        ("backend".into(), r.backend.clone()),
        ("device".into(), r.device.clone()),
        ("repetitions".into(), r.repetitions.to_string()),
    ];
    if let Some(h) = &r.image_blake3 {
        properties.push(("image".into(), rrstore_format::id::hex(h)));
    }
    // An image compiled from IR: where it came from (spec/COMPILE.md).
    if let Some(c) = &r.compiled {
        properties.push(("compiled_from_ir".into(), c.ir_blake3.clone()));
        properties.push(("compiler".into(), c.compiler_version.clone()));
        properties.push(("compiler_flags".into(), c.flags.join(" ")));
        properties.push(("compile_cached".into(), c.cached.to_string()));
    }
    if let Some(ns) = r.timing.kernel_min_ns() {
        properties.push(("kernel_min_ns".into(), ns.to_string()));
    }
    if let Some(ns) = r.timing.kernel_median_ns() {
        properties.push(("kernel_median_ns".into(), ns.to_string()));
    }
    if let Some(row) = history_row {
        properties.push(("history_row".into(), row.to_string()));
    }
    Suite {
        name: "rrstore replay".into(),
        timestamp: r.started_at,
        cases: vec![Case {
            name: format!("{} ({})", display(&r.kernel), short(&r.recording_id)),
            classname: classname("replay", label),
            time_s: r.timing.wall_ns as f64 / 1e9,
            outcome,
            properties,
            output: text(&r.runner_output),
        }],
    }
}
