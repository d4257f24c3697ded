//! Image target versus device: can this device run this image?
//!
//! * cubin `sm_XY` runs on a device of compute capability X.Z with Z >= Y
//!   (same major; NVIDIA's binary compatibility rule).
//! * PTX `.target sm_XY` is JIT-compiled for any device of capability >= X.Y.
//! * A fatbin carries several images: the driver picks (its error is mapped).
//! * AMDGPU `gfxNNN` must equal the device's gfx (or be a generic target
//!   covering it); xnack/sramecc must agree when both sides state them.

use rrstore_format::image::ImageTarget;

use crate::backend::BackendError;

/// What the device is, as its driver reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceTarget {
    /// NVIDIA compute capability `major.minor`.
    Cuda { major: u32, minor: u32 },
    /// AMD processor from `gcnArchName`, e.g. `gfx942:sramecc+:xnack-`.
    Amd {
        gfx: String,
        xnack: Option<bool>,
        sramecc: Option<bool>,
    },
}

impl DeviceTarget {
    /// Parse a HIP `gcnArchName` (`gfx90a:sramecc+:xnack-`).
    pub fn from_gcn_arch_name(name: &str) -> Self {
        let mut parts = name.trim().split(':');
        let gfx = parts.next().unwrap_or_default().to_string();
        let (mut xnack, mut sramecc) = (None, None);
        for feat in parts {
            let on = match feat.chars().last() {
                Some('+') => Some(true),
                Some('-') => Some(false),
                _ => None,
            };
            match feat.trim_end_matches(['+', '-']) {
                "xnack" => xnack = on,
                "sramecc" => sramecc = on,
                _ => {}
            }
        }
        DeviceTarget::Amd {
            gfx,
            xnack,
            sramecc,
        }
    }

    /// `sm_90`, or `gfx942:sramecc+:xnack-`.
    pub fn describe(&self) -> String {
        match self {
            DeviceTarget::Cuda { major, minor } => format!("sm_{major}{minor}"),
            DeviceTarget::Amd {
                gfx,
                xnack,
                sramecc,
            } => ImageTarget::Amdgpu {
                gfx: gfx.clone(),
                xnack: *xnack,
                sramecc: *sramecc,
            }
            .describe(),
        }
    }
}

impl std::fmt::Display for DeviceTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// `sm_90a` / `sm_100` / `compute_80` -> (major, minor).
fn parse_sm(s: &str) -> Option<(u32, u32)> {
    let digits: String = s
        .trim_start_matches("sm_")
        .trim_start_matches("compute_")
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let n: u32 = digits.parse().ok()?;
    Some((n / 10, n % 10))
}

/// Generic AMDGPU targets and the processors they cover (LLVM AMDGPUUsage).
const AMD_GENERIC: &[(&str, &[&str])] = &[
    (
        "gfx9-generic",
        &["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"],
    ),
    ("gfx9-4-generic", &["gfx940", "gfx941", "gfx942", "gfx950"]),
    (
        "gfx10-1-generic",
        &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    ),
    (
        "gfx10-3-generic",
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    ),
    (
        "gfx11-generic",
        &[
            "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153",
        ],
    ),
    ("gfx12-generic", &["gfx1200", "gfx1201"]),
];

fn gfx_compatible(image: &str, device: &str) -> bool {
    image == device
        || AMD_GENERIC
            .iter()
            .any(|(g, members)| *g == image && members.contains(&device))
}

