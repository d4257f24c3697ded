//! Errors of remotes. Each names the remote, the URL or the object key it
//! concerns and says what to do; the CLI maps them to exit codes
//! (unreachable / refused / missing bucket: REMOTE, corrupt object: CORRUPT).

use std::path::PathBuf;

use crate::error::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("`{url}` is not a remote URL: {reason} (use s3://BUCKET[/PREFIX] or file:///PATH)")]
    BadUrl { url: String, reason: String },
    #[error("`{0}` is not a remote name: use letters, digits, `.`, `_` and `-` (at most 64)")]
    BadName(String),
    #[error("`{0}` is not a run name: use letters, digits, `.`, `_` and `-` (at most 128, not starting with `.`)")]
    BadRunName(String),
    #[error("no remote named `{0}` (see `rrstore remote ls`; add one with `rrstore remote add NAME URL`)")]
    UnknownRemote(String),
    #[error("a remote named `{0}` already exists (remove it first with `rrstore remote rm {0}`)")]
    RemoteExists(String),
    #[error("remote config {path}: {reason}")]
    Config { path: PathBuf, reason: String },
    /// `detail`: the server's error code and message, or the innermost
    /// cause (e.g. `Connection refused`).
    #[error("remote `{remote}` ({url}): {what} failed: {detail}{hint}")]
    Request {
        remote: String,
        url: String,
        what: String,
        detail: String,
        hint: &'static str,
    },
    #[error("remote `{remote}` ({url}): cannot set up the client: {reason}")]
    Setup {
        remote: String,
        url: String,
        reason: String,
    },
    #[error("remote `{remote}` has no recording matching `{id}` (see `rrstore ls {remote}:`)")]
    NotFound { remote: String, id: String },
    #[error("ID prefix `{prefix}` matches several recordings on remote `{remote}`: {}: give more digits", .candidates.join(", "))]
    Ambiguous {
        remote: String,
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("remote `{remote}`, object {key}: {reason}; the object on the remote is corrupt: remove it there and push again from a store that has the data")]
    Corrupt {
        remote: String,
        key: String,
        reason: String,
    },
    /// A symbolic link or special file under a file:// remote's directory,
    /// or a key that is not the name of an rrstore object about to be
    /// deleted (spec/REMOTE.md, "Links and names"): left alone.
    #[error("remote `{remote}` ({url}): {key} {reason}; rrstore follows no symbolic link under a remote and deletes nothing but its own objects there, so it left {key} alone and stopped: someone with write access to the remote put it there, remove it")]
    Unsafe {
        remote: String,
        url: String,
        key: String,
        reason: String,
    },
    #[error("remote `{remote}` is busy: {reason}")]
    Busy { remote: String, reason: String },
    #[error("remote `{remote}` is layout 2, which cannot be pruned: convert it with `rrstore remote migrate {remote}` first")]
    NotV3 { remote: String },
    #[error("remote index cache {path}: {reason} (it is only a copy: delete it and try again)")]
    Cache { path: PathBuf, reason: String },
    #[error("this rrstore was built without S3 support (cargo feature `s3`): rebuild with it to use {0}")]
    NoS3(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T, E = RemoteError> = std::result::Result<T, E>;

impl RemoteError {
    /// True when the remote could not be reached or refused the request
    /// (exit code REMOTE).
    pub fn is_remote_failure(&self) -> bool {
        matches!(
            self,
            RemoteError::Request { .. }
                | RemoteError::Setup { .. }
                | RemoteError::NoS3(_)
                | RemoteError::Busy { .. }
        )
    }
}
