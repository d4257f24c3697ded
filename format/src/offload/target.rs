//! Which recordings an offload entry can run: its triple and arch (or, for
//! an ELF image, the ELF itself) as the [`ImageTarget`] recordings are
//! described by, and the rule that pairs the two.

use super::{Entry, ImageKind};
use crate::image::{detect, ImageTarget};

/// The target a triple and arch name, as recordings' images are described;
/// `None` for a triple rrstore does not replay (SPIR-V, ...).
pub fn of_triple(triple: &str, arch: &str) -> Option<ImageTarget> {
    let machine = triple.split('-').next().unwrap_or("");
    match machine {
        "x86_64" => Some(ImageTarget::X86_64),
        "nvptx64" | "nvptx" => arch
            .strip_prefix("sm_")
            .and_then(|sm| sm.trim_end_matches(['a', 'f']).parse().ok())
            .map(|sm| ImageTarget::Cubin { sm }),
        "amdgcn" => {
            let mut parts = arch.split(':');
            let gfx = parts.next().filter(|g| g.starts_with("gfx"))?.to_string();
            let (mut xnack, mut sramecc) = (None, None);
            for f in parts {
                let on = f.ends_with('+');
                match f.trim_end_matches(['+', '-']) {
                    "xnack" => xnack = Some(on),
                    "sramecc" => sramecc = Some(on),
                    _ => {}
                }
            }
            Some(ImageTarget::Amdgpu {
                gfx,
                xnack,
                sramecc,
            })
        }
        _ => None,
    }
}

/// The target of `entry` (image bytes `image`): an ELF says it itself
/// (as a recording's image would); other kinds by their triple and arch.
pub fn of_entry(entry: &Entry, image: &[u8]) -> Option<ImageTarget> {
    if entry.image_kind == ImageKind::Object {
        let t = detect(&image[..image.len().min(4096)]);
        if !matches!(t, ImageTarget::Unknown | ImageTarget::None) {
            return Some(t);
        }
    }
    of_triple(entry.triple(), entry.arch())
}

/// An image built for `image` can run a recording whose image was built
/// for `recorded`: same machine and processor; an AMDGPU feature the image
/// leaves unspecified ("any") serves either setting.
pub fn serves(image: &ImageTarget, recorded: &ImageTarget) -> bool {
    match (image, recorded) {
        (
            ImageTarget::Amdgpu {
                gfx,
                xnack,
                sramecc,
            },
            ImageTarget::Amdgpu {
                gfx: rgfx,
                xnack: rx,
                sramecc: rs,
            },
        ) => {
            let fits = |a: &Option<bool>, b: &Option<bool>| a.is_none() || a == b;
            gfx == rgfx && fits(xnack, rx) && fits(sramecc, rs)
        }
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triples_and_arches_name_the_recordings_targets() {
        assert_eq!(
            of_triple("x86_64-pc-linux-gnu", ""),
            Some(ImageTarget::X86_64)
        );
        assert_eq!(
            of_triple("nvptx64-nvidia-cuda", "sm_90a"),
            Some(ImageTarget::Cubin { sm: 90 })
        );
        assert_eq!(of_triple("nvptx64-nvidia-cuda", ""), None);
        let gfx = of_triple("amdgcn-amd-amdhsa", "gfx90a:xnack+").unwrap();
        assert_eq!(gfx.describe(), "gfx90a:xnack+");
        assert_eq!(of_triple("spirv64-intel", "generic"), None);
        let rec = ImageTarget::Amdgpu {
            gfx: "gfx90a".into(),
            xnack: Some(true),
            sramecc: Some(false),
        };
        assert!(serves(&gfx, &rec));
        assert!(!serves(
            &of_triple("amdgcn-amd-amdhsa", "gfx90a:xnack-").unwrap(),
            &rec
        ));
        assert!(serves(
            &of_triple("amdgcn-amd-amdhsa", "gfx90a").unwrap(),
            &rec
        ));
        assert!(!serves(
            &ImageTarget::X86_64,
            &ImageTarget::Cubin { sm: 90 }
        ));
    }
}
