//! `rrstore-format`: the plumbing every other rrstore crate builds on.
//!
//! * [`model`]: the normalized [`Recording`] (one recorded kernel launch) that
//!   all three on-disk generations of LLVM's record-replay files map onto.
//! * [`llvm`]: import of those generations from disk (auto-detected) and
//!   byte-exact export back to them, plus cross-layout export.
//! * [`chunk`]: content-defined chunking, blake3 chunk addresses and the zstd
//!   chunk codec shared by the `.rra` archive and the store's pack files.
//! * [`archive`]: the single-file `.rra` archive, version 1 (spec/FORMAT.md).
//! * [`extents`]: where a part's stored bytes lie in files, for readers that
//!   decode a part themselves (the host replay runner).
//! * [`validate`]: consistency checks of a recording's metadata (what an
//!   archive reader refuses).
//! * [`image`]: what kind of device image a recording carries (x86-64 ELF,
//!   cubin sm_XX, AMDGPU gfxNNN, PTX).
//!
//! * [`offload`]: the device images an offload application carries
//!   (LLVM offload binaries in `.llvm.offloading`), read as hostile input.
//! * [`stages`]: thread-seconds and bytes per stage of chunking passes
//!   (what an import's time went to).
//! * [`output`]: output files written all-or-nothing, never through a
//!   symbolic link, never over an existing file unless asked.
//!
//! Nothing here touches a store or a device; it only reads and writes bytes.

pub mod archive;
pub mod chunk;
pub mod cut;
pub mod environment;
pub mod error;
pub mod extents;
pub mod id;
pub mod image;
pub mod inspect;
pub mod llvm;
pub mod model;
pub mod offload;
pub mod output;
pub mod stages;
pub mod validate;
pub(crate) mod zeros;

pub use error::FormatError;
pub use id::RecordingId;
pub use model::{
    Arena, Generation, Global, LaunchConfig, PartInfo, PartRole, PartSource, Recording,
};
