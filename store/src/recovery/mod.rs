//! Recovery metadata beside the packs (`DIR/meta/`): one file per recording
//! (manifest, label, source, import time, tags) and one chunk list per part,
//! so that `repair` can rebuild the index from the pack files. Formats and
//! when each file is written: spec/STORE.md, "Recovery metadata".
//!
//! Files: `sync` makes what a command wrote durable at once (the `meta/`
//! files and deferred index commits), `files` writes, reads and lists the
//! metadata files, `sweep` checks them against the index and removes the
//! chunk lists no recording names (gc).

mod files;
mod sweep;
pub(crate) mod sync;

use std::fs::File;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::layout;

pub use files::{
    list, part_path, read_part, read_recording, recording_path, remove_recording, write_all,
    write_part, write_recording,
};
pub use sweep::unaccounted;
pub use sync::MetaSync;

/// What a recording's metadata file holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecordingMeta {
    /// The `manifests.manifest` bytes (MessagePack of the `Recording`).
    pub manifest: Vec<u8>,
    pub label: String,
    pub source: String,
    pub imported_at: i64,
    pub tags: Vec<(String, String)>,
}

fn index_err(dir: &Path, context: &str) -> impl Fn(rusqlite::Error) -> StoreError {
    let path = dir.join(layout::INDEX_FILE);
    let context = context.to_string();
    move |source| StoreError::Index {
        path: path.clone(),
        context: context.clone(),
        source,
    }
}

/// fsync directory `dir`, so that a rename or unlink in it is durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(dir, e))
}
