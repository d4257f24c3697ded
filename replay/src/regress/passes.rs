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
//!
//! With `slower_pct`, a step is also bad when its kernel is slower than
//! the reference's beyond the noise: its median time more than the given
//! percentage above the reference's median, and its fastest repetition
//! slower than the reference's slowest (the two ranges do not overlap).
//!
//! With several toolchains (oldest first), the first toolchain whose
//! image (all passes) changes the output of the first one's is found
//! first, by the same binary search over the list; the passes are then
//! bisected inside it, with the last good toolchain's output as the
//! reference: a culprit at limit 0 means the change happens without any
//! optional pass (the front end's IR handling or code generation).

use rrstore_format::image::bitcode;
use rrstore_format::{PartRole, RecordingId};
use rrstore_store::Store;
use serde::Serialize;

use super::image::{ImageOverride, ImageSet};
use super::lanes::{each_recording, Fleet};
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

/// One toolchain of the list, tried with all its passes.
#[derive(Clone, Debug, Serialize)]
pub struct ToolchainStep {
    pub index: usize,
    pub toolchain: String,
    pub compiler_version: String,
    pub image: String,
    pub run: Run,
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
    /// With several toolchains: each one tried (index into the list, its
    /// `--version` line, the run, good or bad), and the first that
    /// changed the output (whose passes were then bisected).
    pub toolchain_steps: Vec<ToolchainStep>,
    pub toolchain: Option<String>,
    /// The percentage a step's kernel may be slower than the reference's
    /// before it counts as bad (`--slower`).
    pub slower_pct: Option<f64>,
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
    /// The IR to compile (`--image`: each recording takes the entry for
    /// its target, [`ImageSet::pick_ir`]); default: the recording's IR
    /// image or bitcode part.
    pub ir: Option<ImageSet>,
    pub compile: CompileOptions,
    /// Toolchains, oldest first (`--toolchains`): the first that changes
    /// the output is found, then its passes. Fewer than two: the
    /// compile options' toolchain alone.
    pub toolchains: Vec<String>,
    /// `--slower PCT`: a slowdown beyond the noise is bad too.
    pub slower_pct: Option<f64>,
    pub run: RunOptions,
}

/// What a step is compared with: an output, and the kernel times that
/// made it (for `--slower`).
#[derive(Clone)]
struct Reference {
    output: [u8; 32],
    times: Vec<u64>,
}

impl Reference {
    fn of(r: &Run) -> Option<Reference> {
        Some(Reference {
            output: r.output?,
            times: r.kernel_times_ns.clone(),
        })
    }

    /// Whether `r` keeps the reference: the same output and, with
    /// `slower_pct`, no slowdown beyond the noise.
    fn kept_by(&self, r: &Run, slower_pct: Option<f64>) -> bool {
        if r.output != Some(self.output) {
            return false;
        }
        let Some(pct) = slower_pct else {
            return true;
        };
        let (Some(ref_med), Some(med)) = (median(&self.times), median(&r.kernel_times_ns)) else {
            return true;
        };
        let ref_max = self.times.iter().max().copied().unwrap_or(0);
        let min = r.kernel_times_ns.iter().min().copied().unwrap_or(0);
        !(med as f64 > ref_med as f64 * (1.0 + pct / 100.0) && min > ref_max)
    }
}

