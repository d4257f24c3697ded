//! `rrstore bisect ID --passes`: the first optimization pass whose run
//! changes a kernel's output, found with LLVM's `-opt-bisect-limit`.
//!
//! LLVM numbers every optional pass it runs on a module (`BISECT: running
//! pass (N) NAME on UNIT` on stderr) and skips every pass after the limit.
//! The good end is limit 0 (no optional pass runs), the bad end is no
//! limit; the reference is the good end's output. One compile without a
//! limit lists the passes (P of them) and gives the bad end's output; if
//! it equals the reference, no pass changed the output. Otherwise a binary
//! search over `1..=P` finds the smallest limit whose output differs (or
//! whose replay crashes, times out or fails): that limit's pass is the
//! culprit. Compiles: at most `ceil(log2(P)) + 2`, each cached by content
//! ([`crate::compile::cache`]), replays taken from the history when the
//! same image already ran. Like `git bisect`, it assumes that once a pass
//! changed the output, later limits keep it changed.

use rrstore_format::image::bitcode;
use rrstore_format::{PartRole, RecordingId};
use rrstore_store::Store;
use serde::Serialize;

use super::image::ImageOverride;
use super::run::{run, Run, RunOptions};
use super::RegressError;
use crate::compile::{self, CompileOptions};
use crate::ReplayError;

/// A pass LLVM ran, as its bisect line names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pass {
    /// Its number under `-opt-bisect-limit` (1-based).
    pub number: u64,
    /// The pass (`loop-vectorize`, `instcombine`, `X86 DAG->DAG ...`).
    pub name: String,
    /// What it ran on: `[module]`, `function (NAME)`, `loop %x in ...`.
    pub on: String,
}

/// One test of the search.
#[derive(Clone, Debug, Serialize)]
pub struct PassStep {
    pub step: usize,
    /// The `-opt-bisect-limit` compiled with.
    pub limit: u64,
    /// The compiled image (hex).
    pub image: String,
    pub compile_cached: bool,
    pub run: Run,
    /// Output equal to the reference.
    pub good: bool,
}

/// The result for one recording.
#[derive(Clone, Debug, Serialize)]
pub struct PassBisectReport {
    pub recording: String,
    pub kernel: String,
    /// blake3 of the IR (hex).
    pub ir: String,
    pub compiler_version: String,
    pub flags: Vec<String>,
    /// Passes LLVM ran without a limit.
    pub passes: u64,
    /// The reference output: the replay of the image compiled with no
    /// optional pass (limit 0).
    pub reference_output: String,
    pub reference_image: String,
    pub steps: Vec<PassStep>,
    /// The first pass whose run changes the output; `None` when none does.
    pub culprit: Option<Pass>,
    /// The images compiled with the culprit's limit and the one before.
    pub culprit_image: Option<String>,
    pub last_good_image: Option<String>,
    /// Compiles run (cache hits excluded) and done in all.
    pub compiles: u32,
    pub compile_steps: u32,
    /// Replays actually run (history hits excluded).
    pub replays: u32,
    pub cached: u32,
}

/// `--passes` settings.
#[derive(Clone)]
pub struct PassBisectOptions {
    /// The IR to compile (`--image`); default: the recording's IR image
    /// or bitcode part.
    pub ir: Option<Vec<u8>>,
    pub compile: CompileOptions,
    pub run: RunOptions,
}

/// Parse `BISECT: running pass (N) NAME on UNIT` lines.
pub fn passes_run(log: &str) -> Vec<Pass> {
    log.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("BISECT: running pass (")?;
            let (n, rest) = rest.split_once(") ")?;
            let (name, on) = rest.rsplit_once(" on ").unwrap_or((rest, ""));
            Some(Pass {
                number: n.parse().ok()?,
                name: name.to_string(),
                on: on.to_string(),
            })
        })
        .collect()
}

/// The IR of recording `id`: its image when that is bitcode, else its
/// bitcode part.
fn recorded_ir(store: &Store, id: &RecordingId) -> Result<Vec<u8>, RegressError> {
    let mut src = crate::source::ReplaySource::stored(store, &id.to_hex())?;
    let rec = src.recording.clone();
    for role in [PartRole::Image, PartRole::Bitcode] {
        let Some(p) = rec.part(role) else { continue };
        let mut bytes = vec![0u8; usize::try_from(p.len).unwrap_or(0).min(1 << 30)];
        src.parts
            .read_part_into(role, &mut bytes)
            .map_err(|source| RegressError::Read {
                what: format!("the {role} part of {}", rec.kernel),
                source,
            })?;
        if bitcode::is_bitcode(&bytes) {
            return Ok(bytes);
        }
    }
    Err(RegressError::Usage(format!(
        "{} has no IR to compile (neither its image nor a .bc part is LLVM bitcode): give the IR of its build as an image",
        rec.kernel
    )))
}

