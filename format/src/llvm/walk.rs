//! [`find_recordings`]: the recording descriptors under a directory;
//! [`find_recordings_skipped`] also names the descriptors it passed over.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{FormatError, Result};
use crate::model::PartRole;

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
    super::layouts::LAYOUTS.iter().any(|l| {
        PartRole::ALL
            .iter()
            .any(|r| dir.join(format!("{stem}{}", l.extension(*r))).is_file())
    })
}

/// Descriptor paths under `root`, recursively, sorted. A `.json` next to
/// which no part file (`.memory`, `.record_input`, ...) exists is not a
/// recording and is skipped. Symbolic links to directories are not
/// followed. A path to a `.json` file returns itself.
pub fn find_recordings(root: &Path) -> Result<Vec<PathBuf>> {
    Ok(find_recordings_skipped(root)?.0)
}

/// The descriptor of the one recording under `dir` (a directory holding
/// several, or none, is an error listing what it holds).
pub fn single_recording(dir: &Path) -> Result<PathBuf> {
    let mut found = find_recordings(dir)?;
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(FormatError::Invalid {
            path: dir.to_path_buf(),
            message: no_recording_here(),
        }),
        n => {
            let list: Vec<String> = found
                .iter()
                .take(5)
                .map(|p| format!("  {}", p.display()))
                .collect();
            Err(FormatError::Invalid {
                path: dir.to_path_buf(),
                message: format!(
                    "holds {n} recordings; name one descriptor, e.g.\n{}{}",
                    list.join("\n"),
                    if n > 5 { "\n  ..." } else { "" }
                ),
            })
        }
    }
}

/// A recording descriptor [`find_recordings_skipped`] did not return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub path: PathBuf,
    /// Why, as a sentence fragment.
    pub reason: String,
}

/// [`find_recordings`], and the `.json` files under `root` that are LLVM
/// descriptors but have no part file next to them (LLVM 16-17 write the
/// descriptor before the snapshot, so an interrupted run leaves one). Other
/// `.json` files are not recordings and are not listed.
pub fn find_recordings_skipped(root: &Path) -> Result<(Vec<PathBuf>, Vec<Skipped>)> {
    let meta = fs::metadata(root).map_err(|source| FormatError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    if meta.is_file() {
        return Ok((vec![root.to_path_buf()], Vec::new()));
    }
    let mut out = Vec::new();
    let mut skipped = Vec::new();
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
            } else if path.extension().is_some_and(|e| e == "json") && path.is_file() {
                if is_recording(&path) {
                    out.push(path);
                } else if let Some(reason) = partial(&path) {
                    skipped.push(Skipped { path, reason });
                }
            }
        }
    }
    out.sort();
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((out, skipped))
}

/// Why `json`, with no part file next to it, is a partial recording; None
/// when it is not an LLVM descriptor at all.
fn partial(json: &Path) -> Option<String> {
    let stem = json.file_name()?.to_str()?.strip_suffix(".json")?;
    let mut bytes = Vec::new();
    fs::File::open(json)
        .ok()?
        .take(super::json::MAX_DESCRIPTOR_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    let d = super::json::parse_descriptor(&bytes).ok()?;
    let generation = super::detect::generation(&d, stem).ok()?;
    let snapshot = format!("{stem}{}", super::extension(generation, PartRole::Input));
    Some(format!(
        "an LLVM {generation} descriptor without its input snapshot `{snapshot}` (a partial recording: LLVM writes the descriptor first, so a run that stopped early leaves one)"
    ))
}

/// The message for a directory without a recording: what one looks like
/// (a descriptor next to its input snapshot, in any layout).
pub fn no_recording_here() -> String {
    let inputs: Vec<String> = super::layouts::input_extensions()
        .iter()
        .map(|e| format!("`{e}`"))
        .collect();
    format!(
        "no LLVM recording here (a `.json` descriptor next to its {} files)",
        inputs.join("/")
    )
}
