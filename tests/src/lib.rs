//! rrstore-tests: the test-support crate every crate's tests use (a
//! dev-dependency of format, store, replay and cli). It owns what tests
//! need the same way everywhere: the real recordings in `tests/fixtures/`
//! and copies of them, deterministic noise, ELF headers that name a target,
//! globals tables, C kernels compiled as host images, real OpenMP
//! offload programs built with clang and recorded ([`offload`]), stand-in programs,
//! what a finished process printed (text, JSON), and this host's name as temporary files spell it. It depends on no workspace
//! crate, so the library crates can use it in their unit tests too.

pub mod elf;
pub mod fixtures;
pub mod globals;
pub mod host;
pub mod kernel;
pub mod noise;
pub mod offload;
pub mod output;
pub mod script;

pub use elf::{elf_header, elf_with_symbols};
pub use fixtures::{copy_recording, descriptor_u64, descriptors, fixtures};
pub use globals::{encode_globals, parse_globals, shrink_global};
pub use host::temp_name_host;
pub use kernel::{compile_shared, recording_with_kernel, replace_kernel};
pub use noise::{noise, XorShift};
pub use script::write_script;
