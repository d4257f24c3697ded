//! `rrstore diff A B`: compare two recordings (their output snapshots, or
//! `--part input`), or two replay outputs from the history (`h:ROW`), or one
//! of each.
//!
//! Descriptor and argument differences come from the manifests (and the
//! history rows); the arena comparison streams both sides chunk by chunk
//! from the store (1 MiB pieces, bounded memory): differing ranges (see
//! [`crate::verify::ranges`]: each with its span and differing bytes, so the summary and
//! the listed ranges agree) mapped to the argument buffers they fall in,
//! and with `--dtype` the replay verifier's element-wise error statistics.
//!
//! Replay output bytes: `check` and `bisect` keep every run's output in the
//! store (see [`super::run`]). For a history row whose output was not kept
//! (a plain `rrstore replay`), diff re-runs that replay (same recording,
//! same image), keeps its output, and uses it only if its hash equals the
//! one in the history row.

use std::io::Read;

use rrstore_format::{PartRole, Recording};
use rrstore_store::{HistoryEntry, Store};
use serde::Serialize;

use super::image::ImageOverride;
use super::run::{run, RunOptions};
use super::RegressError;
use crate::verify::tolerance::{DType, Tolerance, ToleranceComparer, ToleranceReport};

use crate::verify::ranges::{RangeReport, RangeTally};

const PIECE: usize = 1 << 20;

/// One side of a diff.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    pub spec: String,
    pub recording: String,
    pub kernel: String,
    /// `output`/`input` of a recording, or `replay output (history row N)`.
    pub what: String,
    /// blake3 of the compared bytes.
    pub bytes_blake3: String,
    pub len: u64,
    /// Recorded arena address (for printing `arena+offset` as addresses).
    pub arena_base: Option<u64>,
    /// The history row, for `h:ROW` sides.
    pub history: Option<HistoryEntry>,
    /// Diff re-ran the replay to get these bytes (its new history row).
    pub rerun_row: Option<i64>,
    /// What the re-run's runners printed (none without a re-run).
    #[serde(skip)]
    pub runner_output: crate::sandbox::output::RunnerOutput,
    #[serde(skip)]
    rec: Option<Recording>,
    #[serde(skip)]
    part: [u8; 32],
}

/// A field that differs.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FieldDiff {
    pub field: String,
    pub a: String,
    pub b: String,
}

/// The arena comparison.
#[derive(Clone, Debug, Serialize)]
pub struct ArenaDiff {
    pub compared_bytes: u64,
    pub identical: bool,
    pub mismatch: Option<RangeReport>,
    pub tolerance: Option<ToleranceReport>,
}

/// Everything diff found.
#[derive(Clone, Debug, Serialize)]
pub struct DiffReport {
    pub a: Side,
    pub b: Side,
    pub fields: Vec<FieldDiff>,
    pub arena: ArenaDiff,
    pub identical: bool,
}

/// Diff settings.
#[derive(Clone, Debug)]
pub struct DiffOptions {
    /// Compare this part of recording sides (input or output).
    pub part: PartRole,
    pub dtype: Option<DType>,
    pub rtol: f64,
    pub atol: f64,
    /// Replay options for re-running a row whose output was not kept.
    pub run: RunOptions,
}

/// `h:12` / `h12` -> 12.
pub fn history_row(spec: &str) -> Option<i64> {
    let rest = spec.strip_prefix("h:").or_else(|| spec.strip_prefix('h'))?;
    rest.parse().ok().filter(|n: &i64| *n > 0)
}

