//! Device image targets: what a recording's `.image` is, read from its bytes.
//!
//! * x86-64 ELF shared object: LLVM's host offload target.
//! * NVIDIA cubin: ELF with `e_machine == EM_CUDA` (190); the SM version is in
//!   `e_flags`.
//! * AMDGPU code object: ELF with `e_machine == EM_AMDGPU` (224); the gfx
//!   processor and the xnack/sramecc feature settings are in `e_flags`.
//! * PTX: text starting with comments/`.version`/`.target`.
//! * CUDA fatbin: magic `0xBA55ED50`.

use serde::{Deserialize, Serialize};

pub mod bitcode;
pub mod elf;
pub mod global_refs;

/// The target an image was built for.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ImageTarget {
    /// The recording has no image (legacy generation).
    #[default]
    None,
    /// x86-64 ELF (LLVM host offload target).
    X86_64,
    /// NVIDIA cubin for `sm_<sm>` (e.g. 90 for sm_90).
    Cubin { sm: u32 },
    /// AMDGPU code object for `gfx` (e.g. "gfx942"), with feature settings
    /// when the code object states them (`Some(true)` = on, `Some(false)` =
    /// off, `None` = any / unsupported).
    Amdgpu {
        gfx: String,
        xnack: Option<bool>,
        sramecc: Option<bool>,
    },
    /// PTX assembly text, with its `.target` (e.g. "sm_90") when found.
    Ptx { target: Option<String> },
    /// CUDA fat binary.
    Fatbin,
    /// LLVM bitcode (IR), compiled to the recording's target before a
    /// replay (`-fopenmp-target-jit` builds record it as their image).
    Bitcode,
    /// Bytes we do not recognize.
    Unknown,
}

impl ImageTarget {
    /// Short name as `ls --target` matches it: `x86_64`, `sm_90`, `gfx942`,
    /// `ptx`, `fatbin`, `unknown`, `none`.
    pub fn short_name(&self) -> String {
        match self {
            ImageTarget::None => "none".into(),
            ImageTarget::X86_64 => "x86_64".into(),
            ImageTarget::Cubin { sm } => format!("sm_{sm}"),
            ImageTarget::Amdgpu { gfx, .. } => gfx.clone(),
            ImageTarget::Ptx { target: Some(t) } => format!("ptx:{t}"),
            ImageTarget::Ptx { target: None } => "ptx".into(),
            ImageTarget::Fatbin => "fatbin".into(),
            ImageTarget::Bitcode => "llvm-ir".into(),
            ImageTarget::Unknown => "unknown".into(),
        }
    }

    /// Long human description (features included).
    pub fn describe(&self) -> String {
        match self {
            ImageTarget::Amdgpu {
                gfx,
                xnack,
                sramecc,
            } => {
                let mut s = gfx.clone();
                if let Some(on) = sramecc {
                    s.push_str(if *on { ":sramecc+" } else { ":sramecc-" });
                }
                if let Some(on) = xnack {
                    s.push_str(if *on { ":xnack+" } else { ":xnack-" });
                }
                s
            }
            ImageTarget::X86_64 => "x86_64 ELF (host offload)".into(),
            other => other.short_name(),
        }
    }
}

impl std::fmt::Display for ImageTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

const EM_X86_64: u16 = 62;
const EM_CUDA: u16 = 190;
const EM_AMDGPU: u16 = 224;

/// Detect the target from the first bytes of an image (64 bytes suffice for
/// ELF; PTX detection looks at up to the first 4 KiB).
pub fn detect(head: &[u8]) -> ImageTarget {
    if bitcode::is_bitcode(head) {
        return ImageTarget::Bitcode;
    }
    if head.len() >= 4 && head[..4] == [0x50, 0xed, 0x55, 0xba] {
        return ImageTarget::Fatbin;
    }
    if head.len() >= 64 && head[..4] == *b"\x7fELF" {
        let little = head[5] == 1;
        if !little {
            return ImageTarget::Unknown;
        }
        let machine = u16::from_le_bytes([head[18], head[19]]);
        let flags = u32::from_le_bytes([head[48], head[49], head[50], head[51]]);
        let abi_version = head[8];
        return match machine {
            EM_X86_64 => ImageTarget::X86_64,
            EM_CUDA => ImageTarget::Cubin {
                sm: cubin_sm(flags, abi_version),
            },
            EM_AMDGPU => amdgpu_target(flags),
            _ => ImageTarget::Unknown,
        };
    }
    detect_ptx(head)
}

/// SM version of a cubin from its ELF flags. Before CUDA 12.8 the low byte
/// holds the SM (`EF_CUDA_SM` mask 0xff); newer cubins (ELF ABI version 8+)
/// keep it in bits 8..16.
fn cubin_sm(flags: u32, abi_version: u8) -> u32 {
    if abi_version >= 8 {
        (flags >> 8) & 0xff
    } else {
        flags & 0xff
    }
}

