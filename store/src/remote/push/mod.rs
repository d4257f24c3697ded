//! `push`: send recordings (and, on request, the image library) to a
//! remote, uploading only the objects it lacks, in dependency order:
//! chunks, then chunk-list nodes (list blocks, then each inner level), then
//! parts, then manifests and image entries, each stage finished before the
//! next starts. A recording or image is visible on the remote only once
//! everything it needs is there; an interrupted push leaves only complete,
//! immutable objects, which the next push finds and skips, and on a
//! file:// remote temporary files, which the next push removes. Last, the
//! history rows of the recordings the remote lacks (`history`).
//!
//! This module chooses the layout and owns what a push of either version
//! shares: `plan`, the work lists (what the remote lacks), and
//! `manifests`, the last stage. How the work is sent is the version's:
//! `v2::push` (an object per blob), `v3::push` (packs, then an index).

pub(in crate::remote) mod manifests;
pub(in crate::remote) mod plan;

use rrstore_format::RecordingId;

use crate::remote::client::Remote;
use crate::remote::error::Result;
use crate::remote::v2::layout;
use crate::remote::{Event, TransferReport};
use crate::Store;

/// Push recordings `ids` of `store` to `remote`, and every image of the
/// store's image library when `images`: in layout version 3 to a version 3
/// or new remote, else in version 2 (spec/REMOTE.md, "Which version").
pub fn push(
    store: &Store,
    remote: &Remote,
    ids: &[RecordingId],
    images: bool,
    progress: &mut dyn FnMut(Event),
) -> Result<TransferReport> {
    progress(Event::Phase("reading the remote's layout".into()));
    let mut version = crate::remote::blobs::layout_version(remote)?;
    if version == 2 {
        let forced = remote.options.keep_layout_2;
        if !forced && remote.list(layout::RECORDINGS)?.is_empty() {
            remote.put(
                crate::remote::v3::MARKER,
                crate::remote::v3::MARKER_BODY.to_vec(),
            )?;
            version = 3;
        }
    }
    // Both layouts' pushes start from a remote without stale temporaries.
    progress(Event::Phase("removing stale temporary files".into()));
    let temporaries_removed = remote.remove_stale_temporaries()?;
    let mut r = if version == 3 {
        crate::remote::v3::push::push(store, remote, ids, images, progress)?
    } else {
        crate::remote::v2::push::push(store, remote, ids, images, progress)?
    };
    r.layout = version;
    r.temporaries_removed = temporaries_removed;
    // Once the recordings are there: rows of recordings a reader cannot
    // see would be of no use (spec/REMOTE.md, "Shared history").
    progress(Event::Phase("sending the replay history".into()));
    let shared = crate::remote::history::push_rows(store, remote, ids)?;
    r.history_rows = shared.rows;
    r.history_batches = shared.batches;
    r.warnings.extend(shared.warnings());
    r.requests = remote.requests.load(std::sync::atomic::Ordering::Relaxed);
    Ok(r)
}
