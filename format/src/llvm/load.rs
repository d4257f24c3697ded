//! [`load`]: one recording from its descriptor, validated and hashed;
//! [`load_unhashed`]: the same without reading the parts (lengths only), for
//! writers that hash each part in the one pass they make over it anyway.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;

use super::json::{self, JsonError, MAX_DESCRIPTOR_BYTES};
use super::{detect, extension, layouts, Fields, LlvmRecording};
use crate::error::{FormatError, Result};
use crate::image::{self, ImageTarget};
use crate::model::{Arena, Generation, PartInfo, PartRole, Recording};

const READ_BUF: usize = 1 << 20;

fn invalid(path: &Path, message: impl Into<String>) -> FormatError {
    FormatError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn key_err(path: &Path, key: &str, message: impl Into<String>) -> FormatError {
    FormatError::Key {
        path: path.to_path_buf(),
        key: key.to_string(),
        message: message.into(),
    }
}

fn io_err(path: &Path, source: io::Error) -> FormatError {
    FormatError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn json_err(path: &Path, e: JsonError) -> FormatError {
    match &e {
        JsonError::Missing { key, expected } => {
            key_err(path, key, format!("missing; expected {expected}"))
        }
        JsonError::Type {
            key,
            expected,
            found,
        } => key_err(path, key, format!("expected {expected}, found {found}")),
        _ => invalid(path, e.to_string()),
    }
}

/// Load the recording whose descriptor is `descriptor`, auto-detecting the
/// generation. Parts are hashed by streaming; only the descriptor is read
/// into memory.
pub fn load(descriptor: &Path) -> Result<LlvmRecording> {
    load_mode(descriptor, true, true)
}

/// [`load`] without hashing the parts: every check of [`load`] is made
/// (part lengths come from the file system, the image target from the
/// image's first 4 KiB, the globals table is parsed), but each
/// [`crate::PartInfo::blake3`] is all zeros and `parts_hashed` is false, so
/// the recording has no valid ID yet. Hand it to a writer that fills the
/// hashes in from its own single pass over the parts
/// ([`crate::archive::write_path_unhashed`], the store's importer), or call
/// [`LlvmRecording::hash_parts`].
pub fn load_unhashed(descriptor: &Path) -> Result<LlvmRecording> {
    load_mode(descriptor, false, true)
}

/// [`load`] for callers that replay or describe what they read: unless
/// `follow_symlinks`, a part file that is a symbolic link leading outside
/// the recording's directory is refused ([`FormatError::LinkOutside`]), as
/// by [`load_unhashed_links`].
pub fn load_links(descriptor: &Path, follow_symlinks: bool) -> Result<LlvmRecording> {
    load_mode(descriptor, true, follow_symlinks)
}

/// [`load_unhashed`] for callers that store or share what they read:
/// unless `follow_symlinks`, a part file that is a symbolic link leading
/// outside the recording's directory is refused
/// ([`FormatError::LinkOutside`]), so a `.memory` linked to a system file is
/// never read in. Links inside the directory are always fine.
pub fn load_unhashed_links(descriptor: &Path, follow_symlinks: bool) -> Result<LlvmRecording> {
    load_mode(descriptor, false, follow_symlinks)
}

fn load_mode(descriptor: &Path, hash: bool, follow_symlinks: bool) -> Result<LlvmRecording> {
    let file_name = descriptor
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| {
            invalid(
                descriptor,
                "expected a path to a UTF-8 named .json descriptor",
            )
        })?;
    let stem = file_name
        .strip_suffix(".json")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            invalid(
                descriptor,
                "expected a recording descriptor named <stem>.json",
            )
        })?;
    let bytes = read_descriptor(descriptor)?;
    let d = json::parse_descriptor(&bytes).map_err(|e| json_err(descriptor, e))?;
    let generation = detect::generation(&d, stem).map_err(|m| invalid(descriptor, m))?;
    let f = layouts::of(generation)
        .fields(&d)
        .map_err(|e| json_err(descriptor, e))?;
    check_args(descriptor, &f)?;

    let dir = descriptor.parent().unwrap_or(Path::new("."));
    let mut files = Vec::new();
    let mut parts = Vec::new();
    let mut image_target = ImageTarget::None;
    for role in PartRole::ALL {
        let path = dir.join(format!("{stem}{}", extension(generation, role)));
        match fs::metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Err(invalid(&path, "expected a regular file")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if role == PartRole::Input {
                    return Err(invalid(
                        &path,
                        format!("missing: every {generation} recording has an input snapshot"),
                    ));
                }
                continue;
            }
            Err(e) => return Err(io_err(&path, e)),
        }
        if !follow_symlinks {
            check_link(dir, &path)?;
        }
        let (info, head) = if hash {
            hash_file(&path, role)?
        } else {
            measure_file(&path, role)?
        };
        if role == PartRole::Image {
            image_target = image::detect(&head);
        }
        parts.push(info);
        files.push((role, path));
    }

    let input_len = parts[0].len;
    if let Some(size) = f.memory_size {
        if size != input_len {
            return Err(key_err(
                descriptor,
                "DeviceMemorySize",
                format!(
                    "is {size} but {} has {input_len} bytes; expected them equal",
                    files[0].1.display()
                ),
            ));
        }
    }
    if let Some(out) = parts.iter().find(|p| p.role == PartRole::Output) {
        if out.len != input_len {
            let out_path = &files[1].1;
            return Err(invalid(
                out_path,
                format!(
                    "output snapshot has {} bytes but the input snapshot {} has {input_len}; expected the same size",
                    out.len,
                    files[0].1.display()
                ),
            ));
        }
    }
    if let Some(reserved) = f.reserved {
        if reserved < input_len {
            return Err(key_err(
                descriptor,
                "VAllocSize",
                format!("is {reserved} but the input snapshot has {input_len} bytes; expected at least that"),
            ));
        }
    }

    let globals = match files.iter().find(|(r, _)| *r == PartRole::Globals) {
        Some((_, path)) => read_globals(path, generation)?,
        None => Vec::new(),
    };

    let mut warnings = Vec::new();
    warnings.extend(layouts::of(generation).name_warning(stem, &f));
    warnings.extend(super::argptrs::slot_address_warning(
        generation, &f, input_len,
    ));

    let recording = Recording {
        kernel: f.kernel,
        generation,
        stem: stem.to_string(),
        args: f.args,
        arg_offsets: f.arg_offsets,
        launch: f.launch,
        device_id: f.device_id,
        arena: Arena {
            base: f.arena_base,
            size: input_len,
            reserved: f.reserved,
        },
        globals,
        image_target,
        descriptor: bytes,
        parts,
        // LLVM's files do not say.
        environment: None,
    };
    Ok(LlvmRecording {
        recording,
        descriptor_path: descriptor.to_path_buf(),
        files,
        warnings,
        parts_hashed: hash,
    })
}