fn median(v: &[u64]) -> Option<u64> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied()
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
        Some(set) => set.pick_ir(&rec)?.bytes().to_vec(),
        None => recorded_ir(store, id)?,
    };
    let mut ropts = opts.run.clone();
    ropts.use_cache = true;
    let mut report = PassBisectReport {
        recording: id.to_hex(),
        kernel: rec.kernel.clone(),
        ir: blake3::hash(&ir).to_hex().to_string(),
        compiler_version: String::new(),
        flags: opts.compile.cflags.clone(),
        passes: 0,
        toolchain_steps: Vec::new(),
        toolchain: None,
        slower_pct: opts.slower_pct,
        reference_output: String::new(),
        reference_image: String::new(),
        steps: Vec::new(),
        culprit: None,
        culprit_image: None,
        last_good_image: None,
        compiles: 0,
        compile_steps: 0,
        replays: 0,
        cached: 0,
    };
    let mut compile_opts = opts.compile.clone();
    // Several toolchains: the first that changes the output, and the
    // last good one's output as the reference for its passes.
    let mut reference: Option<Reference> = None;
    if opts.toolchains.len() >= 2 {
        match first_changing_toolchain(store, id, &rec.kernel, &ir, opts, &ropts, &mut report)? {
            Some((bad, good_ref)) => {
                compile_opts.toolchain = Some(opts.toolchains[bad].clone());
                report.toolchain = Some(opts.toolchains[bad].clone());
                reference = Some(good_ref);
            }
            None => return Ok(report),
        }
    }
    let kernel = rec.kernel.clone();
    let build = |report: &mut PassBisectReport,
                 limit: Option<u64>|
     -> Result<(ImageOverride, compile::Compiled), RegressError> {
        let mut c = compile_opts.clone();
        c.cflags.push("-mllvm".into());
        c.cflags.push(format!(
            "-opt-bisect-limit={}",
            limit.map_or(-1, |l| l as i64)
        ));
        let out = compile_ir(&ir, &kernel, &c)?;
        report.compile_steps += 1;
        if !out.provenance.cached {
            report.compiles += 1;
        }
        let img = ImageOverride::new(out.bytes.clone(), format!("limit {limit:?}"));
        Ok((img, out))
    };
    // The bad end: every pass; its log lists them.
    let (full_img, full) = build(&mut report, None)?;
    let passes = passes_run(&full.log);
    report.passes = passes.iter().map(|p| p.number).max().unwrap_or(0);
    report.compiler_version = full.provenance.compiler_version.clone();
    // The good end: no optional pass.
    let (zero_img, zero_c) = build(&mut report, Some(0))?;
    report.reference_image = rrstore_format::id::hex(&zero_img.hash);
    let zero = run(store, id, Some(&zero_img), &ropts)?;
    count(&mut report, &zero);
    let reference = match reference {
        Some(r) => r,
        None => Reference::of(&zero).ok_or_else(|| {
            RegressError::BadReference(format!(
                "the image compiled with no optional pass (-opt-bisect-limit=0) fails on {}: {} {}",
                rec.kernel, zero.verdict, zero.detail
            ))
        })?,
    };
    report.reference_output = rrstore_format::id::hex(&reference.output);
    let slower = opts.slower_pct;
    let mut step = |report: &mut PassBisectReport,
                    limit: u64,
                    img: &ImageOverride,
                    cached: bool,
                    r: Option<Run>|
     -> Result<bool, RegressError> {
        let r = match r {
            Some(r) => r,
            None => {
                let r = run(store, id, Some(img), &ropts)?;
                count(report, &r);
                r
            }
        };
        let good = reference.kept_by(&r, slower);
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
    // Against another toolchain's output, limit 0 may already differ.
    if !step(
        &mut report,
        0,
        &zero_img,
        zero_c.provenance.cached,
        Some(zero),
    )? {
        report.culprit = Some(Pass {
            number: 0,
            name: "(no optional pass: the change is in the front end's IR handling or code generation)".into(),
            on: String::new(),
        });
        report.culprit_image = Some(rrstore_format::id::hex(&zero_img.hash));
        return Ok(report);
    }
    // No pass changed it: done after two compiles.
    let total = report.passes;
    if step(&mut report, total, &full_img, full.provenance.cached, None)? {
        return Ok(report);
    }
    let (mut lo, mut hi) = (0u64, report.passes);
    let mut lo_img = zero_img.hash;
    let mut hi_img = full_img.hash;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let (img, c) = build(&mut report, Some(mid))?;
        if step(&mut report, mid, &img, c.provenance.cached, None)? {
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
    Ok(report)
}

fn compile_ir(
    ir: &[u8],
    kernel: &str,
    opts: &CompileOptions,
) -> Result<compile::Compiled, RegressError> {
    compile::compile(ir, kernel, opts).map_err(|source| {
        RegressError::Replay(ReplayError::Compile {
            kernel: kernel.to_string(),
            source,
        })
    })
}

/// The first toolchain of `opts.toolchains` (index >= 1) whose image, all
/// passes run, changes the first one's output (binary search, as image
/// bisection); with the reference its passes are bisected against (the
/// last good toolchain's run). `None`: no toolchain changed it.
fn first_changing_toolchain(
    store: &mut Store,
    id: &RecordingId,
    kernel: &str,
    ir: &[u8],
    opts: &PassBisectOptions,
    ropts: &RunOptions,
    report: &mut PassBisectReport,
) -> Result<Option<(usize, Reference)>, RegressError> {
    let mut try_one = |report: &mut PassBisectReport, i: usize| -> Result<Run, RegressError> {
        let mut c = opts.compile.clone();
        c.toolchain = Some(opts.toolchains[i].clone());
        let out = compile_ir(ir, kernel, &c)?;
        report.compile_steps += 1;
        if !out.provenance.cached {
            report.compiles += 1;
        }
        let img = ImageOverride::new(out.bytes, opts.toolchains[i].clone());
        let r = run(store, id, Some(&img), ropts)?;
        count(report, &r);
        report.toolchain_steps.push(ToolchainStep {
            index: i,
            toolchain: opts.toolchains[i].clone(),
            compiler_version: out.provenance.compiler_version,
            image: rrstore_format::id::hex(&img.hash),
            run: r.clone(),
            good: false,
        });
        Ok(r)
    };
    let first = try_one(report, 0)?;
    let reference = Reference::of(&first).ok_or_else(|| {
        RegressError::BadReference(format!(
            "the first toolchain ({}) fails on {kernel}: {} {}",
            opts.toolchains[0], first.verdict, first.detail
        ))
    })?;
    if let Some(s) = report.toolchain_steps.last_mut() {
        s.good = true;
    }
    let mut good_ref = reference.clone();
    let (mut lo, mut hi) = (0usize, opts.toolchains.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let r = try_one(report, mid)?;
        let good = reference.kept_by(&r, opts.slower_pct);
        if let Some(s) = report.toolchain_steps.last_mut() {
            s.good = good;
        }
        if good {
            lo = mid;
            good_ref = Reference::of(&r).unwrap_or(good_ref);
        } else {
            hi = mid;
        }
    }
    Ok((hi < opts.toolchains.len()).then_some((hi, good_ref)))
}

/// `bisect --passes --label/--kernel`: each of `ids` over the lanes of
/// `fleet`; `done` sees each result in the order of `ids`, and one
/// failure does not stop the others.
pub fn bisect_passes_all(
    store: &mut Store,
    ids: &[RecordingId],
    opts: &PassBisectOptions,
    fleet: &Fleet,
    done: &mut dyn FnMut(usize, Result<PassBisectReport, RegressError>),
) -> Result<(), RegressError> {
    let search = |store: &mut Store, run: &RunOptions, id: &RecordingId| {
        let lane = PassBisectOptions {
            run: run.clone(),
            ..opts.clone()
        };
        bisect_passes(store, id, &lane, &mut |_| {})
    };
    each_recording(store, ids, fleet, &opts.run, &search, done)
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

    fn run_of(output: u8, times: &[u64]) -> Run {
        Run {
            row: 1,
            cached: false,
            image: [0; 32],
            verdict: "verified".into(),
            output: Some([output; 32]),
            kernel_ns: times.iter().min().copied(),
            kernel_times_ns: times.to_vec(),
            launch: String::new(),
            detail: String::new(),
            output_kept: false,
            compiled: None,
            runner_output: Default::default(),
        }
    }

    #[test]
    fn a_slowdown_counts_only_beyond_the_percentage_and_the_noise() {
        let reference = Reference::of(&run_of(1, &[100, 110, 120, 105, 115])).unwrap();
        // Another output: bad, with or without --slower.
        assert!(!reference.kept_by(&run_of(2, &[100; 5]), None));
        assert!(!reference.kept_by(&run_of(2, &[100; 5]), Some(10.0)));
        // Same output, much slower: bad only with --slower.
        let slow = run_of(1, &[200, 210, 220, 205, 215]);
        assert!(reference.kept_by(&slow, None));
        assert!(!reference.kept_by(&slow, Some(50.0)));
        // Slower than the percentage but overlapping the reference's
        // spread: noise, kept.
        let overlapping = run_of(1, &[115, 150, 160, 155, 165]);
        assert!(reference.kept_by(&overlapping, Some(20.0)));
        // Beyond the spread but within the percentage: kept.
        let slightly = run_of(1, &[125, 126, 127, 128, 129]);
        assert!(reference.kept_by(&slightly, Some(20.0)));
        assert!(!reference.kept_by(&slightly, Some(10.0)));
    }

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
