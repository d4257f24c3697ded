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
/// The store, or an output file, cannot be opened or written (permissions,
/// disk full, locked, index error; an existing output file or a symbolic
/// link at an output name without --force).
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
/// `pull --require-signed-by`: a recording is not signed by a required key,
/// or its signature does not verify.
pub const SIGNATURE: u8 = 21;
/// A GPU driver did not finish initialising in the runner process (or the
/// device listing's child) within RRSTORE_GPU_START_TIMEOUT: it was killed.
pub const DRIVER_START_TIMEOUT: u8 = 22;
/// An IR image's compiler failed: it crashed, reported an error or
/// rejected the flags (`--cflags`).
pub const COMPILE_FAILED: u8 = 24;
/// No compiler can compile an IR image: the toolchain asked for (or the
/// one matching the IR's producer) is missing, or older than the producer.
pub const TOOLCHAIN: u8 = 25;
/// `replay`: the output differs from the recorded output and varies
/// between identical replays (verdict `nondeterministic`): not 1, so a
/// script tells a kernel that computes something else from one whose
/// output is not reproducible without reading JSON.
pub const NONDETERMINISTIC: u8 = 23;
/// Anything else (a bug in rrstore: please report it).
pub const INTERNAL: u8 = 70;
/// Standard output was closed before the command finished (`rrstore
/// history | head -1`): the command stops quietly with 128 + SIGPIPE, the
/// status git and a SIGPIPE-killed ripgrep give, so that `set -o pipefail`
/// still sees that the command did not run to its end.
pub const BROKEN_PIPE: u8 = 141;

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

/// A command line that parses but names nothing (e.g. `check --kernel GLOB`
/// matching no recording): exit code [`NOT_FOUND`].
#[derive(Debug)]
pub struct NotFoundError(pub String);

impl std::fmt::Display for NotFoundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotFoundError {}

/// Whether writing to a closed pipe is what failed, anywhere in the chain
/// (also inside a library error that carries an `io::Error`).
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(|e| e.io_error_kind())
                .is_some_and(|k| k == std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether a panic is `print!`/`println!` failing on a closed stdout
/// (std's message: "failed printing to stdout: Broken pipe (os error 32)").
fn is_broken_pipe_panic(payload: &(dyn std::any::Any + Send)) -> bool {
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe")
}

/// Make a `println!` into a closed pipe end the process quietly with
/// [`BROKEN_PIPE`], as the default SIGPIPE action does for git (Rust ignores
/// SIGPIPE, so the write fails and `println!` panics instead). Exiting from
/// the hook, before any unwinding, is what SIGPIPE would do: the store is
/// safe against a process that stops at any point. Every other panic is
/// reported as before.
pub fn quiet_broken_pipe_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if is_broken_pipe_panic(info.payload()) {
            std::process::exit(i32::from(BROKEN_PIPE));
        }
        default(info);
    }));
}

