//! `rrstore image add FILE`: what is stored of a file. An executable,
//! shared library or object that carries LLVM offload binaries
//! (`.llvm.offloading`, read by `rrstore_format::offload`) gives one store
//! image per embedded device image, each described by its triple, arch and
//! kind; a file without any is stored whole only when it is itself a device
//! image. The file is parsed completely before anything is written, and a
//! failure while storing its images removes the ones this call added, so a
//! bad file leaves the store as it was.

use std::path::Path;

use rrstore_format::image::{detect, ImageTarget};
use rrstore_format::offload::{container, target, Entry, ImageKind};

use crate::error::{Result, StoreError};
use crate::images::AddedImage;
use crate::Store;

/// The `target` column of an offload entry's image. ELF images are named
/// as recordings' images are (`x86_64`, `sm_90`, `gfx90a`); LLVM IR keeps
/// its triple and arch: `ir:<triple>` or `ir:<triple>:<arch>`
/// ([`ir_target`] reads it back).
pub fn entry_target(entry: &Entry, image: &[u8]) -> String {
    if entry.image_kind == ImageKind::Bitcode {
        return match entry.arch() {
            "" => format!("ir:{}", entry.triple()),
            arch => format!("ir:{}:{arch}", entry.triple()),
        };
    }
    target::of_entry(entry, image).map_or_else(|| "unknown".to_string(), |t| t.short_name())
}

/// The triple and arch of an `ir:` target column, `None` for other images.
pub fn ir_target(target: &str) -> Option<(&str, &str)> {
    let rest = target.strip_prefix("ir:")?;
    Some(rest.split_once(':').unwrap_or((rest, "")))
}

/// What `image add` did with a file.
#[derive(Clone, Debug)]
pub struct AddedFile {
    /// One per stored image, in the file's order.
    pub images: Vec<AddedImage>,
    /// The images came from the file's offload binaries (else: the file).
    pub offload: bool,
}

impl Store {
    /// Store the device images of the file at `path` with `label` (see the
    /// module documentation).
    pub fn add_image_file(&mut self, path: &Path, label: &str) -> Result<AddedFile> {
        let bytes = std::fs::read(path).map_err(|e| StoreError::Source {
            path: path.to_path_buf(),
            source: e,
        })?;
        let found = container::find(&bytes).map_err(|source| StoreError::Offload {
            path: path.to_path_buf(),
            source,
        })?;
        let Some(found) = found else {
            let t = detect(&bytes[..bytes.len().min(4096)]);
            if matches!(t, ImageTarget::Unknown | ImageTarget::None) {
                return Err(StoreError::NotAnImage {
                    path: path.to_path_buf(),
                    what: "its bytes are of no known device target".into(),
                });
            }
            return Ok(AddedFile {
                images: vec![self.add_image(path, label)?],
                offload: false,
            });
        };
        let source = std::fs::canonicalize(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string();
        let entries: Vec<&Entry> = found
            .entries
            .iter()
            .filter(|e| !e.metadata_only() && !e.image.is_empty())
            .collect();
        if entries.is_empty() {
            return Err(StoreError::NotAnImage {
                path: path.to_path_buf(),
                what: "its offload binaries carry metadata only".into(),
            });
        }
        let mut added: Vec<AddedImage> = Vec::new();
        for (n, e) in entries.iter().enumerate() {
            let image = e.image_bytes(&bytes);
            let described = format!(
                "{source} [offload image {n}: {}, arch {}, {}]",
                e.triple(),
                if e.arch().is_empty() { "any" } else { e.arch() },
                e.image_kind.name()
            );
            let target = entry_target(e, image);
            match self.add_image_bytes(path, image, &target, label, &described) {
                Ok(a) => added.push(a),
                Err(err) => {
                    // Nothing half-written: drop what this call added.
                    let ours: Vec<_> = added
                        .iter()
                        .filter(|a| !a.present)
                        .map(|a| a.image.clone())
                        .collect();
                    let _ = self.remove_images(&ours);
                    return Err(err);
                }
            }
        }
        Ok(AddedFile {
            images: added,
            offload: true,
        })
    }
}
