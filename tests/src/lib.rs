//! rrstore-tests: the test-support crate every crate's tests use (a
//! dev-dependency of format, store, replay and cli). It owns what tests
//! need the same way everywhere: where the real recordings in
//! `tests/fixtures/` are, deterministic noise, and ELF headers that name a
//! target, C kernels compiled as host images, and stand-in programs. It depends on no workspace crate, so the library crates can use
//! it in their unit tests too.

pub mod elf;
pub mod fixtures;
pub mod host;
pub mod kernel;
pub mod noise;
pub mod script;

pub use elf::elf_header;
pub use fixtures::{copy_recording, descriptor_u64, descriptors, fixtures};
pub use host::temp_name_host;
pub use kernel::{compile_shared, replace_kernel};
pub use noise::{noise, XorShift};
pub use script::write_script;
