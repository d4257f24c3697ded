//! The engine's IR step: finding the image that is LLVM bitcode (`--image`,
//! the recording's `.bc` part with `from_bitcode`, or with `prefer_ir` when
//! it has one, or a recorded image of an `-fopenmp-target-jit` build) and
//! replacing it with its compiled form ([`crate::compile`]) before the
//! backend is chosen.

use rrstore_format::image::bitcode;
use rrstore_format::image::ImageTarget;
use rrstore_format::PartRole;

use super::rehydrate::read_small;
use super::report::ReplayReport;
use super::ReplayOptions;
use crate::compile::{self, CompileError};
use crate::regress::image::ImageOverride;
use crate::source::ReplaySource;
use crate::ReplayError;

/// Whether a replay of `rec` with `opts` (and no image override) runs the
/// recording's `.bc` part compiled: asked for (`from_bitcode`), or the
/// options name a compiler or flags (`prefer_ir`) and the part is there.
pub fn uses_bitcode_part(rec: &rrstore_format::Recording, opts: &ReplayOptions) -> bool {
    opts.image.is_none()
        && rec.part(PartRole::Bitcode).is_some()
        && (opts.compile.from_bitcode || opts.compile.prefer_ir)
}

/// The compiled image to run instead of an IR one, or `None` when the
/// image to run is native.
pub(super) fn compiled_image(
    src: &mut ReplaySource,
    opts: &ReplayOptions,
    report: &mut ReplayReport,
) -> Result<Option<ImageOverride>, ReplayError> {
    let rec = src.recording.clone();
    let (ir, name) = match &opts.image {
        Some(o) if o.target == ImageTarget::Bitcode => (o.bytes().to_vec(), o.name.clone()),
        Some(_) => return Ok(None),
        None if opts.compile.from_bitcode || uses_bitcode_part(&rec, opts) => {
            if rec.part(PartRole::Bitcode).is_none() {
                return Err(ReplayError::NotReplayable {
                    kernel: rec.kernel.clone(),
                    why: "it has no bitcode (.bc) part to compile".into(),
                });
            }
            (
                read_small(src, PartRole::Bitcode)?,
                "its bitcode part".to_string(),
            )
        }
        None if matches!(
            rec.image_target,
            ImageTarget::Bitcode | ImageTarget::Unknown
        ) =>
        {
            let bytes = read_small(src, PartRole::Image)?;
            if !bitcode::is_bitcode(&bytes) {
                return Ok(None);
            }
            (bytes, "its recorded IR image".to_string())
        }
        None => return Ok(None),
    };
    let fail = |source| ReplayError::Compile {
        kernel: rec.kernel.clone(),
        source,
    };
    let info = compile::inspect(&ir, &rec.kernel).map_err(fail)?;
    let ir_arch = info.arch().unwrap_or("").to_string();
    let recorded_arch = match &rec.image_target {
        ImageTarget::X86_64 => Some("x86_64"),
        ImageTarget::Cubin { .. } | ImageTarget::Ptx { .. } | ImageTarget::Fatbin => {
            Some("nvptx64")
        }
        ImageTarget::Amdgpu { .. } => Some("amdgcn"),
        _ => None,
    };
    if let Some(r) = recorded_arch {
        if r != ir_arch {
            return Err(fail(CompileError::WrongTarget {
                triple: info.triple.clone().unwrap_or_default(),
                recorded: rec.image_target.describe(),
            }));
        }
    }
    let mut copts = opts.compile.clone();
    if copts.arch.is_none() {
        copts.arch = match &rec.image_target {
            ImageTarget::Cubin { sm } => Some(format!("sm_{sm}")),
            ImageTarget::Ptx { target: Some(t) } => Some(t.clone()),
            ImageTarget::Amdgpu { gfx, .. } => Some(gfx.clone()),
            _ => None,
        };
    }
    let c = compile::compile(&ir, &rec.kernel, &copts).map_err(fail)?;
    let label = format!(
        "{name} compiled by {}",
        c.provenance.compiler_version.as_str()
    );
    report.compiled = Some(c.provenance);
    Ok(Some(ImageOverride::new(c.bytes, label)))
}
