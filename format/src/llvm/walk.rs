//! [`find_recordings`]: the recording descriptors under a directory.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{FormatError, Result};
use crate::model::{Generation, PartRole};

/// Extensions whose presence next to `<stem>.json` marks it a recording.
fn is_recording(json: &Path) -> bool {
    let Some(stem) = json
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".json"))
    else {
        return false;
    };
    let dir = json.parent().unwrap_or(Path::new("."));
    [Generation::KernelNamed, Generation::Native]
        .iter()
        .any(|g| {
            PartRole::ALL.iter().any(|r| {
                dir.join(format!("{stem}{}", super::extension(*g, *r)))
                    .is_file()
            })
        })
}

/// Descriptor paths under `root`, recursively, sorted. A `.json` next to
/// which no part file (`.memory`, `.record_input`, ...) exists is not a
/// recording and is skipped. Symbolic links to directories are not
/// followed. A path to a `.json` file returns itself.
pub fn find_recordings(root: &Path) -> Result<Vec<PathBuf>> {
    let meta = fs::metadata(root).map_err(|source| FormatError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    if meta.is_file() {
        return Ok(vec![root.to_path_buf()]);
    }
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = fs::read_dir(&dir).map_err(|source| FormatError::Io {
            path: dir.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| FormatError::Io {
                path: dir.clone(),
                source,
            })?;
            let path = entry.path();
            let ft = entry.file_type().map_err(|source| FormatError::Io {
                path: path.clone(),
                source,
            })?;
            if ft.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json")
                && path.is_file()
                && is_recording(&path)
            {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}