/// Map an error to its exit code.
pub fn code_for(err: &anyhow::Error) -> u8 {
    use rrstore_format::FormatError;
    if let Some(code) = store_code_for(err) {
        return code;
    }
    for cause in err.chain() {
        if let Some(code) = signing_code_for(cause) {
            return code;
        }
        if cause.downcast_ref::<UsageError>().is_some() {
            return USAGE;
        }
        if cause.downcast_ref::<NotFoundError>().is_some() {
            return NOT_FOUND;
        }
        // A format error also arrives inside the `io::Error` of a part
        // read (an archive's chunk failing its hash mid-replay).
        let format = cause.downcast_ref::<FormatError>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<FormatError>())
        });
        if let Some(e) = format {
            return format_code(e);
        }
        if let Some(e) = cause.downcast_ref::<rrstore_replay::backend::BackendError>() {
            use rrstore_replay::backend::BackendError as B;
            return match e {
                B::Unavailable(_)
                | B::Driver { .. }
                | B::LaunchConfig(_)
                | B::MissingLibrary { .. }
                | B::RunnerGone { .. }
                | B::RunnerReply { .. }
                | B::ArenaCopy { .. } => BACKEND_UNAVAILABLE,
                B::Internal { .. } => INTERNAL,
                B::Reserve { .. } => ADDRESS_UNAVAILABLE,
                B::Image(_) => INVALID_INPUT,
                B::MissingKernel(_) => SYMBOL,
                B::MissingGlobal { .. } | B::GlobalSize { .. } => GLOBAL,
                B::TargetMismatch { .. } => TARGET_MISMATCH,
                B::Crashed { .. } | B::RunnerExited { .. } | B::DeviceFault(_) => CRASHED,
                B::TimedOut(_) => TIMED_OUT,
                B::StartTimedOut { .. } => DRIVER_START_TIMEOUT,
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
                R::PartSize { .. } | R::GlobalBounds { .. } | R::UnknownTarget { .. } => {
                    return INVALID_INPUT
                }
                R::SaveOutput { .. } => return NOT_FOUND,
                R::WrongImage { .. } => return SYMBOL,
                R::Compile { source, .. } => return compile_code(source),
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
                G::NoImageForTarget { .. } => return TARGET_MISMATCH,
                G::AmbiguousImage { .. } => return AMBIGUOUS,
                _ => {}
            }
        }
        if let Some(e) = cause.downcast_ref::<rrstore_replay::fleet::FleetError>() {
            use rrstore_replay::fleet::FleetError as F;
            match e {
                F::BadDevice { .. } | F::BadShard { .. } => return USAGE,
                F::NoDevice { .. } => return BACKEND_UNAVAILABLE,
                F::BadResults { .. } => return CORRUPT,
                F::NoResults { .. } => return NOT_FOUND,
                F::Io { .. } => return STORE,
                // Transparent: the remote error is not in the chain itself.
                F::Remote(r) => {
                    if let Some(code) = remote_code_for(r) {
                        return code;
                    }
                }
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

fn format_code(e: &rrstore_format::FormatError) -> u8 {
    use rrstore_format::FormatError;
    match e {
        FormatError::Io { .. } => NOT_FOUND,
        FormatError::Write { .. }
        | FormatError::Exists { .. }
        | FormatError::Symlink { .. }
        | FormatError::NoSpace { .. } => STORE,
        FormatError::Chunk { .. } | FormatError::Corrupt { .. } => CORRUPT,
        FormatError::UnsupportedVersion { .. } => UNSUPPORTED_VERSION,
        _ => INVALID_INPUT,
    }
}

/// Print `err` with its causes and return its exit code.
pub fn report(err: &anyhow::Error) -> ExitCode {
    // The message may carry names from a recording (crate::shown): no
    // escape sequence, and no line of it but the first starts unindented.
    let msg = message(err);
    if msg.is_empty() {
        eprintln!("error: (no message)");
    } else {
        eprint!("{}", rrstore_report::shown::lines(&msg, "error: ", "  "));
    }
    if needs_repair(err) {
        eprintln!("hint: run `rrstore repair` to rebuild the index from the pack files");
    }
    if let Some(hint) = store_flag_hint(err).or_else(|| replay_flag_hint(err)) {
        eprintln!("hint: {hint}");
    }
    ExitCode::from(code_for(err))
}

/// The command-line way out of a store error (the library names no flags).
fn store_flag_hint(err: &anyhow::Error) -> Option<&'static str> {
    use rrstore_store::StoreError as S;
    let e = err
        .chain()
        .find_map(|c| c.downcast_ref::<rrstore_store::StoreError>())?;
    match e {
        S::Dir { .. } => Some("pass --store DIR to use a store elsewhere"),
        S::NoStoreDir => Some("pass --store DIR to name the store"),
        _ if e.is_disk_full() => Some("pass --store DIR to use a store on another file system"),
        _ => None,
    }
}

/// The exit code of an IR image that could not be compiled.
fn compile_code(e: &rrstore_replay::compile::CompileError) -> u8 {
    use rrstore_replay::compile::CompileError as C;
    match e {
        C::Bitcode(_) | C::NoTriple => INVALID_INPUT,
        C::NoKernel { .. } => SYMBOL,
        C::UnsupportedTriple { .. } | C::WrongTarget { .. } => TARGET_MISMATCH,
        C::NoArch { .. } => USAGE,
        C::ToolchainMissing { .. } | C::ToolchainTooOld { .. } | C::ToolchainVersion { .. } => {
            TOOLCHAIN
        }
        C::FlagsRejected { .. } | C::Failed { .. } | C::Io { .. } => COMPILE_FAILED,
        C::TimedOut { .. } => TIMED_OUT,
    }
}

/// The command-line way out of a replay error (the library names no flags).
fn replay_flag_hint(err: &anyhow::Error) -> Option<&'static str> {
    use rrstore_replay::backend::BackendError as B;
    use rrstore_replay::ReplayError as R;
    let backend = |b: &B| {
        matches!(b, B::TargetMismatch { .. })
            .then_some("--backend auto picks the backend for the image's target")
    };
    err.chain().find_map(|c| {
        if let Some(e) = c.downcast_ref::<R>() {
            return match e {
                R::NoOutput { .. } => {
                    Some("replay without --verify (and --tolerance) to run it unverified")
                }
                R::Limits { .. } => Some("pass --ignore-limits to launch anyway"),
                R::Compile { source, .. } => compile_hint(source),
                R::Backend(b) => backend(b),
                _ => None,
            };
        }
        c.downcast_ref::<B>().and_then(backend)
    })
}

