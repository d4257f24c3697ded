//! The compiler invocation for each target, as LLVM's own tools build the
//! image a plugin loads:
//! * `x86_64`: a position-independent shared object linked against libomp
//!   (what clang's offload linker makes of the host device code);
//! * `nvptx64`: PTX assembly for `sm_XX` (the CUDA driver JITs it at load,
//!   so no `ptxas` is needed); with no CUDA installation clang assumes PTX
//!   4.2, so the lowest PTX ISA version the architecture needs is asked for;
//! * `amdgcn`: a code object for `gfxNNN`, linked by `ld.lld` (no device
//!   library: the IR of an offload image is already linked with it).
//!
//! rrstore's flags come first, the user's after them (a later `-O3` wins).

use std::path::Path;

use rrstore_format::image::bitcode::BitcodeInfo;

use super::{CompileError, Toolchain};

/// What to run: flags, and the target the output is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `x86_64`, `nvptx64:sm_90`, `amdgcn:gfx942`: part of the cache key.
    pub target: String,
    /// Every flag before the input (`-x ir IN -o OUT` follow).
    pub flags: Vec<String>,
    /// Flags after the input (libraries to link).
    pub after: Vec<String>,
}

/// Lowest PTX ISA version (x10) each SM needs (NVIDIA's PTX ISA notes).
const PTX_FOR_SM: &[(u32, u32)] = &[
    (120, 87),
    (100, 86),
    (90, 78),
    (89, 78),
    (87, 74),
    (86, 71),
    (80, 70),
    (75, 63),
    (72, 61),
    (70, 60),
    (0, 60),
];

/// The plan for `ir` compiled by `tc` with the user's `cflags`; `arch` is
/// the GPU architecture (ignored for the host).
pub fn plan(
    ir: &BitcodeInfo,
    arch: Option<&str>,
    tc: &Toolchain,
    cflags: &[String],
) -> Result<Plan, CompileError> {
    let triple = ir.triple.clone().unwrap_or_default();
    let mut flags: Vec<String> = vec!["-O2".into()];
    let mut after: Vec<String> = Vec::new();
    let target = match ir.arch() {
        Some("x86_64") => {
            flags.extend(["-fPIC", "-shared"].map(String::from));
            after.push(format!("-L{}", tc.lib().display()));
            after.push("-lomp".into());
            "x86_64".to_string()
        }
        Some("nvptx64") => {
            let sm = arch.ok_or_else(|| CompileError::NoArch {
                triple: triple.clone(),
            })?;
            let n: u32 = sm
                .strip_prefix("sm_")
                .and_then(|d| d.trim_end_matches(['a', 'f']).parse().ok())
                .ok_or_else(|| CompileError::NoArch {
                    triple: triple.clone(),
                })?;
            let ptx = PTX_FOR_SM
                .iter()
                .find(|(min, _)| n >= *min)
                .map_or(60, |(_, p)| *p);
            flags.extend([
                format!("--target={triple}"),
                format!("-march={sm}"),
                "-Xclang".into(),
                "-target-feature".into(),
                "-Xclang".into(),
                format!("+ptx{ptx}"),
                "-S".into(),
            ]);
            format!("nvptx64:{sm}")
        }
        Some("amdgcn") => {
            let gfx = arch.ok_or_else(|| CompileError::NoArch {
                triple: triple.clone(),
            })?;
            flags.extend([
                format!("--target={triple}"),
                format!("-mcpu={gfx}"),
                "-nogpulib".into(),
                "-fuse-ld=lld".into(),
            ]);
            format!("amdgcn:{gfx}")
        }
        _ => return Err(CompileError::UnsupportedTriple { triple }),
    };
    flags.extend(cflags.iter().cloned());
    Ok(Plan {
        target,
        flags,
        after,
    })
}

impl Plan {
    /// The whole argument list for input `ir` and output `out`.
    pub fn args(&self, ir: &Path, out: &Path) -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> = self.flags.iter().map(Into::into).collect();
        a.extend(["-x".into(), "ir".into(), ir.into(), "-o".into(), out.into()]);
        a.extend(self.after.iter().map(Into::into));
        a
    }
}
