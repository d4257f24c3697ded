//! Why IR could not be compiled: each case names what to do about it.

use std::path::PathBuf;

use rrstore_format::image::bitcode::BitcodeError;

#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("the IR image cannot be read: {0}")]
    Bitcode(BitcodeError),
    #[error("the IR image names no target triple, so rrstore cannot tell what to compile it for")]
    NoTriple,
    #[error("the IR image does not define the kernel `{kernel}` (it was built from another source file or another version of it)")]
    NoKernel { kernel: String },
    #[error(
        "the IR is for `{triple}`, which rrstore cannot compile (x86_64, nvptx64 and amdgcn only)"
    )]
    UnsupportedTriple { triple: String },
    #[error("the IR is for `{triple}` but the recording's kernel ran on {recorded}")]
    WrongTarget { triple: String, recorded: String },
    #[error("the IR is for {triple} and needs a GPU architecture (sm_XX or gfxNNN) to compile for: the recording names none")]
    NoArch { triple: String },
    #[error("no toolchain `{wanted}` was found (looked for {looked})")]
    ToolchainMissing { wanted: String, looked: String },
    #[error("{compiler} is LLVM {have}, older than the IR's producer ({producer}): an LLVM cannot read newer bitcode")]
    ToolchainTooOld {
        compiler: PathBuf,
        have: u32,
        producer: String,
    },
    #[error("cannot tell which LLVM {compiler} is: `--version` printed {printed:?}")]
    ToolchainVersion { compiler: PathBuf, printed: String },
    #[error("{compiler} rejected the flags {flags:?}:\n{stderr}")]
    FlagsRejected {
        compiler: PathBuf,
        flags: Vec<String>,
        stderr: String,
    },
    #[error("{compiler} failed ({status}) compiling the IR:\n{stderr}")]
    Failed {
        compiler: PathBuf,
        status: String,
        stderr: String,
    },
    #[error("{compiler} ran longer than {secs} s and was killed")]
    TimedOut { compiler: PathBuf, secs: u64 },
    #[error("cannot compile: {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}