fn side(store: &mut Store, spec: &str, opts: &DiffOptions) -> Result<Side, RegressError> {
    if let Some(row) = history_row(spec) {
        let e = store.history_entry(row)?;
        let rec = store.recording(&e.recording)?;
        let (part, rerun_row, runner_output) = match store.saved_output(row)? {
            Some(p) => (p, None, Default::default()),
            None => rerun(store, &e, &rec, opts)?,
        };
        let len = rec.arena.size;
        return Ok(Side {
            spec: spec.to_string(),
            recording: e.recording.to_hex(),
            kernel: rec.kernel.clone(),
            what: format!("replay output (history row {row})"),
            bytes_blake3: rrstore_format::id::hex(&part),
            len,
            arena_base: rec.arena.base,
            history: Some(e),
            rerun_row,
            runner_output,
            rec: Some(rec),
            part,
        });
    }
    let id = store.resolve(spec)?;
    let rec = store.recording(&id)?;
    let info = rec.part(opts.part).cloned().ok_or_else(|| {
        RegressError::Usage(format!(
            "recording {} has no {} snapshot",
            id.short(),
            opts.part
        ))
    })?;
    Ok(Side {
        spec: spec.to_string(),
        recording: id.to_hex(),
        kernel: rec.kernel.clone(),
        what: format!("recorded {}", opts.part),
        bytes_blake3: rrstore_format::id::hex(&info.blake3),
        len: info.len,
        arena_base: rec.arena.base,
        history: None,
        rerun_row: None,
        runner_output: Default::default(),
        rec: Some(rec),
        part: info.blake3,
    })
}

/// Re-run history row `e` keeping its output; the output must hash as the
/// row says.
fn rerun(
    store: &mut Store,
    e: &HistoryEntry,
    rec: &Recording,
    opts: &DiffOptions,
) -> Result<([u8; 32], Option<i64>, crate::sandbox::output::RunnerOutput), RegressError> {
    let expected = e.output_blake3.ok_or_else(|| {
        RegressError::Usage(format!(
            "history row {} has no output ({}): nothing to compare",
            e.id, e.verdict
        ))
    })?;
    let recorded_image = rec.part(PartRole::Image).map(|p| p.blake3);
    let image = if recorded_image == Some(e.image_hash) {
        None
    } else {
        let bytes = store.read_object(&e.image_hash).map_err(|_| {
            RegressError::Usage(format!(
                "history row {} ran image {}, which is not in the store (add it with `rrstore image add`), and its output was not kept",
                e.id,
                super::short(&e.image_hash)
            ))
        })?;
        Some(ImageOverride::new(bytes, super::short(&e.image_hash)))
    };
    let ropts = RunOptions {
        use_cache: false,
        keep_output: true,
        ..opts.run.clone()
    };
    let r = run(store, &e.recording, image.as_ref(), &ropts)?;
    if r.output != Some(expected) {
        return Err(RegressError::BadReference(format!(
            "history row {} kept no output, and re-running it (row {}) gave output {} instead of {} (a nondeterministic kernel?)",
            e.id,
            r.row,
            r.output.map(|h| super::short(&h)).unwrap_or_else(|| r.verdict.clone()),
            super::short(&expected)
        )));
    }
    let part = store.saved_output(r.row)?.ok_or_else(|| {
        RegressError::BadReference(format!("re-run row {} kept no output", r.row))
    })?;
    Ok((part, Some(r.row), r.runner_output))
}

fn push(out: &mut Vec<FieldDiff>, field: &str, a: impl ToString, b: impl ToString) {
    let (a, b) = (a.to_string(), b.to_string());
    if a != b {
        out.push(FieldDiff {
            field: field.to_string(),
            a,
            b,
        });
    }
}

/// An argument value as `arena+0x..` when it points into the arena.
fn arg_text(rec: &Recording, v: u64) -> String {
    match rec.arena.offset_of(v) {
        Some(off) => format!("arena+{off:#x}"),
        None if v == u64::MAX => "-1".into(),
        None => format!("{v:#x}"),
    }
}

