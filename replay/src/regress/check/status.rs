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
//! * A kernel whose output varies (the run's replays disagreed, or the
//!   baseline's, or those of a recent run of the recording) changed only
//!   where a byte that varied in none of them differs between the run and
//!   the baseline (the recording itself when there is none), as their
//!   run profiles tell ([`Profiles`]): [`Status::Nondeterministic`]
//!   otherwise, whichever of `mismatch` and `nondeterministic` each one's
//!   few replays happened to show. Low-entropy garbage (a word that is
//!   zero in most replays) makes three replays agree now and then; a
//!   digest of the bytes that agreed would then change between checks.
//! * Without profiles (`--confirm 0`, rows of an older rrstore) a
//!   nondeterministic run is not a regression unless its stable ranges
//!   (the bytes that differ from the recording in every replay) changed
//!   since the baseline: a nondeterministic baseline has their digest in
//!   its history row; with any other baseline (or none) a run with stable
//!   ranges changed.
//! * Without an output snapshot, a run regressed when its output differs
//!   from the baseline's; a run that crashed, timed out or failed
//!   regressed.

use serde::Serialize;

use super::super::run::Run;
use super::profiles::Profiles;
use crate::verify::profile::{differs_outside, union, Profile};
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

/// Whether a differing `run` changed since `baseline` outside every byte
/// that varied (module documentation); `None` when the kernel was never
/// seen to vary or a profile needed is missing.
fn changed_outside_variation(
    run: &Run,
    baseline: Option<&Run>,
    profiles: &Profiles,
) -> Option<bool> {
    let nondet = |r: &Run| r.verdict == "nondeterministic";
    let varied = nondet(run) || baseline.is_some_and(nondet) || !profiles.learned.is_empty();
    if !varied {
        return None;
    }
    let mine = profiles.run.as_ref()?;
    // The recording's own output: nothing differs, nothing varied.
    let recorded = Profile {
        varying: Vec::new(),
        stable: Some(Vec::new()),
    };
    let theirs = match baseline {
        None => &recorded,
        Some(b) if b.verdict == "verified" => &recorded,
        Some(b) if matches!(b.verdict.as_str(), "mismatch" | "nondeterministic") => {
            profiles.baseline.as_ref()?
        }
        Some(_) => return None,
    };
    let mask = union([
        &mine.varying[..],
        &theirs.varying[..],
        &profiles.learned[..],
    ]);
    differs_outside(mine, theirs, &mask)
}

/// The outcome of `run` against `baseline`; `changed_vs_baseline` is
/// whether their outputs differ (None: not known). Returns the status and
/// what `changed_vs_baseline` means for the row (for a kernel whose output
/// varies: whether a byte that never varied changed).
pub fn classify(
    run: &Run,
    baseline: Option<&Run>,
    changed_vs_baseline: Option<bool>,
    profiles: &Profiles,
) -> (Status, Option<bool>) {
    let same_mismatch = baseline.is_some_and(|b| {
        b.verdict == "mismatch" && run.verdict == "mismatch" && b.output == run.output
    });
    if matches!(run.verdict.as_str(), "mismatch" | "nondeterministic") && !same_mismatch {
        if let Some(changed) = changed_outside_variation(run, baseline, profiles) {
            let status = if changed {
                Status::Regressed
            } else {
                Status::Nondeterministic
            };
            return (status, Some(changed));
        }
    }
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

// Byte ranges, one of them in a list: what the profiles hold.
#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
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
        let none = Profiles::default();
        let c = |r: &Run, b: Option<&Run>, changed| classify(r, b, changed, &none).0;
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

    fn profile(varying: &[std::ops::Range<u64>], stable: &[(u64, &[u8])]) -> Profile {
        Profile {
            varying: varying.to_vec(),
            stable: Some(stable.iter().map(|(a, v)| (*a, v.to_vec())).collect()),
        }
    }

    /// Low-entropy garbage: the words at 1600.. are zero in most replays,
    /// so one run's three replays agree (`mismatch`) and the next's do not
    /// (`nondeterministic`); the bytes at 848.. differ from the recording
    /// alike in every replay. Neither order is a regression; a changed
    /// byte that never varied is.
    #[test]
    fn runs_of_a_varying_kernel_compare_outside_what_ever_varied() {
        let zeros: &[u8] = &[0; 16];
        let agreed = profile(&[], &[(848, zeros)]);
        let varied = profile(&[1600..1664], &[(848, zeros)]);
        let ptr: &[u8] = &[0x80, 0xbf, 0x6d, 0x23, 0x85, 0x55];
        let agreed_on_a_pointer = profile(&[], &[(848, zeros), (1600, ptr)]);
        let mism = run("mismatch", 1, "");
        let mism2 = run("mismatch", 2, "");
        let nondet = run("nondeterministic", 3, STABLE_A);
        let learned = vec![1600..1664];
        let with =
            |run: &Profile, base: Option<&Profile>, learned: &[std::ops::Range<u64>]| Profiles {
                run: Some(run.clone()),
                baseline: base.cloned(),
                learned: learned.to_vec(),
            };
        let c = |r: &Run, b: Option<&Run>, p: &Profiles| classify(r, b, Some(true), p);
        let p = with(&agreed, Some(&varied), &learned);
        assert_eq!(
            c(&mism, Some(&nondet), &p),
            (Status::Nondeterministic, Some(false))
        );
        let p = with(&varied, Some(&agreed), &learned);
        assert_eq!(c(&nondet, Some(&mism), &p).0, Status::Nondeterministic);
        // Two deterministic-looking runs that agreed on different garbage,
        // in bytes an earlier run saw vary.
        let p = with(&agreed_on_a_pointer, Some(&agreed), &learned);
        assert_eq!(c(&mism2, Some(&mism), &p).0, Status::Nondeterministic);
        // Never seen to vary: the outputs' hashes decide, as before.
        let p = with(&agreed_on_a_pointer, Some(&agreed), &[]);
        assert_eq!(c(&mism2, Some(&mism), &p).0, Status::Regressed);
        // A byte outside everything that varied changed: a regression.
        let changed = profile(&[1600..1664], &[(848, &[0, 0, 0, 0, 0, 0, 0, 3])]);
        let p = with(&changed, Some(&agreed), &learned);
        assert_eq!(c(&nondet, Some(&mism), &p), (Status::Regressed, Some(true)));
        // No baseline: compared with the recording.
        let p = with(&varied, None, &learned);
        assert_eq!(c(&nondet, None, &p).0, Status::Regressed);
        let only_noise = profile(&[1600..1664], &[]);
        let p = with(&only_noise, None, &learned);
        assert_eq!(c(&nondet, None, &p).0, Status::Nondeterministic);
        // A baseline whose profile is missing: the digest rule.
        let p = with(&varied, None, &learned);
        assert_eq!(c(&nondet, Some(&mism), &p).0, Status::Regressed);
    }
}
