//! Resolving what the user asked to replay into a [`Recording`] and a
//! [`PartSource`] for its bytes: an LLVM recording `.json` on disk, a `.rra`
//! archive, or a store ID (prefix). Nothing is read beyond the manifest here;
//! parts are streamed by the engine.

use std::path::{Path, PathBuf};

use rrstore_format::{PartSource, Recording, RecordingId};
use rrstore_store::Store;

use crate::error::ReplayError;

/// Where a recording came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A stored recording (the store directory).
    Store(PathBuf),
    /// A `.rra` archive.
    Archive(PathBuf),
    /// An LLVM recording's `.json` descriptor.
    Llvm(PathBuf),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Store(d) => write!(f, "store {}", d.display()),
            Origin::Archive(p) => write!(f, "archive {}", p.display()),
            Origin::Llvm(p) => write!(f, "LLVM recording {}", p.display()),
        }
    }
}

/// A recording opened for replay. A stored one reads through its store's
/// index connection, so it borrows the store (`'s`).
pub struct ReplaySource<'s> {
    pub recording: Recording,
    pub id: RecordingId,
    pub origin: Origin,
    pub parts: Box<dyn PartSource + 's>,
}

impl<'s> ReplaySource<'s> {
    /// An LLVM recording from its `.json` descriptor; a part file linked
    /// outside the recording's directory is refused.
    pub fn llvm(path: &Path) -> Result<ReplaySource<'s>, ReplayError> {
        ReplaySource::llvm_links(path, false)
    }

    /// [`llvm`](Self::llvm); with `follow_symlinks`, part files that are
    /// symbolic links leading outside the recording's directory are read
    /// too (a `.memory` linked to a system file would be replayed).
    pub fn llvm_links(path: &Path, follow_symlinks: bool) -> Result<ReplaySource<'s>, ReplayError> {
        let rec = rrstore_format::llvm::load_links(path, follow_symlinks)?;
        let recording = rec.recording.clone();
        Ok(ReplaySource {
            id: recording.id(),
            recording,
            origin: Origin::Llvm(path.to_path_buf()),
            parts: Box::new(rec),
        })
    }

    /// A `.rra` archive.
    pub fn archive(path: &Path) -> Result<ReplaySource<'s>, ReplayError> {
        let reader = rrstore_format::archive::Reader::open(path)?;
        let recording = reader.recording().clone();
        Ok(ReplaySource {
            id: reader.id(),
            recording,
            origin: Origin::Archive(path.to_path_buf()),
            parts: Box::new(reader),
        })
    }

    /// A stored recording by full ID or unique prefix.
    pub fn stored(store: &'s Store, prefix: &str) -> Result<ReplaySource<'s>, ReplayError> {
        let id = store.resolve(prefix)?;
        Ok(ReplaySource::from_store(store.parts_of(&id)?, store))
    }

    fn from_store(parts: rrstore_store::StoredRecording<'s>, store: &Store) -> ReplaySource<'s> {
        ReplaySource {
            recording: parts.recording().clone(),
            id: parts.id(),
            origin: Origin::Store(store.dir().to_path_buf()),
            parts: Box::new(parts),
        }
    }

    /// Resolve `spec`: an existing file is an archive (`.rra`) or an LLVM
    /// descriptor (anything else, normally `.json`; its part files linked
    /// outside its directory are read only with `follow_symlinks`);
    /// otherwise it is an ID prefix looked up in `store`, which is opened
    /// only then.
    pub fn open(
        spec: &str,
        follow_symlinks: bool,
        store: impl FnOnce() -> Result<Store, ReplayError>,
    ) -> Result<ReplaySource<'static>, ReplayError> {
        let path = Path::new(spec);
        if path.is_file() {
            return ReplaySource::file(path, follow_symlinks);
        }
        if !spec.bytes().all(|b| b.is_ascii_hexdigit()) || spec.is_empty() {
            return Err(ReplayError::BadSpec(spec.to_string()));
        }
        let store = store()?;
        let id = store.resolve(spec)?;
        Ok(ReplaySource::from_store(store.part_source(&id)?, &store))
    }

    /// [`open`](Self::open) with an already open store.
    pub fn open_in(
        spec: &str,
        follow_symlinks: bool,
        store: &'s Store,
    ) -> Result<ReplaySource<'s>, ReplayError> {
        let path = Path::new(spec);
        if path.is_file() {
            return ReplaySource::file(path, follow_symlinks);
        }
        if !spec.bytes().all(|b| b.is_ascii_hexdigit()) || spec.is_empty() {
            return Err(ReplayError::BadSpec(spec.to_string()));
        }
        ReplaySource::stored(store, spec)
    }

    fn file(path: &Path, follow_symlinks: bool) -> Result<ReplaySource<'s>, ReplayError> {
        if path.extension().is_some_and(|e| e == "rra") {
            ReplaySource::archive(path)
        } else {
            ReplaySource::llvm_links(path, follow_symlinks)
        }
    }
}
