//! `rrstore-replay`: re-runs one recorded kernel launch in isolation.
//!
//! The engine rehydrates the recorded device memory arena at the exact
//! virtual address it was recorded at (or relocated, with the pointers into
//! it rebased: [`placement`]), restores the globals, loads the image, launches the kernel
//! with the recorded arguments and launch configuration, reads the arena back
//! and compares it with the recorded output.
//!
//! * [`source`]: store ID prefix, `.rra` archive or LLVM `.json` ->
//!   recording + part source.
//! * [`engine`]: the sequence, overrides, repetitions, timing, verdict; it
//!   names no backend.
//! * [`placement`]: recorded or relocated arena, the pointer scan and
//!   the back-translation.
//! * [`verify`]: byte-exact and tolerance comparison.
//! * [`history`]: the replay history row.
//! * [`regress`]: the regression workflow (replay with another image,
//!   check, bisect, diff).
//! * [`fleet`]: devices, shards, lanes and shard results of fleet replay.
//! * [`backend`]: [`backend::Backend`] (with its rehydration contract,
//!   [`backend::rehydrate`]), each backend's configuration and how one is
//!   opened ([`backend::open`]), and the implementations: `host` (x86-64
//!   ELF images of LLVM's host offload target, run in a child process),
//!   `cuda` and `hip`.
//! * [`settings`]: the process-wide settings the caller installs once
//!   (GPU statistics, the GPU start timeout, the runtime search).

pub mod backend;
pub mod compile;
pub mod engine;
pub mod error;
pub mod fleet;
pub mod hash;
pub mod history;
pub mod placement;
pub mod regress;
pub mod sandbox;
pub mod settings;
pub mod source;
pub mod verify;

pub use engine::{
    replay, BackendConfig, BackendKind, Confirmation, RehydratePath, ReplayOptions, ReplayReport,
    ThreadHint, Verdict, VerifyMode, DEFAULT_CONFIRM,
};
pub use error::ReplayError;
pub use source::{Origin, ReplaySource};
