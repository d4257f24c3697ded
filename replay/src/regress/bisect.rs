//! `rrstore bisect`: find the first image, in an ordered list (oldest to
//! newest), whose replay output differs from the good image's (or that
//! crashes or fails), by binary search.
//!
//! The reference is the good image's output. When the good image is the
//! recording's own image and the recording has an output snapshot, the
//! reference is that snapshot's hash: the recording *is* a run of that
//! image, so no replay is needed. The search range is `good+1 ..= bad`
//! plus a virtual "nothing changed" outcome, so `bad - good + 1` outcomes
//! take `ceil(log2(bad - good + 1))` tests (3 for 8 images), each answered
//! from the history when that recording already ran with that image.
//! Like `git bisect`, it assumes that once changed, the output stays
//! changed in newer images.

use rrstore_format::{PartRole, RecordingId};
use rrstore_store::Store;
use serde::Serialize;

use super::image::{ImageOverride, ImageSet};
use super::lanes::{each_recording, Fleet};
use super::run::{run, Run, RunOptions};
use super::RegressError;

/// One test of the search.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// 1-based step number.
    pub step: usize,
    /// Index of the image in the list.
    pub index: usize,
    pub image: String,
    pub label: String,
    pub run: Run,
    /// Output equal to the reference.
    pub good: bool,
}

/// The result for one recording.
#[derive(Clone, Debug, Serialize)]
pub struct BisectReport {
    pub recording: String,
    pub kernel: String,
    /// Where the reference output came from.
    pub reference: String,
    pub reference_output: Option<String>,
    pub good: usize,
    pub bad: usize,
    pub steps: Vec<Step>,
    /// Index of the first image that changed the output; None if none did.
    pub culprit: Option<usize>,
    pub culprit_image: Option<String>,
    pub culprit_label: Option<String>,
    /// The last image known to keep the output.
    pub last_good: usize,
    /// Replays actually run (history hits excluded), reference included.
    pub replays: u32,
    pub cached: u32,
}

/// An image of the list with its label: the images one argument names,
/// of which each recording runs the one built for its target.
#[derive(Clone, Debug)]
pub struct ListedImage {
    pub set: ImageSet,
    pub label: String,
}

/// Bisection settings.
#[derive(Clone)]
pub struct BisectOptions {
    pub images: Vec<ListedImage>,
    pub good: usize,
    /// Default: the last image.
    pub bad: Option<usize>,
    pub run: RunOptions,
}

/// Check `good`/`bad` against the list; returns (good, bad).
pub fn range(opts: &BisectOptions) -> Result<(usize, usize), RegressError> {
    let n = opts.images.len();
    if n < 2 {
        return Err(RegressError::Usage(
            "bisect needs at least two images (--images OLDEST ... NEWEST)".into(),
        ));
    }
    let bad = opts.bad.unwrap_or(n - 1);
    if bad >= n || opts.good >= bad {
        return Err(RegressError::Usage(format!(
            "need --good < --bad < {n} (image indexes, 0 = oldest); got --good {} --bad {bad}",
            opts.good
        )));
    }
    Ok((opts.good, bad))
}

/// Bisect recording `id`; `on_step` sees each step as it is done.
pub fn bisect(
    store: &mut Store,
    id: &RecordingId,
    opts: &BisectOptions,
    on_step: &mut dyn FnMut(&Step),
) -> Result<BisectReport, RegressError> {
    let (good, bad) = range(opts)?;
    let rec = store.recording(id)?;
    let mut ropts = opts.run.clone();
    ropts.use_cache = true;
    let mut report = BisectReport {
        recording: id.to_hex(),
        kernel: rec.kernel.clone(),
        reference: String::new(),
        reference_output: None,
        good,
        bad,
        steps: Vec::new(),
        culprit: None,
        culprit_image: None,
        culprit_label: None,
        last_good: good,
        replays: 0,
        cached: 0,
    };
    let picked: Vec<ImageOverride> = opts
        .images
        .iter()
        .map(|l| l.set.pick(&rec))
        .collect::<Result<_, _>>()?;
    let good_img = &picked[good];
    let recorded_image = store.recording_image_hash(id)?;
    let recorded_output = rec.part(PartRole::Output).map(|p| p.blake3);
    let reference = match (recorded_image == Some(good_img.hash), recorded_output) {
        (true, Some(out)) => {
            report.reference = format!("the recorded output (image {good} is the recorded image)");
            out
        }
        _ => {
            let r = run(store, id, Some(good_img), &ropts)?;
            count(&mut report, &r);
            report.reference = format!("the run of image {good} (history row {})", r.row);
            match r.output {
                Some(o) => o,
                None => {
                    return Err(RegressError::BadReference(format!(
                        "the good image {good} ({}) itself fails on {}: {} {}",
                        super::short(&good_img.hash),
                        rec.kernel,
                        r.verdict,
                        r.detail
                    )))
                }
            }
        }
    };
    report.reference_output = Some(rrstore_format::id::hex(&reference));
    let (mut lo, mut hi) = (good, bad + 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let img = &picked[mid];
        let r = run(store, id, Some(img), &ropts)?;
        count(&mut report, &r);
        let is_good = r.output == Some(reference);
        let step = Step {
            step: report.steps.len() + 1,
            index: mid,
            image: rrstore_format::id::hex(&img.hash),
            label: opts.images[mid].label.clone(),
            run: r,
            good: is_good,
        };
        on_step(&step);
        report.steps.push(step);
        if is_good {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    report.last_good = lo;
    if hi <= bad {
        report.culprit = Some(hi);
        report.culprit_image = Some(rrstore_format::id::hex(&picked[hi].hash));
        report.culprit_label = Some(opts.images[hi].label.clone());
    }
    Ok(report)
}

fn count(report: &mut BisectReport, r: &Run) {
    if r.cached {
        report.cached += 1;
    } else {
        report.replays += 1;
    }
}

/// fleet (issue 21): bisect each of `ids` over the lanes of `fleet` (host
/// jobs or devices); `done` sees each recording's result in the order of
/// `ids`, and one failure does not stop the others.
pub fn bisect_all(
    store: &mut Store,
    ids: &[RecordingId],
    opts: &BisectOptions,
    fleet: &Fleet,
    done: &mut dyn FnMut(usize, Result<BisectReport, RegressError>),
) -> Result<(), RegressError> {
    let search = |store: &mut Store, run: &RunOptions, id: &RecordingId| {
        let lane = BisectOptions {
            run: run.clone(),
            ..opts.clone()
        };
        bisect(store, id, &lane, &mut |_| {})
    };
    each_recording(store, ids, fleet, &opts.run, &search, done)
}
