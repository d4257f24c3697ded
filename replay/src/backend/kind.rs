//! Which backend runs a replay: the user's choice (`--backend`), the
//! backend an image's target needs, and the table of backend kinds
//! ([`KINDS`]): for each, its name, which images it runs, how its devices
//! are listed, how it is opened, whether it runs in the GPU runner process
//! and, for a GPU backend, the driver that process opens. Opening
//! ([`super::open`]), the GPU runner ([`super::gpu::child`]), the device
//! listing ([`super::devices`]) and the CLI's `--backend` read it; a new
//! backend adds its row here.

use std::time::Duration;

use rrstore_format::image::ImageTarget;
use serde::Serialize;

use super::devices::{self, BackendStatus};
use super::gpu::{cuda, hip};
use super::open::{self, BackendConfig, OpenRequest};
use super::{Backend, BackendError};

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Auto,
    Host,
    Cuda,
    Hip,
}

/// Whether a backend runs in the GPU runner process
/// ([`super::gpu::child`]) when this process can fork one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InChild {
    /// Never (the host backend runs images in a runner process of its own).
    Never,
    /// Always (HIP: ROCm's default handler aborts the process on a GPU
    /// memory fault).
    Always,
    /// When the replay has a timeout (CUDA: a kernel that outlives it is
    /// killed with the child; CUDA reports faults as errors, so without a
    /// timeout it stays in this process, whose staging path was measured).
    WithTimeout,
}

impl InChild {
    /// Whether a replay with `timeout` runs in the child.
    pub fn applies(self, timeout: Option<Duration>) -> bool {
        match self {
            InChild::Never => false,
            InChild::Always => true,
            InChild::WithTimeout => timeout.is_some(),
        }
    }
}

/// A backend made for one replay, or why it could not be.
pub type Opened = Result<Box<dyn Backend>, BackendError>;

/// Makes a GPU backend: device ordinal, recorded arena (base, size),
/// recorder's reservation size.
pub type OpenDevice = fn(u32, Option<(u64, u64)>, Option<u64>) -> Opened;

/// A GPU backend's driver, as the GPU runner process uses it.
pub struct GpuDriver {
    /// Make the real backend on `device` with the recorded arena (base,
    /// size) and the recorder's reservation size (in the child, or here).
    pub open: OpenDevice,
    /// How many devices the driver lists, without touching this process
    /// (a short-lived child: [`super::gpu::driver_guard::in_child`]).
    pub count: fn() -> Result<usize, BackendError>,
}

/// One backend kind: a row of [`KINDS`].
pub struct KindSpec {
    pub kind: BackendKind,
    /// `host`, `cuda`, `hip`: `--backend`, reports, the history.
    pub name: &'static str,
    /// What its device is, for target-mismatch errors.
    pub device_words: &'static str,
    /// Whether it runs images of this target.
    pub runs: fn(&ImageTarget) -> bool,
    /// Whether it is usable here, and its devices (`rrstore devices`).
    pub devices: fn() -> BackendStatus,
    /// Open it for one replay.
    pub open: fn(&BackendConfig, &OpenRequest) -> Opened,
    /// Whether it runs in the GPU runner process.
    pub in_child: InChild,
    /// The driver the GPU runner process opens; `None`: not a GPU backend.
    pub gpu: Option<GpuDriver>,
}