/// The flag that gets past an IR image's compile error.
fn compile_hint(e: &rrstore_replay::compile::CompileError) -> Option<&'static str> {
    use rrstore_replay::compile::CompileError as C;
    match e {
        C::ToolchainMissing { .. } | C::ToolchainTooOld { .. } | C::ToolchainVersion { .. } => Some(
            "install the LLVM the IR was made with (Debian: apt install clang-N) or name one with --toolchain clang-N|PATH",
        ),
        C::FlagsRejected { .. } => Some("drop or fix the --cflags the compiler rejected"),
        C::NoArch { .. } => Some("name the GPU architecture with --arch (sm_90, gfx942)"),
        C::TimedOut { .. } => Some("give the compiler more time with --timeout SECS"),
        _ => None,
    }
}

/// Whether the error is one `rrstore repair` fixes (lost, emptied, foreign
/// or damaged index).
fn needs_repair(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<rrstore_store::StoreError>()
            .is_some_and(|e| e.needs_repair())
    })
}

/// The error and its causes joined by ": ", each cause once: library
/// errors often show their source in their own message too (`cannot read
/// X: <the io error>`), and the chain would repeat it.
fn message(err: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in err.chain() {
        let s = cause.to_string();
        if s.is_empty() || msg.contains(&s) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&s);
    }
    msg
}

/// Store errors (also when carried inside an `io::Error` from a
/// `PartSource`) and `record` failures; checked before the generic mapping.
fn store_code_for(err: &anyhow::Error) -> Option<u8> {
    use rrstore_store::StoreError as S;
    for cause in err.chain() {
        if cause.downcast_ref::<crate::errors::RecordError>().is_some() {
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
            S::IndexUnusable { .. } | S::IndexIncomplete { .. } => STORE,
            S::NotAStore { .. } => NOT_FOUND,
            S::NewerSchema { .. } => UNSUPPORTED_VERSION,
            S::NotFound(_) | S::ObjectNotFound(_) => NOT_FOUND,
            S::Ambiguous { .. } => AMBIGUOUS,
            S::BadPrefix(_) | S::Invalid(_) | S::SourceChanged { .. } => INVALID_INPUT,
            S::NoStoreDir | S::OldSchemaReadOnly { .. } | S::SourceModified { .. } => INVALID_INPUT,
            S::ObjectChanged { .. } | S::ChunkParams { .. } => INVALID_INPUT,
            S::BadTagKey { .. } | S::BadTag { .. } | S::NoSuchPart { .. } => INVALID_INPUT,
            S::BadPartRead { .. } | S::PartRows { .. } | S::ChunkGone { .. } => INVALID_INPUT,
            S::ReadBack { .. } | S::PackStillUsed { .. } | S::Encode { .. } => INVALID_INPUT,
            S::Worker(_) | S::Internal(_) => INVALID_INPUT,
            S::CorruptPart { .. } | S::CorruptPack { .. } | S::CorruptIndex { .. } => CORRUPT,
            S::SourceRead { .. } | S::Source { .. } | S::NoRecordings(_) => NOT_FOUND,
            S::Offload { .. } | S::NotAnImage { .. } => INVALID_INPUT,
            S::Format(f) => format_code(f),
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
        R::BadUrl { .. } | R::BadName(_) | R::BadRunName(_) | R::RemoteExists(_) => INVALID_INPUT,
        R::UnknownRemote(_) | R::NotFound { .. } => NOT_FOUND,
        R::Ambiguous { .. } => AMBIGUOUS,
        R::Config { .. } | R::Cache { .. } => STORE,
        R::Request { .. } | R::Setup { .. } | R::NoS3(_) | R::Busy { .. } => REMOTE,
        R::NotV3 { .. } => INVALID_INPUT,
        R::Corrupt { .. } | R::Unsafe { .. } => CORRUPT,
        R::Store(_) => return None,
    })
}

/// Key files, public keys and refused signatures.
fn signing_code_for(cause: &(dyn std::error::Error + 'static)) -> Option<u8> {
    use rrstore_store::remote::signature::SignatureError;
    use rrstore_store::signing::SigningError as K;
    if let Some(SignatureError::Refused { .. }) = cause.downcast_ref() {
        return Some(SIGNATURE);
    }
    Some(match cause.downcast_ref::<K>()? {
        K::Read { .. } => NOT_FOUND,
        K::BadKeyFile { .. } | K::BadPublicKey { .. } | K::BadName(_) => INVALID_INPUT,
        K::Exists { .. } | K::Write { .. } => STORE,
        K::Random(_) => INTERNAL,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_kernel_fault_is_a_crash_not_an_unavailable_backend() {
        let e = anyhow::Error::new(rrstore_replay::backend::BackendError::DeviceFault(
            "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".into(),
        ));
        assert_eq!(code_for(&e), CRASHED);
    }
}
