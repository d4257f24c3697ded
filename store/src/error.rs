//! Errors of the store. Every variant names the store path, recording, part,
//! pack file or byte range it concerns and, where it helps, what to do.

use std::path::PathBuf;

use rrstore_format::{FormatError, PartRole, RecordingId};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot use store directory {path}: {source} (check that it exists and is writable)")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}{}", io_hint(.source))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("store index {path}: {context}: {source}{}", index_hint(.source))]
    Index {
        path: PathBuf,
        context: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("store index {path} has schema version {found}; this rrstore understands up to {supported}: upgrade rrstore")]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    /// The directory is not a store (no marker, no index, no packs).
    #[error("{path} is not an rrstore store ({reason}); check the path, or import into it to create a store there")]
    NotAStore { path: PathBuf, reason: String },
    /// The store is there but its index cannot be used as it is.
    #[error("store index {path} cannot be used: {reason}; the recordings are still in the pack files: repair the index (it is rebuilt from the packs)")]
    IndexUnusable { path: PathBuf, reason: String },
    /// gc found recordings the index does not list (spec/STORE.md).
    #[error("the index of store {dir} does not list {missing} recording(s) whose metadata is in the store (e.g. {example}): gc would delete their data, so it deleted nothing; repair the index first")]
    IndexIncomplete {
        dir: PathBuf,
        missing: u64,
        example: String,
    },
    #[error("no recording matches `{0}` (see `rrstore ls`)")]
    NotFound(String),
    #[error("ID prefix `{prefix}` is ambiguous; it matches {}: give more digits", .candidates.join(", "))]
    Ambiguous {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("`{0}` is not a recording ID prefix: give at least 4 hexadecimal digits")]
    BadPrefix(String),
    /// No stored image (or saved replay output) matches (store/src/images.rs).
    #[error("{0}")]
    ObjectNotFound(String),
    #[error("recording {recording}, {part} part, bytes {start}..{end}: {reason}")]
    CorruptPart {
        recording: RecordingId,
        part: PartRole,
        start: u64,
        end: u64,
        reason: String,
    },
    #[error("pack {path} at byte {offset}: {reason}")]
    CorruptPack {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("recording {recording}: {reason}")]
    CorruptIndex { recording: String, reason: String },
    #[error("recording {recording}, {part} part: the source bytes do not match the recording's manifest ({reason}); was the file changed while importing?")]
    SourceChanged {
        recording: RecordingId,
        part: PartRole,
        reason: String,
    },
    #[error("reading the {part} part of the recording to import failed: {source}")]
    SourceRead {
        part: PartRole,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("cannot read {path}: {source}")]
    Source {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file carries offload binaries that do not parse.
    #[error("{path}: {source}; its device images cannot be read (rebuild it, or add its device images one by one)")]
    Offload {
        path: PathBuf,
        #[source]
        source: rrstore_format::offload::OffloadError,
    },
    /// The file carries no offload binary and is no device image itself.
    #[error("{path} holds no offload image (no `.llvm.offloading` section) and is not a device image itself ({what}); give an application, shared library or object built with `-fopenmp-targets=...`, or a device image (x86-64 ELF, cubin, AMDGPU code object, PTX, fatbin)")]
    NotAnImage { path: PathBuf, what: String },
    #[error("{0}: no LLVM recording (.json with its snapshot files) or .rra archive found under this directory")]
    NoRecordings(PathBuf),
    #[error("{0}")]
    Invalid(String),
    /// No store was named and none can be found from the environment.
    #[error("no store directory: set RRSTORE_DIR or HOME")]
    NoStoreDir,
    /// A read-only index of an older schema (it cannot be migrated).
    #[error("store index {path} has schema version {found} and the store is read-only, so it cannot be upgraded to version {supported}: open the store once where it can be written")]
    OldSchemaReadOnly {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    /// A source file (an LLVM part, an object to store) changed while it
    /// was read.
    #[error("{what}: read {read}, but it had {expected} when it was loaded; was the file changed while importing?")]
    SourceModified {
        what: String,
        read: String,
        expected: String,
    },
    #[error("{path} changed while it was being stored; try again")]
    ObjectChanged { path: PathBuf },
    #[error("invalid chunking parameters: {reason}")]
    ChunkParams { reason: String },
    #[error("tag key `{key}` must be non-empty and contain no `=`")]
    BadTagKey { key: String },
    #[error("`{text}` is not a tag: write KEY=VALUE")]
    BadTag { text: String },
    #[error("recording {recording} has no {part} part")]
    NoSuchPart {
        recording: RecordingId,
        part: PartRole,
    },
    /// A read of a stored part asked for bytes it does not have.
    #[error("the {part} part is {len} bytes: {reason}")]
    BadPartRead {
        part: PartRole,
        len: u64,
        reason: String,
    },
    /// A part's rows in the index do not add up (its chunk list, chunks
    /// or packs).
    #[error("part {part}: {reason}")]
    PartRows { part: String, reason: String },
    /// A chunk a transfer is sending is no longer indexed.
    #[error("chunk {chunk} is not in the store (was it removed by gc while pushing?)")]
    ChunkGone { chunk: String },
    /// A pulled chunk cannot be read back from the pack it was written to.
    #[error("reading back chunk {chunk} of part {part}: {reason}")]
    ReadBack {
        chunk: String,
        part: String,
        reason: String,
    },
    #[error("gc: {left} chunks still point into {path}; pack kept")]
    PackStillUsed { path: PathBuf, left: i64 },
    #[error("cannot encode {what}: {reason}")]
    Encode { what: String, reason: String },
    /// A worker thread died (panic, out of memory).
    #[error("{0}; nothing was committed")]
    Worker(String),
    /// A state the code rules out was reached.
    #[error("internal error: {0}; please report it")]
    Internal(String),
    #[error("the store is busy: {0}; retry when the other rrstore process has finished")]
    Busy(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }

    /// Wrap into an `io::Error` (for the `PartSource` interface); callers can
    /// get it back with `get_ref().downcast_ref::<StoreError>()`.
    pub fn into_io(self) -> std::io::Error {
        let kind = match &self {
            StoreError::CorruptPart { .. } | StoreError::CorruptPack { .. } => {
                std::io::ErrorKind::InvalidData
            }
            StoreError::Io { source, .. } => source.kind(),
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, self)
    }

    /// True when rebuilding the index from the packs (`Store::repair`) is
    /// the fix: the index is missing, empty, foreign, incomplete or damaged.
    pub fn needs_repair(&self) -> bool {
        match self {
            StoreError::IndexUnusable { .. } | StoreError::IndexIncomplete { .. } => true,
            StoreError::Index { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            ),
            _ => false,
        }
    }

    /// True when the store's file system is full (a pack write or the
    /// index hit ENOSPC / SQLITE_FULL, or SQLite could not grow the
    /// index's `-shm` file).
    pub fn is_disk_full(&self) -> bool {
        match self {
            StoreError::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            StoreError::Index { source, .. } => index_full(source),
            _ => false,
        }
    }

    /// True when the error means stored data is corrupt.
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self,
            StoreError::CorruptPart { .. }
                | StoreError::CorruptPack { .. }
                | StoreError::CorruptIndex { .. }
        )
    }
}

/// Whether an index error means the disk is full: SQLITE_FULL, or
/// SQLITE_IOERR_SHMSIZE, which SQLite reports (as "disk I/O error") when
/// its write growing the `-shm` file fails for want of space.
fn index_full(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) || crate::index::is_shm_full(e)
}

/// What to do when the store's disk is full (SQLite reports SQLITE_FULL).
fn index_hint(e: &rusqlite::Error) -> &'static str {
    if index_full(e) {
        return FULL_HINT;
    }
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            " (the index is damaged; the recordings are still in the pack files: repair the index)"
        }
        Some(rusqlite::ErrorCode::ReadOnly) => {
            " (the store is read-only: reading works, writing needs a writable store)"
        }
        _ => "",
    }
}

/// What to do when a pack write hits a full disk (ENOSPC).
fn io_hint(e: &std::io::Error) -> &'static str {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        FULL_HINT
    } else {
        ""
    }
}

const FULL_HINT: &str = " (the file system holding the store is full: free space, or use a store on another file system; recordings already imported are intact)";