/// Bisect the passes for recording `id`; `on_step` sees each step.
pub fn bisect_passes(
    store: &mut Store,
    id: &RecordingId,
    opts: &PassBisectOptions,
    on_step: &mut dyn FnMut(&PassStep),
) -> Result<PassBisectReport, RegressError> {
    let rec = store.recording(id)?;
    let ir = match &opts.ir {
        Some(b) => b.clone(),
        None => recorded_ir(store, id)?,
    };
    let mut ropts = opts.run.clone();
    ropts.use_cache = true;
    let compile_err = |source| {
        RegressError::Replay(ReplayError::Compile {
            kernel: rec.kernel.clone(),
            source,
        })
    };
    let mut compiles = 0u32;
    let mut compile_steps = 0u32;
    let mut build =
        |limit: Option<u64>| -> Result<(ImageOverride, compile::Compiled), RegressError> {
            let mut c = opts.compile.clone();
            c.cflags.push("-mllvm".into());
            c.cflags.push(format!(
                "-opt-bisect-limit={}",
                limit.map_or(-1, |l| l as i64)
            ));
            let out = compile::compile(&ir, &rec.kernel, &c).map_err(compile_err)?;
            compile_steps += 1;
            if !out.provenance.cached {
                compiles += 1;
            }
            let img = ImageOverride::new(out.bytes.clone(), format!("limit {limit:?}"));
            Ok((img, out))
        };
    // The bad end: every pass; its log lists them.
    let (full_img, full) = build(None)?;
    let passes = passes_run(&full.log);
    let total = passes.iter().map(|p| p.number).max().unwrap_or(0);
    // The good end: no optional pass.
    let (zero_img, _) = build(Some(0))?;
    let mut report = PassBisectReport {
        recording: id.to_hex(),
        kernel: rec.kernel.clone(),
        ir: blake3::hash(&ir).to_hex().to_string(),
        compiler_version: full.provenance.compiler_version.clone(),
        flags: opts.compile.cflags.clone(),
        passes: total,
        reference_output: String::new(),
        reference_image: rrstore_format::id::hex(&zero_img.hash),
        steps: Vec::new(),
        culprit: None,
        culprit_image: None,
        last_good_image: None,
        compiles: 0,
        compile_steps: 0,
        replays: 0,
        cached: 0,
    };
    let zero = run(store, id, Some(&zero_img), &ropts)?;
    count(&mut report, &zero);
    let Some(reference) = zero.output else {
        return Err(RegressError::BadReference(format!(
            "the image compiled with no optional pass (-opt-bisect-limit=0) fails on {}: {} {}",
            rec.kernel, zero.verdict, zero.detail
        )));
    };
    report.reference_output = rrstore_format::id::hex(&reference);
    let mut step = |report: &mut PassBisectReport,
                    limit: u64,
                    img: &ImageOverride,
                    cached: bool|
     -> Result<bool, RegressError> {
        let r = run(store, id, Some(img), &ropts)?;
        count(report, &r);
        let good = r.output == Some(reference);
        let s = PassStep {
            step: report.steps.len() + 1,
            limit,
            image: rrstore_format::id::hex(&img.hash),
            compile_cached: cached,
            run: r,
            good,
        };
        on_step(&s);
        report.steps.push(s);
        Ok(good)
    };
    // No pass changed it: done after two compiles.
    if step(&mut report, total, &full_img, full.provenance.cached)? {
        report.compiles = compiles;
        report.compile_steps = compile_steps;
        return Ok(report);
    }
    let (mut lo, mut hi) = (0u64, total);
    let mut lo_img = zero_img.hash;
    let mut hi_img = full_img.hash;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let (img, c) = build(Some(mid))?;
        if step(&mut report, mid, &img, c.provenance.cached)? {
            lo = mid;
            lo_img = img.hash;
        } else {
            hi = mid;
            hi_img = img.hash;
        }
    }
    report.culprit = passes
        .iter()
        .find(|p| p.number == hi)
        .cloned()
        .or(Some(Pass {
            number: hi,
            name: "(not named in the compiler's output)".into(),
            on: String::new(),
        }));
    report.culprit_image = Some(rrstore_format::id::hex(&hi_img));
    report.last_good_image = Some(rrstore_format::id::hex(&lo_img));
    report.compiles = compiles;
    report.compile_steps = compile_steps;
    Ok(report)
}

fn count(report: &mut PassBisectReport, r: &Run) {
    if r.cached {
        report.cached += 1;
    } else {
        report.replays += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bisect_lines_are_parsed_with_names_that_hold_spaces() {
        let log = "BISECT: running pass (1) annotation2metadata on [module]\n\
                   warning: something else\n\
                   BISECT: running pass (438) X86 Atom pad short functions on function (k.omp_outlined)\n\
                   BISECT: NOT running pass (439) x86-fixup-leas on function (k)\n";
        let p = passes_run(log);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].number, 438);
        assert_eq!(p[1].name, "X86 Atom pad short functions");
        assert_eq!(p[1].on, "function (k.omp_outlined)");
    }
}
