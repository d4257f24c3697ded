//! Errors of the replay engine. Backend failures keep their
//! [`BackendError`] (the CLI maps each to its own exit code); the rest say
//! what about the recording or the options stops the replay and what to do.

use std::path::PathBuf;

use crate::backend::BackendError;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The recording could not be found or opened.
    #[error(transparent)]
    Format(#[from] rrstore_format::FormatError),
    #[error(transparent)]
    Store(#[from] rrstore_store::StoreError),
    #[error("`{0}` is neither an existing .json/.rra file nor a recording ID prefix (IDs are hexadecimal)")]
    BadSpec(String),
    #[error("recording {kernel} cannot be replayed: {why}; record it again with LLVM 18 or newer (which saves the image and the arena address)")]
    NotReplayable { kernel: String, why: String },
    /// The image is none of the targets a backend runs (x86-64 ELF,
    /// cubin/PTX/fatbin, AMDGPU): malformed input.
    #[error("the image of {kernel} (detected target: {target}) is not a device image any backend runs (x86-64 ELF, cubin, PTX, fatbin or AMDGPU code object); the recording's image is damaged or is not a device image")]
    UnknownTarget { kernel: String, target: String },
    /// Verification was asked for (the CLI hints how not to).
    #[error("recording {kernel} has no output snapshot to verify against; record it with LIBOMPTARGET_RR_SAVE_OUTPUT=1 to get one")]
    NoOutput { kernel: String },
    /// A launch override outside the recorded limits (the CLI hints how to
    /// launch anyway).
    #[error("the {what} {value} is outside the recorded limits [{min}, {max}] ({key})")]
    Limits {
        what: &'static str,
        value: u64,
        min: u64,
        max: u64,
        key: &'static str,
    },
    #[error("tolerance mode: {0}")]
    Tolerance(String),
    #[error("reading the {role} part of {kernel}: {source}")]
    Part {
        kernel: String,
        role: rrstore_format::PartRole,
        #[source]
        source: std::io::Error,
    },
    #[error("the {role} part of {kernel} has {actual} bytes but the arena has {expected}; the recording is inconsistent")]
    PartSize {
        kernel: String,
        role: rrstore_format::PartRole,
        expected: u64,
        actual: u64,
    },
    #[error("global `{name}` of {kernel}: its {size} bytes at offset {offset} lie outside the {len}-byte globals part")]
    GlobalBounds {
        kernel: String,
        name: String,
        offset: u64,
        size: u64,
        len: u64,
    },
    #[error("cannot write the replayed arena to {path}: {source}")]
    SaveOutput {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// An IR image could not be compiled ([`crate::compile`]).
    #[error("compiling the IR image of {kernel}: {source}")]
    Compile {
        kernel: String,
        #[source]
        source: crate::compile::CompileError,
    },
    /// `--image`: the image cannot run this recording (regress/image.rs).
    #[error("image {image} cannot replay {kernel}: {why}")]
    WrongImage {
        image: String,
        kernel: String,
        why: String,
    },
}
