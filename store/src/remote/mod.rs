//! Remotes: share recordings through S3-compatible object storage or a
//! directory (`file://`), pushing and pulling only what the other side
//! lacks. Layout and invariants: spec/REMOTE.md.
//!
//! * [`config`]: named remotes of a store (`remote add/ls/rm`).
//! * [`url`]: `s3://BUCKET/PREFIX` and `file:///PATH`.
//! * [`backend`]: the object_store client and its small tokio runtime.
//! * [`layout`]: object keys and encodings.
//! * [`push`], [`pull`], [`list`] (`ls NAME:`); `local`: the store side.

pub mod backend;
pub mod config;
pub mod error;
pub mod layout;
pub mod list;
mod local;
pub mod pull;
pub mod push;
pub mod url;

use serde::Serialize;

pub use backend::Backend;
pub use config::RemoteConfig;
pub use error::RemoteError;

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
    /// Manifests, part objects and chunk lists.
    pub metadata_bytes: u64,
    pub bytes: u64,
}
