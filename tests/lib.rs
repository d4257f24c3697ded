//! Integration tests live in `tests/tests/`; fixtures in `tests/fixtures/`.
//! This library only locates them.

use std::path::PathBuf;

/// The `tests/fixtures` directory.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}
