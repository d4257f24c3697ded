//! Picking, for each recording, the image it runs from the images an
//! `--image` argument names: one stored image as is, or, from the device
//! images of an offload application (stored by `image add`, one per
//! offload entry), the one built for the recording's target. LLVM IR
//! images are recognised but not run (issue 41 item 2): a recording
//! whose target only IR serves is refused, naming what there is.

use rrstore_format::image::ImageTarget;
use rrstore_format::offload::target::{of_triple, serves};
use rrstore_format::Recording;
use rrstore_store::image_add::ir_target;
use rrstore_store::images::ImageInfo;

use super::ImageOverride;
use crate::regress::RegressError;

/// The images an image argument names.
#[derive(Clone, Debug)]
pub struct ImageSet {
    /// How the user named them.
    pub name: String,
    pub images: Vec<(ImageInfo, ImageOverride)>,
}

/// What an image of a set can run.
fn target_of(info: &ImageInfo, image: &ImageOverride) -> (Option<ImageTarget>, bool) {
    match ir_target(&info.target) {
        Some((triple, arch)) => (of_triple(triple, arch), true),
        None => (Some(image.target.clone()), false),
    }
}

impl ImageSet {
    /// The only image, when the set holds one that is not IR (it runs
    /// whatever the recording: a mismatch is the backend's to report).
    pub fn single(&self) -> Option<&ImageOverride> {
        match self.images.as_slice() {
            [(info, image)] if ir_target(&info.target).is_none() => Some(image),
            _ => None,
        }
    }

    /// The image `rec` runs.
    pub fn pick(&self, rec: &Recording) -> Result<ImageOverride, RegressError> {
        if let Some(one) = self.single() {
            return Ok(one.clone());
        }
        let recorded = &rec.image_target;
        let (mut elf, mut ir) = (Vec::new(), Vec::new());
        for (info, image) in &self.images {
            let (target, is_ir) = target_of(info, image);
            if target.is_some_and(|t| serves(&t, recorded)) {
                if is_ir {
                    ir.push(info);
                } else {
                    elf.push((info, image));
                }
            }
        }
        elf.dedup_by(|a, b| a.0.hash == b.0.hash);
        match elf.as_slice() {
            [(info, image)] => {
                let mut image = (*image).clone();
                image.name = format!("{} [{}]", self.name, info.target);
                return Ok(image);
            }
            [] => {}
            several => {
                return Err(RegressError::AmbiguousImage {
                    image: self.name.clone(),
                    target: recorded.describe(),
                    candidates: several
                        .iter()
                        .map(|(i, _)| format!("{} {}", i.short(), i.source))
                        .collect(),
                })
            }
        }
        let holds = self
            .images
            .iter()
            .map(|(i, _)| format!("{} ({})", i.target, i.short()))
            .collect::<Vec<_>>()
            .join(", ");
        if !ir.is_empty() {
            return Err(RegressError::IrImage {
                image: self.name.clone(),
                target: recorded.describe(),
                holds,
            });
        }
        Err(RegressError::NoImageForTarget {
            image: self.name.clone(),
            target: recorded.describe(),
            holds,
        })
    }

    /// Hex hash of the one image, or of each, comma-separated.
    pub fn hashes(&self) -> String {
        self.images
            .iter()
            .map(|(i, _)| i.hash.clone())
            .collect::<Vec<_>>()
            .join(",")
    }
}
