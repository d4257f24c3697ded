//! Errors of the format crate. Each names the file, key or byte offset it
//! concerns and what was expected, so the CLI can print it as is.

use std::path::PathBuf;

use crate::chunk::ChunkError;

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}: key `{key}`: {message}")]
    Key {
        path: PathBuf,
        key: String,
        message: String,
    },
    /// An output file exists and replacing it was not asked for.
    #[error("{path} already exists; refusing to overwrite it")]
    Exists { path: PathBuf },
    /// An output path is a symbolic link (never written through).
    #[error("{path} is a symbolic link; refusing to write through it or replace it")]
    Symlink { path: PathBuf },
    /// The output's file system has less space available than the files need.
    #[error("not enough free space in {path}: the files need {needed} bytes, its file system has {available} bytes available; free some space or write elsewhere")]
    NoSpace {
        path: PathBuf,
        needed: u64,
        available: u64,
    },
    /// A part file is a symbolic link leading outside its recording's
    /// directory.
    #[error("{path} is a symbolic link to {target}, outside the recording's directory; refusing to read it")]
    LinkOutside { path: PathBuf, target: PathBuf },
    #[error("{path}: at byte {offset}: {message}")]
    At {
        path: PathBuf,
        offset: u64,
        message: String,
    },
    #[error("{path}: {source}")]
    Chunk {
        path: PathBuf,
        #[source]
        source: ChunkError,
    },
    #[error("{path}: archive format version {found} is not supported by this rrstore (it reads version {supported}); upgrade rrstore to read it")]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// An archive's manifest describes a recording that cannot be (e.g.
    /// more argument values than offsets, a global outside the globals part,
    /// a descriptor saying otherwise): exit code "malformed input".
    #[error("{path}: the archived recording is inconsistent: {source}; the archive was edited or written by a faulty tool, re-create it from the LLVM recording")]
    Inconsistent {
        path: PathBuf,
        #[source]
        source: crate::validate::Inconsistency,
    },
    /// Archived data fails its checksum, is truncated, or points outside the
    /// file (exit code "corrupt").
    #[error("{path}: at byte {offset}: {message}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        message: String,
    },
}

pub type Result<T, E = FormatError> = std::result::Result<T, E>;
