//! Remotes: share recordings through S3-compatible object storage or a
//! directory (`file://`), pushing and pulling only what the other side
//! lacks. Layout and invariants: spec/REMOTE.md.
//!
//! * [`config`]: named remotes of a store (`remote add/ls/rm`).
//! * [`url`]: `s3://BUCKET/PREFIX` and `file:///PATH`.
//! * [`client`]: [`Remote`], an open remote: the object_store client and
//!   its small tokio runtime (`reads`: its LIST and GET requests;
//!   `ranges`: ranged GETs; `trace`: request tracing), opened with the
//!   caller's [`options`] (tracing, test hooks).
//! * By layout version: [`v2`] (object keys and encodings, which version
//!   3 keeps for its blobs, manifests and image entries; a push to a
//!   version 2 remote) and [`v3`] (packs, index objects and their local
//!   cache, the marker, the manifest dictionary; a push into packs).
//!   `blobs`: reading a blob of either layout.
//! * [`tree`]: a part's chunk list as a content-defined tree.
//! * By verb: [`push`] (choosing the layout, and the work lists a push of
//!   either version sends), [`pull`] (its stages in `pull/`), [`list`]
//!   (`ls NAME:`), [`images`] (the image library); `local`: the store
//!   side; `temp`: a file:// remote's temporary files; `dirfs`: a file://
//!   remote's directory, no link followed; [`migrate`]: version 2 to 3
//!   (`deletes`: removing objects, `names`: the only names deleted);
//!   [`lock`]: lock objects; [`prune`]: `rm NAME:ID` and `remote prune`;
//!   [`check`]: `verify NAME:`; [`runs`]: fleet run results.
//! * [`history`]: shared replay history (`history_cache`: the local copy
//!   of a remote's history batches). `local_copy`: what that copy and
//!   the v3 index cache share (a SQLite copy of content-named objects,
//!   refreshed by names).
//! * [`signature`]: signatures of recordings (`push --sign`, `pull
//!   --require-signed-by`).

mod blobs;
pub mod check;
pub mod client;
pub mod config;
mod deletes;
mod dirfs;
pub mod error;
pub mod history;
mod history_cache;
pub mod images;
pub mod list;
mod local;
mod local_copy;
pub mod lock;
pub mod migrate;
mod names;
pub mod options;
pub mod prune;
pub mod pull;
pub mod push;
mod ranges;
mod reads;
pub mod runs;
pub mod signature;
mod temp;
mod trace;
pub mod tree;
pub mod url;
pub mod v2;
pub mod v3;

use serde::Serialize;

pub use client::Remote;
pub use config::RemoteConfig;
pub use error::RemoteError;
pub use history_cache::BadBatch;

/// Progress of a transfer, for a progress bar.
#[derive(Clone, Debug)]
pub enum Event {
    /// A new stage; its size in bytes (uncompressed bytes for pull, bytes
    /// sent for push).
    Start { what: String, total: u64 },
    /// Bytes done in the current stage.
    Bytes(u64),
    /// Something without a size (listing, metadata).
    Phase(String),
    /// A line the user should see even without a terminal or with
    /// `--quiet` (what a push waits for): printed on stderr once.
    Notice(String),
}

/// What a push or pull did. `bytes` = `chunk_bytes` + `metadata_bytes`:
/// object payload bytes moved (HTTP headers and LIST responses excluded).
#[derive(Clone, Debug, Default, Serialize)]
pub struct TransferReport {
    /// Recordings transferred, and their IDs.
    pub recordings: u64,
    pub ids: Vec<String>,
    /// Recordings the other side already had.
    pub present: u64,
    pub present_ids: Vec<String>,
    /// Uncompressed size of the recordings transferred.
    pub logical_bytes: u64,
    /// Chunk objects transferred and their bytes (entry header + stored).
    pub chunks: u64,
    pub chunk_bytes: u64,
    /// Pull: stored (compressed) bytes of the chunks the store lacked.
    pub missing_stored_bytes: u64,
    /// Images of the image library transferred (`--images`), their
    /// hashes, and those the other side already had.
    pub images: u64,
    pub image_hashes: Vec<String>,
    pub images_present: u64,
    /// Manifests, image entries, part objects and chunk-list nodes.
    pub metadata_bytes: u64,
    pub bytes: u64,
    /// Pull: recordings left out because an object they need is corrupt
    /// or missing on the remote (the others were pulled).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<Damaged>,
    /// Push to a file:// remote: stale temporary files of interrupted
    /// pushes removed (spec/REMOTE.md, "Temporary files").
    pub temporaries_removed: u64,
    /// Layout version of the remote (2 or 3).
    pub layout: u32,
    /// Requests made to the remote (spec/REMOTE.md, "Version 3").
    pub requests: u64,
    /// Version 3 push: pack objects and index objects written.
    pub packs: u64,
    pub index_objects: u64,
    /// History rows sent (push) or added to the store (pull), and the
    /// history batches written (push) or read (pull): spec/REMOTE.md,
    /// "Shared history".
    pub history_rows: u64,
    pub history_batches: u64,
    /// Problems that cost no recording (a damaged index object or history
    /// batch left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Pull: `bytes` by what they were for (absent on a push).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<Received>,
}

/// A pull's received payload bytes by kind of object: where the bytes
/// beyond the chunks it lacked go. The fields add up to `bytes`.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Received {
    /// Recording manifests.
    pub manifests: u64,
    /// Part objects (a part's tree top).
    pub parts: u64,
    /// Chunk-list tree nodes.
    pub nodes: u64,
    /// Chunk entries (header plus stored bytes): `chunk_bytes`.
    pub chunks: u64,
    /// Index objects (whole, and ranged lookups), the layout marker.
    pub index: u64,
    /// Bytes between the blobs of a coalesced ranged GET of a pack, read
    /// only to save a request.
    pub gaps: u64,
    /// Images of the image library and anything else.
    pub other: u64,
}

/// A recording a pull could not bring, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Damaged {
    pub id: String,
    /// The error, naming the remote and the damaged object.
    pub reason: String,
}
