//! Picking, for each recording, the image it runs from the images an
//! `--image` argument names: one stored image as is, or, from the device
//! images of an offload application (stored by `image add`, one per
//! offload entry), the one built for the recording's target: a native
//! image when there is one, else the LLVM IR entry for its triple, which
//! the replay compiles first ([`crate::compile`]).

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
        // Only IR serves the recording: run it compiled (the engine
        // compiles any image that is bitcode).
        if let Some(info) = ir.first() {
            if let Some((_, image)) = self.images.iter().find(|(i, _)| i.hash == info.hash) {
                let mut image = image.clone();
                image.name = format!("{} [{}]", self.name, info.target);
                return Ok(image);
            }
        }
        Err(RegressError::NoImageForTarget {
            image: self.name.clone(),
            target: recorded.describe(),
            holds,
        })
    }

    /// The IR image `rec`'s kernel compiles from (`bisect --passes`): the
    /// set's only image when it is bitcode, else its IR entry for the
    /// recording's triple.
    pub fn pick_ir(&self, rec: &Recording) -> Result<ImageOverride, RegressError> {
        let is_ir = |i: &ImageOverride| i.target == ImageTarget::Bitcode;
        if let [(_, image)] = self.images.as_slice() {
            if is_ir(image) {
                return Ok(image.clone());
            }
        }
        for (info, image) in &self.images {
            let (target, ir) = target_of(info, image);
            if ir && is_ir(image) && target.is_some_and(|t| serves(&t, &rec.image_target)) {
                return Ok(image.clone());
            }
        }
        Err(RegressError::Usage(format!(
            "{} holds no LLVM IR for {} (it holds {}): give the IR of a -fopenmp-target-jit build",
            self.name,
            rec.image_target.describe(),
            self.images
                .iter()
                .map(|(i, _)| i.target.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )))
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