/// Every backend, host first (the order of `rrstore devices`; a device
/// ordinal refers to the first usable GPU backend's devices).
pub static KINDS: [KindSpec; 3] = [
    KindSpec {
        kind: BackendKind::Host,
        name: "host",
        device_words: "x86_64 (this CPU)",
        runs: |t| matches!(t, ImageTarget::X86_64),
        devices: devices::host,
        open: open::host_backend,
        in_child: InChild::Never,
        gpu: None,
    },
    KindSpec {
        kind: BackendKind::Cuda,
        name: "cuda",
        device_words: "cubin/PTX (an NVIDIA GPU)",
        runs: |t| {
            matches!(
                t,
                ImageTarget::Cubin { .. } | ImageTarget::Ptx { .. } | ImageTarget::Fatbin
            )
        },
        devices: devices::cuda,
        open: |config, req| open::gpu_backend(config, BackendKind::Cuda, req),
        in_child: InChild::WithTimeout,
        gpu: Some(GpuDriver {
            open: |device, arena, reserved| {
                let b = cuda::CudaBackend::open(device, arena)?.with_recorded_reservation(reserved);
                Ok(Box::new(b))
            },
            count: || cuda::driver::list().map(|(_, d)| d.len()),
        }),
    },
    KindSpec {
        kind: BackendKind::Hip,
        name: "hip",
        device_words: "AMDGPU code object (an AMD GPU)",
        runs: |t| matches!(t, ImageTarget::Amdgpu { .. }),
        devices: devices::hip,
        open: |config, req| open::gpu_backend(config, BackendKind::Hip, req),
        in_child: InChild::Always,
        gpu: Some(GpuDriver {
            open: |device, arena, reserved| {
                let b = hip::HipBackend::open(device, arena)?.with_recorded_reservation(reserved);
                Ok(Box::new(b))
            },
            count: || hip::list().map(|(_, d)| d.len()),
        }),
    },
];

/// `--backend auto`'s name (not a row: the engine resolves it from the
/// image target, [`BackendKind::for_target`]).
const AUTO: &str = "auto";

impl BackendKind {
    /// This kind's row; `None` for `Auto`.
    pub fn spec(self) -> Option<&'static KindSpec> {
        KINDS.iter().find(|s| s.kind == self)
    }

    /// The kind named `name` (`auto` or a row's name).
    pub fn named(name: &str) -> Option<BackendKind> {
        if name == AUTO {
            return Some(BackendKind::Auto);
        }
        KINDS.iter().find(|s| s.name == name).map(|s| s.kind)
    }

    /// Every name `--backend` takes: `auto`, then the rows'.
    pub fn names() -> impl Iterator<Item = &'static str> {
        std::iter::once(AUTO).chain(KINDS.iter().map(|s| s.name))
    }

    pub fn as_str(self) -> &'static str {
        self.spec().map_or(AUTO, |s| s.name)
    }

    /// The backend that runs images of `target`.
    pub fn for_target(target: &ImageTarget) -> Option<BackendKind> {
        KINDS.iter().find(|s| (s.runs)(target)).map(|s| s.kind)
    }

    /// What this backend's device is, for target-mismatch errors.
    pub fn device_words(self) -> &'static str {
        self.spec().map_or("any target", |s| s.device_words)
    }

    /// Whether this is a GPU backend (it has a driver the GPU runner
    /// process opens).
    pub fn is_gpu(self) -> bool {
        self.spec().is_some_and(|s| s.gpu.is_some())
    }

    /// Whether a replay on this backend with `timeout` runs in the GPU
    /// runner process (when this process can fork one).
    pub fn runs_in_child(self, timeout: Option<Duration>) -> bool {
        self.spec().is_some_and(|s| s.in_child.applies(timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_each_kind_once_host_first() {
        assert_eq!(KINDS[0].kind, BackendKind::Host);
        let names: Vec<_> = BackendKind::names().collect();
        assert_eq!(names, ["auto", "host", "cuda", "hip"]);
        for kind in [
            BackendKind::Auto,
            BackendKind::Host,
            BackendKind::Cuda,
            BackendKind::Hip,
        ] {
            assert_eq!(BackendKind::named(kind.as_str()), Some(kind));
        }
        assert_eq!(BackendKind::named("level-zero"), None);
    }

    #[test]
    fn the_table_says_where_each_backend_runs() {
        let t = Some(Duration::from_secs(1));
        assert!(!BackendKind::Host.runs_in_child(t));
        assert!(BackendKind::Hip.runs_in_child(None));
        assert!(!BackendKind::Cuda.runs_in_child(None));
        assert!(BackendKind::Cuda.runs_in_child(t));
        assert!(!BackendKind::Auto.runs_in_child(t));
        assert!(BackendKind::Cuda.is_gpu() && BackendKind::Hip.is_gpu());
        assert!(!BackendKind::Host.is_gpu() && !BackendKind::Auto.is_gpu());
        assert_eq!(
            BackendKind::for_target(&ImageTarget::Fatbin),
            Some(BackendKind::Cuda)
        );
        assert_eq!(BackendKind::for_target(&ImageTarget::Unknown), None);
    }
}
