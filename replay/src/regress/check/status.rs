//! What a check row's outcome is ([`Status`]), and so whether it counts
//! as a regression (the exit status): "differs from the recording" and
//! "changed since the baseline" are told apart (docs/regress.md, "What
//! counts as a regression").
//!
//! * A run that verifies (or is within tolerance) passes.
//! * A run that differs from the recording regressed only when it also
//!   changed since its baseline (the recorded-image run: the history's,
//!   or with `--image` the cached or replayed one). A baseline that
//!   already differed in the same way (the same output) makes it
//!   [`Status::Known`]: not a new regression of this run.
//! * A nondeterministic run (its replays disagree among themselves) is
//!   not a regression unless its stable ranges (the bytes that differ
//!   from the recording in every replay) changed since the baseline: a
//!   nondeterministic baseline has their digest in its history row; with
//!   any other baseline (or none) a run with stable ranges changed.
//! * Without an output snapshot, a run regressed when its output differs
//!   from the baseline's; a run that crashed, timed out or failed
//!   regressed.

use serde::Serialize;

use super::super::run::Run;
use crate::verify::variation::Variation;

/// A check row's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Verified, within tolerance, or unverified and the same as the
    /// baseline.
    Passed,
    /// Changed since the baseline (or failed): the exit status is 1.
    Regressed,
    /// Differs from the recorded output exactly as the baseline already
    /// did: "differs from recording (known)".
    Known,
    /// Varies between replays; its stable ranges did not change.
    Nondeterministic,
}

impl Status {
    /// The words of the check table and reports.
    pub fn words(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Regressed => "REGRESSED",
            Status::Known => "differs from recording (known)",
            Status::Nondeterministic => "nondeterministic",
        }
    }
}

/// The stable digest of a nondeterministic run (from its history detail):
/// `Some("")` when it has no stable difference.
fn stable_digest(r: &Run) -> Option<String> {
    Variation::stable_digest_in(&r.detail)
}

/// Whether the nondeterministic `run`'s stable ranges changed since
/// `baseline`.
fn stable_changed(run: &Run, baseline: Option<&Run>) -> bool {
    let mine = stable_digest(run).unwrap_or_default();
    match baseline.filter(|b| b.verdict == "nondeterministic") {
        Some(b) => stable_digest(b).unwrap_or_default() != mine,
        // A baseline that verified had no stable difference; one that
        // mismatched unconfirmed (`--confirm 0`, an older rrstore) may
        // have varied: either way only a stable difference is a change.
        None => !mine.is_empty(),
    }
}

/// The outcome of `run` against `baseline`; `changed_vs_baseline` is
/// whether their outputs differ (None: not known). Returns the status and
/// what `changed_vs_baseline` means for the row (for a nondeterministic
/// run: whether its stable ranges changed).
pub fn classify(
    run: &Run,
    baseline: Option<&Run>,
    changed_vs_baseline: Option<bool>,
) -> (Status, Option<bool>) {
    match run.verdict.as_str() {
        "verified" | "within-tolerance" => (Status::Passed, changed_vs_baseline),
        "unverified" if changed_vs_baseline == Some(true) => {
            (Status::Regressed, changed_vs_baseline)
        }
        "unverified" => (Status::Passed, changed_vs_baseline),
        "mismatch" => {
            let known = baseline.is_some_and(|b| {
                b.verdict == "mismatch" && b.output.is_some() && b.output == run.output
            });
            if known {
                (Status::Known, Some(false))
            } else {
                (Status::Regressed, changed_vs_baseline)
            }
        }
        "nondeterministic" => {
            let changed = stable_changed(run, baseline);
            let status = if changed {
                Status::Regressed
            } else {
                Status::Nondeterministic
            };
            (status, Some(changed))
        }
        _ => (Status::Regressed, changed_vs_baseline),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(verdict: &str, output: u8, detail: &str) -> Run {
        Run {
            row: 1,
            cached: false,
            image: [0; 32],
            verdict: verdict.into(),
            output: Some([output; 32]),
            kernel_ns: None,
            kernel_times_ns: Vec::new(),
            launch: String::new(),
            detail: detail.into(),
            output_kept: false,
            compiled: None,
            runner_output: Default::default(),
        }
    }

    const NOISE: &str = "nondeterministic: 3 distinct outputs in 3 replays; 8 byte(s) vary between replays, 0 byte(s) differ from the recorded output in every replay";
    const STABLE_A: &str = "nondeterministic: 2 distinct outputs in 3 replays; 8 byte(s) vary between replays, 4 byte(s) differ from the recorded output in every replay (stable digest 00112233aabbccdd)";
    const STABLE_B: &str = "nondeterministic: 2 distinct outputs in 3 replays; 8 byte(s) vary between replays, 4 byte(s) differ from the recorded output in every replay (stable digest 99112233aabbccdd)";

    /// The table of docs/regress.md, "What counts as a regression".
    #[test]
    fn differs_from_the_recording_is_not_changed_since_the_baseline() {
        let c = |r: &Run, b: Option<&Run>, changed| classify(r, b, changed).0;
        let verified = run("verified", 0, "");
        let mism = run("mismatch", 1, "");
        assert_eq!(c(&verified, None, None), Status::Passed);
        assert_eq!(c(&mism, Some(&verified), Some(true)), Status::Regressed);
        assert_eq!(c(&mism, None, None), Status::Regressed);
        assert_eq!(c(&mism, Some(&mism), Some(false)), Status::Known);
        assert_eq!(
            c(&mism, Some(&run("mismatch", 2, "")), Some(true)),
            Status::Regressed
        );
        let noise = run("nondeterministic", 3, NOISE);
        assert_eq!(c(&noise, None, Some(true)), Status::Nondeterministic);
        assert_eq!(
            c(&noise, Some(&verified), Some(true)),
            Status::Nondeterministic
        );
        assert_eq!(c(&noise, Some(&mism), Some(true)), Status::Nondeterministic);
        let a = run("nondeterministic", 4, STABLE_A);
        assert_eq!(c(&a, Some(&verified), Some(true)), Status::Regressed);
        assert_eq!(c(&a, Some(&noise), Some(true)), Status::Regressed);
        assert_eq!(
            c(&a, Some(&run("nondeterministic", 5, STABLE_A)), Some(true)),
            Status::Nondeterministic
        );
        assert_eq!(
            c(&a, Some(&run("nondeterministic", 5, STABLE_B)), Some(true)),
            Status::Regressed
        );
        assert_eq!(
            c(&run("crashed", 0, ""), Some(&verified), None),
            Status::Regressed
        );
    }
}
