//! Which backend runs a replay: the user's choice (`--backend`) and the
//! backend an image's target needs.

use rrstore_format::image::ImageTarget;
use serde::Serialize;

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Auto,
    Host,
    Cuda,
    Hip,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Host => "host",
            BackendKind::Cuda => "cuda",
            BackendKind::Hip => "hip",
        }
    }

    /// The backend that runs images of `target`.
    pub fn for_target(target: &ImageTarget) -> Option<BackendKind> {
        match target {
            ImageTarget::X86_64 => Some(BackendKind::Host),
            ImageTarget::Cubin { .. } | ImageTarget::Ptx { .. } | ImageTarget::Fatbin => {
                Some(BackendKind::Cuda)
            }
            ImageTarget::Amdgpu { .. } => Some(BackendKind::Hip),
            ImageTarget::None | ImageTarget::Unknown => None,
        }
    }

    /// What this backend's device is, for target-mismatch errors.
    pub fn device_words(self) -> &'static str {
        match self {
            BackendKind::Host => "x86_64 (this CPU)",
            BackendKind::Cuda => "cubin/PTX (an NVIDIA GPU)",
            BackendKind::Hip => "AMDGPU code object (an AMD GPU)",
            BackendKind::Auto => "any target",
        }
    }
}