/// Refuse `path` if it is a symbolic link whose target lies outside `dir`.
fn check_link(dir: &Path, path: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(path).map_err(|e| io_err(path, e))?;
    if !meta.file_type().is_symlink() {
        return Ok(());
    }
    let target = fs::canonicalize(path).map_err(|e| io_err(path, e))?;
    let dir = fs::canonicalize(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    })
    .map_err(|e| io_err(dir, e))?;
    if target.starts_with(&dir) {
        return Ok(());
    }
    Err(FormatError::LinkOutside {
        path: path.to_path_buf(),
        target,
    })
}

fn read_descriptor(path: &Path) -> Result<Vec<u8>> {
    let f = File::open(path).map_err(|e| io_err(path, e))?;
    let mut bytes = Vec::new();
    f.take(MAX_DESCRIPTOR_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err(path, e))?;
    if bytes.len() as u64 > MAX_DESCRIPTOR_BYTES {
        return Err(invalid(
            path,
            format!(
                "descriptor larger than {MAX_DESCRIPTOR_BYTES} bytes; expected a small JSON object"
            ),
        ));
    }
    Ok(bytes)
}

fn check_args(path: &Path, f: &Fields) -> Result<()> {
    if f.num_args != f.args.len() as u64 {
        return Err(key_err(
            path,
            "NumArgs",
            format!(
                "is {} but ArgPtrs has {} elements; expected them equal",
                f.num_args,
                f.args.len()
            ),
        ));
    }
    if f.num_args != f.arg_offsets.len() as u64 {
        return Err(key_err(
            path,
            "NumArgs",
            format!(
                "is {} but ArgOffsets has {} elements; expected them equal",
                f.num_args,
                f.arg_offsets.len()
            ),
        ));
    }
    Ok(())
}

/// Stream a file through blake3; also return its first 4 KiB.
fn hash_file(path: &Path, role: PartRole) -> Result<(PartInfo, Vec<u8>)> {
    let mut f = File::open(path).map_err(|e| io_err(path, e))?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; READ_BUF];
    let mut head = Vec::new();
    let mut len = 0u64;
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(path, e)),
        };
        if head.len() < 4096 {
            let take = n.min(4096 - head.len());
            head.extend_from_slice(&buf[..take]);
        }
        h.update(&buf[..n]);
        len += n as u64;
    }
    Ok((
        PartInfo {
            role,
            len,
            blake3: *h.finalize().as_bytes(),
        },
        head,
    ))
}

/// A part's length (from the file system) and its first 4 KiB, no hash.
fn measure_file(path: &Path, role: PartRole) -> Result<(PartInfo, Vec<u8>)> {
    let f = File::open(path).map_err(|e| io_err(path, e))?;
    let len = f.metadata().map_err(|e| io_err(path, e))?.len();
    let mut head = Vec::new();
    if role == PartRole::Image {
        f.take(4096)
            .read_to_end(&mut head)
            .map_err(|e| io_err(path, e))?;
    }
    Ok((
        PartInfo {
            role,
            len,
            blake3: [0; 32],
        },
        head,
    ))
}

/// Fill in the part hashes of a recording from [`load_unhashed`].
pub(super) fn hash_parts(rec: &mut LlvmRecording) -> Result<()> {
    if rec.parts_hashed {
        return Ok(());
    }
    for (info, (_, path)) in rec.recording.parts.iter_mut().zip(&rec.files) {
        let (hashed, _) = hash_file(path, info.role)?;
        if hashed.len != info.len {
            return Err(invalid(
                path,
                format!(
                    "now has {} bytes, {} when the recording was loaded: the file changed; load it again",
                    hashed.len, info.len
                ),
            ));
        }
        info.blake3 = hashed.blake3;
    }
    rec.parts_hashed = true;
    Ok(())
}

fn read_globals(path: &Path, generation: Generation) -> Result<Vec<crate::model::Global>> {
    let f = File::open(path).map_err(|e| io_err(path, e))?;
    let len = f.metadata().map_err(|e| io_err(path, e))?.len();
    let mut r = io::BufReader::new(f);
    let parsed = layouts::of(generation).parse_globals(&mut r, len);
    parsed.map_err(|e| FormatError::At {
        path: path.to_path_buf(),
        offset: e.offset,
        message: e.message,
    })
}
