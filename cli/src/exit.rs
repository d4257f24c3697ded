//! Exit codes, one per kind of failure, documented in README.md.
//!
//! Library errors travel up as `anyhow::Error` with context; [`code_for`]
//! walks the error chain and maps the first library error it recognizes.

use std::process::ExitCode;

/// Success (`ExitCode::SUCCESS`); listed so the table is complete.
#[allow(dead_code)]
pub const OK: u8 = 0;
/// Replay output differs from the recorded output; `check` found a
/// regression; `diff` found differences.
pub const MISMATCH: u8 = 1;
/// Bad command line (clap's own code).
pub const USAGE: u8 = 2;
/// A file, directory, recording ID or remote object does not exist or cannot be read.
pub const NOT_FOUND: u8 = 3;
/// Input is malformed: a recording, descriptor, globals table or archive that does not parse or validate.
pub const INVALID_INPUT: u8 = 4;
/// Stored or archived data is corrupt (hash mismatch, truncated pack).
pub const CORRUPT: u8 = 5;
/// An ID prefix matches more than one recording.
pub const AMBIGUOUS: u8 = 6;
/// The store cannot be opened or written (permissions, disk full, locked, index error).
pub const STORE: u8 = 7;
/// The replay backend is not usable here (no driver, missing runtime library).
pub const BACKEND_UNAVAILABLE: u8 = 8;
/// The image's target does not match the backend or device.
pub const TARGET_MISMATCH: u8 = 9;
/// The recorded arena address range cannot be reserved.
pub const ADDRESS_UNAVAILABLE: u8 = 10;
/// Kernel symbol or global missing from the image, or a global's size differs.
pub const SYMBOL: u8 = 11;
/// The kernel crashed during replay.
pub const CRASHED: u8 = 12;
/// The kernel did not finish within --timeout.
pub const TIMED_OUT: u8 = 13;
/// A remote cannot be reached or refused the request.
pub const REMOTE: u8 = 14;
/// `record`: the program wrote no recordings or could not be started.
pub const RECORD: u8 = 15;
/// The archive or store was written by a newer, incompatible rrstore.
pub const UNSUPPORTED_VERSION: u8 = 16;
/// `replay`: a recorded global is not exported by the image, or has another size there.
pub const GLOBAL: u8 = 17;
/// `replay --verify`: the recording has no output snapshot to compare with.
pub const NO_OUTPUT: u8 = 18;
/// `replay`: the recording cannot be replayed (LLVM 16-17: no image, no arena address).
pub const NOT_REPLAYABLE: u8 = 19;
/// `replay`: --num-teams/--num-threads outside the recorded TeamsLimits/ThreadsLimits.
pub const LAUNCH_LIMITS: u8 = 20;
/// Anything else (a bug in rrstore: please report it).
pub const INTERNAL: u8 = 70;

/// A command line that parses but asks for something impossible (e.g.
/// several recordings into one `.rra`): exit code [`USAGE`].
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Map an error to its exit code.
pub fn code_for(err: &anyhow::Error) -> u8 {
    use rrstore_format::FormatError;
    if let Some(code) = store_code_for(err) {
        return code;
    }
    for cause in err.chain() {
        if cause.downcast_ref::<UsageError>().is_some() {
            return USAGE;
        }
        if let Some(e) = cause.downcast_ref::<FormatError>() {
            return match e {
                FormatError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                    NOT_FOUND
                }
                FormatError::Io { .. } => NOT_FOUND,
                FormatError::Write { .. } => STORE,
                FormatError::Chunk { .. } => CORRUPT,
                FormatError::Corrupt { .. } => CORRUPT,
                FormatError::UnsupportedVersion { .. } => UNSUPPORTED_VERSION,
                _ => INVALID_INPUT,
            };
        }
        if let Some(e) = cause.downcast_ref::<rrstore_replay::backend::BackendError>() {
            use rrstore_replay::backend::BackendError as B;
            return match e {
                B::Unavailable(_) | B::Driver { .. } | B::MissingLibrary { .. } => {
                    BACKEND_UNAVAILABLE
                }
                B::Reserve { .. } => ADDRESS_UNAVAILABLE,
                B::Image(_) => INVALID_INPUT,
                B::MissingKernel(_) => SYMBOL,
                B::MissingGlobal { .. } | B::GlobalSize { .. } => GLOBAL,
                B::TargetMismatch { .. } => TARGET_MISMATCH,
                B::Crashed { .. } => CRASHED,
                B::TimedOut(_) => TIMED_OUT,
            };
        }
        if let Some(e) = cause.downcast_ref::<rrstore_replay::ReplayError>() {
            use rrstore_replay::ReplayError as R;
            match e {
                R::NoOutput { .. } => return NO_OUTPUT,
                R::NotReplayable { .. } => return NOT_REPLAYABLE,
                R::Limits { .. } => return LAUNCH_LIMITS,
                R::Tolerance(_) => return USAGE,
                R::BadSpec(_) => return NOT_FOUND,
                R::PartSize { .. } | R::GlobalBounds { .. } => return INVALID_INPUT,
                R::SaveOutput { .. } => return NOT_FOUND,
                R::WrongImage { .. } => return SYMBOL,
                // Wrapped library errors: keep walking the chain.
                _ => {}
            }
        }
        if let Some(e) = cause.downcast_ref::<rrstore_replay::regress::RegressError>() {
            use rrstore_replay::regress::RegressError as G;
            match e {
                G::Usage(_) => return USAGE,
                G::BadReference(_) => return INVALID_INPUT,
                G::Read { .. } => return NOT_FOUND,
                _ => {}
            }
        }
        if let Some(rrstore_report::ReportError::Write { .. }) = cause.downcast_ref() {
            return NOT_FOUND;
        }
        if let Some(e) = cause.downcast_ref::<std::io::Error>() {
            if e.kind() == std::io::ErrorKind::NotFound {
                return NOT_FOUND;
            }
        }
    }
    INTERNAL
}