fn fields(a: &Side, b: &Side) -> Vec<FieldDiff> {
    let mut out = Vec::new();
    let (Some(ra), Some(rb)) = (&a.rec, &b.rec) else {
        return out;
    };
    push(&mut out, "recording", &a.recording, &b.recording);
    push(&mut out, "kernel", &ra.kernel, &rb.kernel);
    push(&mut out, "generation", ra.generation, rb.generation);
    push(&mut out, "num_args", ra.args.len(), rb.args.len());
    for i in 0..ra.args.len().max(rb.args.len()) {
        let t = |r: &Recording| {
            r.args
                .get(i)
                .map(|v| arg_text(r, *v))
                .unwrap_or_else(|| "-".into())
        };
        push(&mut out, &format!("arg[{i}]"), t(ra), t(rb));
    }
    let opt = |v: Option<u64>| v.map(|x| format!("{x:#x}")).unwrap_or_else(|| "-".into());
    push(
        &mut out,
        "arena.base",
        opt(ra.arena.base),
        opt(rb.arena.base),
    );
    push(&mut out, "arena.size", ra.arena.size, rb.arena.size);
    push(
        &mut out,
        "launch",
        format!("{:?}", ra.launch),
        format!("{:?}", rb.launch),
    );
    let globals = |r: &Recording| {
        r.globals
            .iter()
            .map(|g| format!("{}:{}", g.name, g.size))
            .collect::<Vec<_>>()
            .join(",")
    };
    push(&mut out, "globals", globals(ra), globals(rb));
    push(&mut out, "image_target", &ra.image_target, &rb.image_target);
    for role in [PartRole::Input, PartRole::Globals] {
        let h = |r: &Recording| {
            r.part(role)
                .map(|p| super::short(&p.blake3))
                .unwrap_or_else(|| "-".into())
        };
        push(&mut out, &format!("{role} part"), h(ra), h(rb));
    }
    let image = |s: &Side, r: &Recording| match &s.history {
        Some(e) => super::short(&e.image_hash),
        None => r
            .part(PartRole::Image)
            .map(|p| super::short(&p.blake3))
            .unwrap_or_else(|| "-".into()),
    };
    push(&mut out, "image", image(a, ra), image(b, rb));
    if let (Some(ea), Some(eb)) = (&a.history, &b.history) {
        push(&mut out, "backend", &ea.backend, &eb.backend);
        push(&mut out, "device", &ea.device, &eb.device);
        push(&mut out, "verdict", &ea.verdict, &eb.verdict);
    }
    push(&mut out, "compared", &a.what, &b.what);
    push(&mut out, "bytes", a.len, b.len);
    out
}

fn read_full(r: &mut dyn Read, buf: &mut [u8], what: &str) -> Result<(), RegressError> {
    r.read_exact(buf).map_err(|source| RegressError::Read {
        what: what.to_string(),
        source,
    })
}

/// Compare `a` and `b` (specs as described in the module documentation).
pub fn diff(
    store: &mut Store,
    a: &str,
    b: &str,
    opts: &DiffOptions,
) -> Result<DiffReport, RegressError> {
    let sa = side(store, a, opts)?;
    let sb = side(store, b, opts)?;
    let fields = fields(&sa, &sb);
    let n = sa.len.min(sb.len);
    let rec = sa.rec.as_ref();
    let pointers = rec
        .map(|r| crate::verify::arg_pointers(&r.args, r.arena.base.unwrap_or(0), r.arena.size))
        .unwrap_or_default();
    let mut arena = ArenaDiff {
        compared_bytes: n,
        identical: sa.part == sb.part,
        mismatch: None,
        tolerance: None,
    };
    if !arena.identical || opts.dtype.is_some() {
        let mut exact = RangeTally::new(pointers);
        let mut tol = opts.dtype.map(|dtype| {
            ToleranceComparer::new(Tolerance {
                dtype,
                rtol: opts.rtol,
                atol: opts.atol,
                max_ulp: None,
            })
        });
        let mut ra = store.open_object(&sa.part)?;
        let mut rb = store.open_object(&sb.part)?;
        let mut ba = vec![0u8; PIECE];
        let mut bb = vec![0u8; PIECE];
        let mut off = 0u64;
        while off < n {
            let k = PIECE.min((n - off) as usize);
            read_full(&mut ra, &mut ba[..k], &sa.spec)?;
            read_full(&mut rb, &mut bb[..k], &sb.spec)?;
            exact.feed(&bb[..k], &ba[..k]);
            if let Some(t) = tol.as_mut() {
                t.feed(&bb[..k], &ba[..k]);
            }
            off += k as u64;
        }
        arena.mismatch = exact.finish();
        arena.tolerance = tol.map(|t| t.finish());
        arena.identical = arena.mismatch.is_none() && sa.len == sb.len;
    }
    let identical = arena.identical
        && fields.iter().all(|f| {
            matches!(
                f.field.as_str(),
                "compared" | "recording" | "verdict" | "image" | "backend" | "device"
            )
        });
    Ok(DiffReport {
        a: sa,
        b: sb,
        fields,
        arena,
        identical,
    })
}