fn feature_compatible(image: Option<bool>, device: Option<bool>) -> bool {
    match (image, device) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// Ok when `device` can run `image`; otherwise [`BackendError::TargetMismatch`]
/// naming both.
pub fn check(image: &ImageTarget, device: &DeviceTarget) -> Result<(), BackendError> {
    let ok = match (image, device) {
        (ImageTarget::Cubin { sm }, DeviceTarget::Cuda { major, minor }) => {
            sm / 10 == *major && sm % 10 <= *minor
        }
        (ImageTarget::Ptx { target }, DeviceTarget::Cuda { major, minor }) => {
            match target.as_deref().and_then(parse_sm) {
                Some(need) => need <= (*major, *minor),
                None => true,
            }
        }
        (ImageTarget::Fatbin, DeviceTarget::Cuda { .. }) => true,
        (
            ImageTarget::Amdgpu {
                gfx,
                xnack,
                sramecc,
            },
            DeviceTarget::Amd {
                gfx: dgfx,
                xnack: dx,
                sramecc: ds,
            },
        ) => {
            gfx_compatible(gfx, dgfx)
                && feature_compatible(*xnack, *dx)
                && feature_compatible(*sramecc, *ds)
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(BackendError::TargetMismatch {
            image: image.describe(),
            device: device.describe(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rrstore_format::image::detect;

    use rrstore_tests::elf_header as elf;

    const H100: DeviceTarget = DeviceTarget::Cuda { major: 9, minor: 0 };
    const A10: DeviceTarget = DeviceTarget::Cuda { major: 8, minor: 6 };

    #[test]
    fn cubin_from_elf_header_matches_same_major_and_lower_minor() {
        // Old ABI (v7, CUDA < 12.8): SM in the low byte, plus
        // EF_CUDA_64BIT_ADDRESS | EF_CUDA_TEXMODE_UNIFIED as nvcc writes them.
        let sm90_old = detect(&elf(190, 0x0500 | 90 | (90 << 16), 7));
        assert_eq!(sm90_old, ImageTarget::Cubin { sm: 90 });
        check(&sm90_old, &H100).unwrap();
        // New ABI (v8): SM in bits 8..16.
        let sm80_new = detect(&elf(190, 80 << 8, 8));
        assert_eq!(sm80_new, ImageTarget::Cubin { sm: 80 });
        check(&sm80_new, &A10).unwrap();
        let err = check(&sm80_new, &H100).unwrap_err();
        assert!(matches!(err, BackendError::TargetMismatch { .. }));
        assert!(err.to_string().contains("sm_80") && err.to_string().contains("sm_90"));
        assert!(check(&ImageTarget::Cubin { sm: 89 }, &A10).is_err());
    }

    #[test]
    fn ptx_is_forward_compatible_and_fatbin_left_to_the_driver() {
        let ptx = detect(b"//\n.version 8.4\n.target sm_80\n.address_size 64\n");
        check(&ptx, &H100).unwrap();
        check(&ptx, &A10).unwrap();
        let ptx100 = ImageTarget::Ptx {
            target: Some("sm_100a".into()),
        };
        assert!(check(&ptx100, &H100).is_err());
        check(&ImageTarget::Fatbin, &H100).unwrap();
    }

    #[test]
    fn amdgpu_from_elf_header_and_gcn_arch_name() {
        let dev = DeviceTarget::from_gcn_arch_name("gfx942:sramecc+:xnack-");
        assert_eq!(
            dev,
            DeviceTarget::Amd {
                gfx: "gfx942".into(),
                xnack: Some(false),
                sramecc: Some(true)
            }
        );
        assert_eq!(dev.describe(), "gfx942:sramecc+:xnack-");
        // gfx942, xnack any (0x100), sramecc on (0xc00).
        let any_xnack = detect(&elf(224, 0x04c | 0x100 | 0xc00, 2));
        check(&any_xnack, &dev).unwrap();
        // xnack on (0x300) against a device with xnack off.
        let xnack_on = detect(&elf(224, 0x04c | 0x300, 2));
        assert!(check(&xnack_on, &dev).is_err());
        // gfx90a image on gfx942.
        assert!(check(&detect(&elf(224, 0x03f, 2)), &dev).is_err());
        // Generic target covering gfx942.
        let generic = detect(&elf(224, 0x05f, 2));
        check(&generic, &dev).unwrap();
        assert!(check(&generic, &DeviceTarget::from_gcn_arch_name("gfx90a")).is_err());
    }

    #[test]
    fn other_targets_never_match_a_gpu() {
        let host = detect(&elf(62, 0, 0));
        let err = check(&host, &H100).unwrap_err().to_string();
        assert!(err.contains("x86_64") && err.contains("sm_90"), "{err}");
        assert!(check(
            &ImageTarget::Cubin { sm: 90 },
            &DeviceTarget::from_gcn_arch_name("gfx942")
        )
        .is_err());
        assert!(check(&ImageTarget::None, &H100).is_err());
    }
}