/// Print `err` with its causes and return its exit code.
pub fn report(err: &anyhow::Error) -> ExitCode {
    eprintln!("error: {err:#}");
    ExitCode::from(code_for(err))
}

/// Store errors (also when carried inside an `io::Error` from a
/// `PartSource`) and `record` failures; checked before the generic mapping.
fn store_code_for(err: &anyhow::Error) -> Option<u8> {
    use rrstore_store::StoreError as S;
    for cause in err.chain() {
        if cause
            .downcast_ref::<crate::commands::record::RecordError>()
            .is_some()
        {
            return Some(RECORD);
        }
        let store = cause.downcast_ref::<S>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<S>())
        });
        if let Some(code) = remote_code_for(cause) {
            return Some(code);
        }
        let Some(e) = store else { continue };
        return Some(match e {
            S::Dir { .. } | S::Io { .. } | S::Index { .. } | S::Busy(_) => STORE,
            S::NewerSchema { .. } => UNSUPPORTED_VERSION,
            S::NotFound(_) | S::ObjectNotFound(_) => NOT_FOUND,
            S::Ambiguous { .. } => AMBIGUOUS,
            S::BadPrefix(_) | S::Invalid(_) | S::SourceChanged { .. } => INVALID_INPUT,
            S::CorruptPart { .. } | S::CorruptPack { .. } | S::CorruptIndex { .. } => CORRUPT,
            S::SourceRead { .. } | S::Source { .. } | S::NoRecordings(_) => NOT_FOUND,
            S::Format(f) => match f {
                rrstore_format::FormatError::Io { .. } => NOT_FOUND,
                rrstore_format::FormatError::Write { .. } => STORE,
                rrstore_format::FormatError::Chunk { .. }
                | rrstore_format::FormatError::Corrupt { .. } => CORRUPT,
                rrstore_format::FormatError::UnsupportedVersion { .. } => UNSUPPORTED_VERSION,
                _ => INVALID_INPUT,
            },
        });
    }
    None
}

/// Remote errors: unreachable, refused or missing bucket -> REMOTE; corrupt
/// remote object -> CORRUPT; store errors inside keep their own codes.
fn remote_code_for(cause: &(dyn std::error::Error + 'static)) -> Option<u8> {
    use rrstore_store::remote::RemoteError as R;
    let e = cause.downcast_ref::<R>()?;
    Some(match e {
        R::BadUrl { .. } | R::BadName(_) | R::RemoteExists(_) => INVALID_INPUT,
        R::UnknownRemote(_) | R::NotFound { .. } => NOT_FOUND,
        R::Ambiguous { .. } => AMBIGUOUS,
        R::Config { .. } => STORE,
        R::Request { .. } | R::Setup { .. } | R::NoS3(_) => REMOTE,
        R::Corrupt { .. } => CORRUPT,
        R::Store(_) => return None,
    })
}
