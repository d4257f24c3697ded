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

/// An image argument resolved to a stored image.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub info: ImageInfo,
    pub image: ImageOverride,
    /// It was given as a file and added to the store just now.
    pub added: bool,
}

/// Resolve `spec`: an existing file is added to the store (label: `label`,
/// else its file name) and used; anything else is a stored image's hash
/// prefix or label.
pub fn resolve(
    store: &mut Store,
    spec: &str,
    label: Option<&str>,
) -> Result<Resolved, RegressError> {
    let path = Path::new(spec);
    let (info, added) = if path.is_file() {
        let (hash, _) = rrstore_store::objects::hash_file(path)?;
        match (store.image(&hash)?, label) {
            (Some(info), None) => (info, false),
            _ => {
                let label = label.map(str::to_string).unwrap_or_else(|| {
                    path.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                });
                let a = store.add_image(path, &label)?;
                (a.image, !a.present)
            }
        }
    } else {
        (store.resolve_image(spec)?, false)
    };
    let bytes = store.read_object(&info.hash_bytes())?;
    let image = ImageOverride::new(bytes, spec);
    Ok(Resolved { info, image, added })
}
