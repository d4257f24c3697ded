//! Stand-in programs: shell scripts a test runs where a real program would
//! run (`rrstore record -- PROG`, a tool on `PATH`).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Write `text` (starting `#!/bin/sh`) to `path`, executable.
pub fn write_script(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}
