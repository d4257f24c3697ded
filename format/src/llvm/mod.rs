//! Import and export of LLVM record-replay files, one module per generation.
//!
//! * [`load`]: read one recording from its `.json` descriptor, auto-detecting
//!   the generation ([`detect`]), validating it and hashing its parts
//!   (streamed, 1 MiB at a time); [`load_unhashed`]: the same checks
//!   without reading the parts, for writers that hash in their own pass.
//! * [`find_recordings`]: the descriptors under a directory.
//! * [`export`](fn@export): write a recording back, byte-for-byte in the
//!   layout it came from, or converted to the other layout.
//!
//! Modules: [`layouts`] (the table of LLVM's recording layouts, one row
//! per generation: what every other module asks of a layout),
//! [`kernel_named`] (LLVM 16-22's rows), [`native`] (LLVM 23+'s row),
//! [`json`] (exact-integer descriptor parsing), [`globals`] (both globals
//! table encodings), [`hashes`] (native file-name hashes),
//! [`export`](mod@export), [`argptrs`] (stock LLVM 19-22's slot addresses
//! in `ArgPtrs`).

pub mod argptrs;
pub mod detect;
pub mod export;
pub mod globals;
pub mod hashes;
pub mod json;
pub mod kernel_named;
pub mod layouts;
mod load;
pub mod native;
mod walk;

use std::fs::File;
use std::io;
use std::path::PathBuf;

use crate::extents::PartExtents;
use crate::model::{Generation, LaunchConfig, PartRole, PartSource, Recording};

pub use export::{export, export_into};
pub use load::{load, load_links, load_unhashed, load_unhashed_links};
pub use walk::{
    find_recordings, find_recordings_skipped, no_recording_here, single_recording, Skipped,
};

/// A recording found on disk in one of LLVM's layouts.
#[derive(Debug, Clone)]
pub struct LlvmRecording {
    /// Fully filled: parts with length and blake3, globals, image target,
    /// descriptor bytes verbatim, stem, generation.
    pub recording: Recording,
    pub descriptor_path: PathBuf,
    /// The part files, in [`PartRole::ALL`] order.
    pub files: Vec<(PartRole, PathBuf)>,
    /// Things that are odd but not fatal (e.g. a native file name that does
    /// not match the recomputed hashes).
    pub warnings: Vec<String>,
    /// Whether each part's blake3 is filled in ([`load`]); false after
    /// [`load_unhashed`] until [`LlvmRecording::hash_parts`] (or a writer
    /// that hashes while it reads) fills them in.
    pub parts_hashed: bool,
}

impl LlvmRecording {
    /// Hash the parts of a recording from [`load_unhashed`] (no-op when
    /// they are hashed already).
    pub fn hash_parts(&mut self) -> crate::error::Result<()> {
        load::hash_parts(self)
    }

    /// The file holding a part, if the recording has it.
    pub fn file(&self, role: PartRole) -> Option<&PathBuf> {
        self.files.iter().find(|(r, _)| *r == role).map(|(_, p)| p)
    }
}

impl PartSource for LlvmRecording {
    fn open_part(&mut self, role: PartRole) -> io::Result<Box<dyn io::Read + '_>> {
        let path = self.file(role).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "the recording {} has no {role} part",
                    self.descriptor_path.display()
                ),
            )
        })?;
        let f = File::open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(Box::new(f))
    }

    fn part_file(&self, role: PartRole) -> Option<&std::path::Path> {
        self.file(role).map(|p| p.as_path())
    }

    fn extents(&mut self, role: PartRole) -> io::Result<Option<PartExtents>> {
        let (Some(path), Some(info)) = (self.file(role), self.recording.part(role)) else {
            return Ok(None);
        };
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        Ok(Some(PartExtents::plain_file(path, info.len)))
    }
}

/// An on-disk layout to export to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `<Name>.json` etc. (LLVM 18-22 names; legacy recordings stay legacy).
    KernelNamed,
    /// `<KernelHash>_<LaunchConfigHash>.json` etc. (LLVM 23+).
    Native,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::KernelNamed => "kernel-named",
            Layout::Native => "native",
        }
    }

    /// The layout a generation is written in (its row's family).
    pub fn of(generation: Generation) -> Layout {
        layouts::of(generation).family()
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Layout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "kernel-named" => Ok(Layout::KernelNamed),
            "native" => Ok(Layout::Native),
            _ => Err(format!(
                "unknown layout `{s}`: expected `kernel-named` or `native`"
            )),
        }
    }
}

/// File extension (after the stem) of a part in a generation's layout.
pub fn extension(generation: Generation, role: PartRole) -> &'static str {
    layouts::of(generation).extension(role)
}

/// Descriptor fields normalized across generations (what [`load`] checks
/// against the files before building the [`Recording`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    pub kernel: String,
    pub num_args: u64,
    pub args: Vec<u64>,
    pub arg_offsets: Vec<i64>,
    pub launch: LaunchConfig,
    pub device_id: i64,
    pub arena_base: Option<u64>,
    /// `DeviceMemorySize` (kernel-named only).
    pub memory_size: Option<u64>,
    /// `VAllocSize` (native only).
    pub reserved: Option<u64>,
}

/// Parse descriptor bytes and read every field its generation requires
/// (`stem` helps detection when the keys say nothing). Used by [`load`] and
/// the fuzz target.
pub fn parse_fields(bytes: &[u8], stem: &str) -> Result<(Generation, Fields), String> {
    let d = json::parse_descriptor(bytes).map_err(|e| e.to_string())?;
    let generation = detect::generation(&d, stem)?;
    let f = layouts::of(generation)
        .fields(&d)
        .map_err(|e| e.to_string())?;
    Ok((generation, f))
}
