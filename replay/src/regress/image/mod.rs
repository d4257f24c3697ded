//! Running a recording with another image of the same kernel.
//!
//! [`ImageOverride`] is the engine's only regression hook
//! (`ReplayOptions::image`): the engine picks the backend from the
//! override's target and calls [`ImageOverride::checked_bytes`] instead of
//! reading the recorded image, so the history row records the hash of the
//! image actually run. Host (x86-64 ELF) images are checked up front to
//! export the recording's kernel symbol; GPU images are checked by their
//! backend when loaded.

use std::path::Path;
use std::sync::Arc;

use rrstore_format::image::ImageTarget;
use rrstore_format::Recording;
use rrstore_store::images::ImageInfo;
use rrstore_store::Store;

use super::RegressError;
use crate::ReplayError;

mod set;
pub use set::ImageSet;

/// An image to run instead of the recorded one.
#[derive(Clone, Debug)]
pub struct ImageOverride {
    bytes: Arc<Vec<u8>>,
    pub target: ImageTarget,
    /// blake3 of the bytes.
    pub hash: [u8; 32],
    /// How the user named it (hash prefix, label or file), for messages.
    pub name: String,
}

impl ImageOverride {
    pub fn new(bytes: Vec<u8>, name: impl Into<String>) -> ImageOverride {
        ImageOverride {
            target: rrstore_format::image::detect(&bytes[..bytes.len().min(4096)]),
            hash: *blake3::hash(&bytes).as_bytes(),
            bytes: Arc::new(bytes),
            name: name.into(),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The image bytes, after checking they can run `rec`.
    pub fn checked_bytes(&self, rec: &Recording) -> Result<Vec<u8>, ReplayError> {
        let wrong = |why: String| ReplayError::WrongImage {
            image: format!("{} ({})", self.name, super::short(&self.hash)),
            kernel: rec.kernel.clone(),
            why,
        };
        if self.target == ImageTarget::X86_64 {
            let elf = rrstore_format::image::elf::parse(&self.bytes)
                .map_err(|e| wrong(format!("its ELF cannot be read: {e}")))?;
            if elf.symbol(&rec.kernel).is_none() {
                let kernels: Vec<&str> = elf
                    .symbols
                    .iter()
                    .map(|s| s.name.as_str())
                    .filter(|n| n.starts_with("__omp_offloading_"))
                    .collect();
                return Err(wrong(format!(
                    "it does not export the kernel symbol (it exports {}); the kernel name embeds the source file's device and inode, so rebuild by editing the same file in place",
                    if kernels.is_empty() {
                        "no offload kernel".to_string()
                    } else {
                        kernels.join(", ")
                    }
                )));
            }
        }
        Ok(self.bytes.to_vec())
    }
}

/// An image argument resolved: the stored images it names (one, or the
/// device images of an offload application, which share its label).
#[derive(Clone, Debug)]
pub struct Resolved {
    pub set: ImageSet,
    /// Images added to the store just now (it was given as a file).
    pub added: Vec<ImageInfo>,
}

/// Resolve `spec`: an existing file is added to the store (label: `label`,
/// else its file name; an offload application gives each of its device
/// images) and used; anything else is a stored image's hash prefix or a
/// label.
pub fn resolve(
    store: &mut Store,
    spec: &str,
    label: Option<&str>,
) -> Result<Resolved, RegressError> {
    let path = Path::new(spec);
    let (infos, added) = if path.is_file() {
        let (hash, _) = rrstore_store::objects::hash_file(path)?;
        match (store.image(&hash)?, label) {
            (Some(info), None) => (vec![info], Vec::new()),
            _ => {
                let label = label.map(str::to_string).unwrap_or_else(|| {
                    path.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                });
                let a = store.add_image_file(path, &label)?;
                let added = a
                    .images
                    .iter()
                    .filter(|i| !i.present)
                    .map(|i| i.image.clone())
                    .collect();
                (a.images.into_iter().map(|i| i.image).collect(), added)
            }
        }
    } else {
        (store.resolve_image_set(spec)?, Vec::new())
    };
    let mut images = Vec::new();
    for info in infos {
        let bytes = store.read_object(&info.hash_bytes())?;
        images.push((info, ImageOverride::new(bytes, spec)));
    }
    Ok(Resolved {
        set: ImageSet {
            name: spec.to_string(),
            images,
        },
        added,
    })
}
