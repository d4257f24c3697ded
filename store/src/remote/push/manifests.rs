//! The last stage of a push of either layout, once everything they name
//! is on the remote: the manifests of the recordings pushed and the image
//! entries of the images pushed, encoded in the remote's layout version.

use crate::remote::client::Remote;
use crate::remote::error::Result;
use crate::remote::v2::layout::{self, ImageEntry, Manifest};
use crate::remote::TransferReport;
use crate::Store;

/// Write the manifests of `recs` and the image entries of `images`, in layout `version`, counted into `report` (their bytes
/// added to `metadata_bytes`).
pub(in crate::remote) fn put_manifests(
    store: &Store,
    remote: &Remote,
    recs: Vec<rrstore_format::Recording>,
    images: Vec<crate::images::ImageInfo>,
    version: u32,
    report: &mut TransferReport,
) -> Result<()> {
    let mut last = Vec::new();
    for rec in recs {
        report.ids.push(rec.id().to_hex());
        last.push(manifest_object(store, rec, version)?);
    }
    report.recordings = last.len() as u64;
    for img in images {
        last.push(image_object(&img, version)?);
        report.images += 1;
        report.image_hashes.push(img.hash);
    }
    let mut meta = 0u64;
    remote.put_all(last.into_iter().map(Ok), &mut |n| meta += n)?;
    report.metadata_bytes += meta;
    Ok(())
}

/// The manifest object of recording `rec` of `store`, in layout `version`.
fn manifest_object(
    store: &Store,
    rec: rrstore_format::Recording,
    version: u32,
) -> Result<(String, Vec<u8>)> {
    let id = rec.id();
    let (label, tags, source, imported_at) = store.xfer_recording_meta(&id)?;
    let m = Manifest {
        version,
        recording: rec,
        label,
        tags,
        source,
        imported_at,
    };
    let body = layout::encode_manifest(&m).map_err(|reason| crate::StoreError::Encode {
        what: format!("the manifest of {id}"),
        reason,
    })?;
    Ok((layout::recording_key(&id), body))
}

/// The image entry object of `img`, in layout `version`.
fn image_object(img: &crate::images::ImageInfo, version: u32) -> Result<(String, Vec<u8>)> {
    let e = ImageEntry {
        version,
        hash: img.hash.clone(),
        len: img.len,
        target: img.target.clone(),
        label: img.label.clone(),
        source: img.source.clone(),
        added_at: img.added_at,
    };
    let body = layout::encode_image(&e).map_err(|reason| crate::StoreError::Encode {
        what: format!("image entry {}", img.hash),
        reason,
    })?;
    Ok((layout::image_key(&img.hash_bytes()), body))
}