/// `EF_AMDGPU_MACH_*` values (LLVM `BinaryFormat/ELF.h`) to processor names.
const AMDGPU_MACH: &[(u32, &str)] = &[
    (0x020, "gfx600"),
    (0x021, "gfx601"),
    (0x022, "gfx700"),
    (0x023, "gfx701"),
    (0x024, "gfx702"),
    (0x025, "gfx703"),
    (0x026, "gfx704"),
    (0x028, "gfx801"),
    (0x029, "gfx802"),
    (0x02a, "gfx803"),
    (0x02b, "gfx810"),
    (0x02c, "gfx900"),
    (0x02d, "gfx902"),
    (0x02e, "gfx904"),
    (0x02f, "gfx906"),
    (0x030, "gfx908"),
    (0x031, "gfx909"),
    (0x032, "gfx90c"),
    (0x033, "gfx1010"),
    (0x034, "gfx1011"),
    (0x035, "gfx1012"),
    (0x036, "gfx1030"),
    (0x037, "gfx1031"),
    (0x038, "gfx1032"),
    (0x039, "gfx1033"),
    (0x03a, "gfx602"),
    (0x03b, "gfx705"),
    (0x03c, "gfx805"),
    (0x03d, "gfx1035"),
    (0x03e, "gfx1034"),
    (0x03f, "gfx90a"),
    (0x040, "gfx940"),
    (0x041, "gfx1100"),
    (0x042, "gfx1013"),
    (0x043, "gfx1150"),
    (0x044, "gfx1103"),
    (0x045, "gfx1036"),
    (0x046, "gfx1101"),
    (0x047, "gfx1102"),
    (0x048, "gfx1200"),
    (0x04a, "gfx1151"),
    (0x04b, "gfx941"),
    (0x04c, "gfx942"),
    (0x04e, "gfx1201"),
    (0x04f, "gfx950"),
    (0x051, "gfx9-generic"),
    (0x052, "gfx10-1-generic"),
    (0x053, "gfx10-3-generic"),
    (0x054, "gfx11-generic"),
    (0x055, "gfx1152"),
    (0x058, "gfx1153"),
    (0x059, "gfx12-generic"),
    (0x05f, "gfx9-4-generic"),
];

const EF_AMDGPU_MACH: u32 = 0x0ff;
const EF_AMDGPU_FEATURE_XNACK_V4: u32 = 0x300;
const EF_AMDGPU_FEATURE_SRAMECC_V4: u32 = 0xc00;

fn amdgpu_target(flags: u32) -> ImageTarget {
    let mach = flags & EF_AMDGPU_MACH;
    let gfx = AMDGPU_MACH
        .iter()
        .find(|(m, _)| *m == mach)
        .map(|(_, n)| (*n).to_string())
        .unwrap_or_else(|| format!("gfx-unknown-0x{mach:03x}"));
    // Code object v4+: 0x000 unsupported, 0x100 any, 0x200 off, 0x300 on.
    let setting = |bits: u32| match bits {
        0b10 => Some(false),
        0b11 => Some(true),
        _ => None,
    };
    ImageTarget::Amdgpu {
        gfx,
        xnack: setting((flags & EF_AMDGPU_FEATURE_XNACK_V4) >> 8),
        sramecc: setting((flags & EF_AMDGPU_FEATURE_SRAMECC_V4) >> 10),
    }
}

fn detect_ptx(head: &[u8]) -> ImageTarget {
    let text = match std::str::from_utf8(&head[..head.len().min(4096)]) {
        Ok(t) => t,
        Err(e) => match std::str::from_utf8(&head[..e.valid_up_to()]) {
            Ok(t) if e.valid_up_to() > 0 => t,
            _ => return ImageTarget::Unknown,
        },
    };
    let mut saw_version = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix(".version") {
            saw_version = !rest.trim().is_empty();
        } else if let Some(rest) = line.strip_prefix(".target") {
            if saw_version {
                let t = rest
                    .split(|c: char| c == ',' || c.is_whitespace())
                    .find(|s| !s.is_empty());
                return ImageTarget::Ptx {
                    target: t.map(str::to_string),
                };
            }
        }
    }
    if saw_version {
        ImageTarget::Ptx { target: None }
    } else {
        ImageTarget::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use rrstore_tests::elf_header as elf;

    #[test]
    fn detects_cubin_sm_old_and_new_abi() {
        assert_eq!(
            detect(&elf(190, 0x0050_0550 & 0xffff_ff00 | 90, 7)),
            ImageTarget::Cubin { sm: 90 }
        );
        assert_eq!(detect(&elf(190, 90 << 8, 8)), ImageTarget::Cubin { sm: 90 });
    }

    #[test]
    fn detects_amdgpu_gfx942_with_features() {
        let t = detect(&elf(224, 0x04c | 0x300 | 0x800, 0));
        assert_eq!(
            t,
            ImageTarget::Amdgpu {
                gfx: "gfx942".into(),
                xnack: Some(true),
                sramecc: Some(false)
            }
        );
        assert_eq!(t.describe(), "gfx942:sramecc-:xnack+");
    }

    #[test]
    fn detects_ptx_and_unknown() {
        let ptx = b"//\n// Generated\n.version 8.4\n.target sm_90a\n.address_size 64\n";
        assert_eq!(
            detect(ptx),
            ImageTarget::Ptx {
                target: Some("sm_90a".into())
            }
        );
        assert_eq!(detect(b"hello"), ImageTarget::Unknown);
        assert_eq!(detect(&elf(62, 0, 0)), ImageTarget::X86_64);
    }
}
