//! `rrstore tune`'s results as a test suite (JUnit, Markdown): one case per
//! kernel, passed when a variant verified, with the best variant, its
//! speedup over the recorded launch and its spread as properties (and its
//! last replay's history row, image and compiled provenance, as `check`
//! names a run); failed when no variant verified, the trials' verdicts in
//! the message and one line per trial in the detail; an error when no
//! variant could run at all (every trial `error`: a compile variant the
//! compiler rejects, an image that does not load). The case's time is the
//! kernel time of every launch the search made, the baseline's included.

use rrstore_replay::regress::tune::{Trial, TuneReport};

use crate::names::display;
use crate::suite::{classname, first_line, run_props, secs, short, text, Case, Outcome, Suite};

fn trial_time(t: &Trial) -> f64 {
    t.run.kernel_times_ns.iter().map(|&ns| secs(Some(ns))).sum()
}

/// One line per trial: round, variant, verdict and why.
fn trial_lines(r: &TuneReport) -> String {
    r.trials
        .iter()
        .map(|t| {
            let what = t
                .variant
                .and_then(|v| r.variants.get(v))
                .map_or_else(|| "recorded launch".to_string(), |v| v.describe());
            let why = first_line(&t.run.detail);
            format!(
                "round {} {what}: {}{}",
                t.round,
                t.run.verdict,
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({why})")
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn outcome(r: &TuneReport) -> Outcome {
    if r.best.is_some() {
        return Outcome::Passed {
            verdict: "verified".into(),
        };
    }
    let mut verdicts: Vec<&str> = Vec::new();
    for t in &r.trials {
        if !verdicts.contains(&t.run.verdict.as_str()) {
            verdicts.push(&t.run.verdict);
        }
    }
    let message = format!(
        "NO VARIANT VERIFIED: {} variant(s) tried, none verified ({}); nothing to choose",
        r.variants.len(),
        verdicts.join(", ")
    );
    let detail = trial_lines(r);
    if verdicts == ["error"] {
        Outcome::Error {
            verdict: "error".into(),
            message,
            detail,
        }
    } else {
        Outcome::Failed {
            verdict: "unverified-variants".into(),
            message,
            detail,
        }
    }
}

fn properties(r: &TuneReport) -> Vec<(String, String)> {
    let mut p = vec![
        ("kernel".to_string(), r.kernel.clone()),
        ("recording".to_string(), r.recording.clone()),
        ("search".into(), r.search.into()),
        ("variants".into(), r.variants.len().to_string()),
        ("replays".into(), r.replays.to_string()),
        ("launches".into(), r.launches.to_string()),
        ("grid_launches".into(), r.grid_launches.to_string()),
    ];
    if !r.excluded.is_empty() {
        p.push(("excluded".into(), r.excluded.join("; ")));
    }
    if let Some(s) = &r.baseline.spread {
        p.push(("recorded_median_ns".into(), s.median_ns.to_string()));
    }
    if let Some(b) = &r.best {
        p.push(("best".into(), b.describe.clone()));
        p.push(("best_variant".into(), b.variant.to_string()));
        p.push(("speedup".into(), format!("{:.3}", b.speedup)));
        p.push(("best_median_ns".into(), b.spread.median_ns.to_string()));
        p.push(("best_min_ns".into(), b.spread.min_ns.to_string()));
        p.push(("best_max_ns".into(), b.spread.max_ns.to_string()));
        p.push(("best_repetitions".into(), b.spread.repetitions.to_string()));
        // Its last replay: history row, image, compiled provenance.
        if let Some(t) = r.trials.iter().rev().find(|t| t.variant == Some(b.variant)) {
            run_props(&mut p, "best_", &t.run);
        }
    }
    p
}

/// `rrstore tune`: one case per kernel; `labels[i]` is the label of
/// `reports[i]`'s recording (the case's class name).
pub fn from_tune(reports: &[TuneReport], labels: &[String], timestamp: i64) -> Suite {
    let cases = reports
        .iter()
        .enumerate()
        .map(|(i, r)| Case {
            name: format!("{} ({})", display(&r.kernel), short(&r.recording)),
            classname: classname("tune", labels.get(i).map_or("", String::as_str)),
            time_s: r.trials.iter().map(trial_time).sum::<f64>() + trial_time(&r.baseline),
            outcome: outcome(r),
            properties: properties(r),
            output: std::iter::once(&r.baseline)
                .chain(r.trials.iter())
                .map(|t| text(&t.run.runner_output))
                .collect(),
        })
        .collect();
    Suite {
        name: "rrstore tune".into(),
        timestamp,
        cases,
    }
}
