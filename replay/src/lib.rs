//! `rrstore-replay`: re-runs one recorded kernel launch in isolation.
//!
//! The engine rehydrates the recorded device memory arena at the exact
//! virtual address it was recorded at (pointers inside the snapshot cannot be
//! relocated), restores the globals, loads the image, launches the kernel
//! with the recorded arguments and launch configuration, reads the arena back
//! and compares it with the recorded output.
//!
//! Backends implement [`backend::Backend`]: `host` (x86-64 ELF images of
//! LLVM's host offload target, run in a child process), `cuda` (cudarc,
//! driver loaded at run time) and `hip` (libamdhip64 loaded at run time).

pub mod backend;
