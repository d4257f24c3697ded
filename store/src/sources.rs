//! What `import` accepts: LLVM recording directories (searched recursively,
//! any generation) and `.rra` archives, and importing one of them.

use std::io::Read;
use std::path::{Path, PathBuf};

use rrstore_format::{archive, llvm};

use crate::error::{Result, StoreError};
use crate::import::{ImportOptions, ImportReport};
use crate::Store;

/// One recording to import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// An LLVM recording, by its `.json` descriptor.
    Llvm(PathBuf),
    /// A `.rra` archive.
    Archive(PathBuf),
}

impl Source {
    pub fn path(&self) -> &Path {
        match self {
            Source::Llvm(p) | Source::Archive(p) => p,
        }
    }
}

/// Whether `path` is a `.rra` archive (by magic, else by extension).
pub fn is_archive(path: &Path) -> bool {
    let mut head = [0u8; 8];
    let magic = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head == archive::layout::MAGIC);
    magic || path.extension().is_some_and(|e| e == archive::EXTENSION)
}

/// Expand the command-line paths into recordings, in order. A directory
/// is searched recursively for LLVM recordings and `.rra` archives; a
/// directory with none is an error, as is a path that does not exist.
pub fn find_sources(paths: &[PathBuf]) -> Result<Vec<Source>> {
    Ok(find_sources_skipped(paths)?.0)
}

/// [`find_sources`], and the partial LLVM recordings (a descriptor without
/// its snapshot) passed over in the directories searched.
pub fn find_sources_skipped(paths: &[PathBuf]) -> Result<(Vec<Source>, Vec<llvm::Skipped>)> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| StoreError::Source {
            path: p.clone(),
            source: e,
        })?;
        if meta.is_dir() {
            let before = out.len();
            let (found, passed) = llvm::find_recordings_skipped(p)?;
            out.extend(found.into_iter().map(Source::Llvm));
            skipped.extend(passed);
            find_archives(p, &mut out)?;
            if out.len() == before {
                return Err(StoreError::NoRecordings(p.clone()));
            }
        } else if is_archive(p) {
            out.push(Source::Archive(p.clone()));
        } else {
            out.push(Source::Llvm(p.clone()));
        }
    }
    Ok((out, skipped))
}

fn find_archives(dir: &Path, out: &mut Vec<Source>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| StoreError::Source {
            path: dir.to_path_buf(),
            source: e,
        })?
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            find_archives(&p, out)?;
        } else if ft.is_file() && p.extension().is_some_and(|x| x == archive::EXTENSION) {
            out.push(Source::Archive(p));
        }
    }
    Ok(())
}

impl Store {
    /// Load and import one source. `opts.source` defaults to its path.
    /// Part files linked outside their recording's directory are followed.
    pub fn import_source(
        &mut self,
        src: &Source,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(ImportReport, Vec<String>)> {
        self.import_source_links(src, opts, true, progress)
    }

    /// [`Store::import_source`]; unless `follow_symlinks`, an LLVM part file
    /// that is a symbolic link leading outside its recording's directory
    /// fails the import (`FormatError::LinkOutside`).
    pub fn import_source_links(
        &mut self,
        src: &Source,
        opts: &ImportOptions,
        follow_symlinks: bool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(ImportReport, Vec<String>)> {
        let mut opts = opts.clone();
        if opts.source.is_empty() {
            let p = src.path();
            opts.source = std::fs::canonicalize(p)
                .unwrap_or_else(|_| p.to_path_buf())
                .display()
                .to_string();
        }
        match src {
            Source::Llvm(p) => {
                // Parts are hashed in the importer's one pass over them.
                let mut rec = llvm::load_unhashed_links(p, follow_symlinks)?;
                let mut r = rec.recording.clone();
                if opts.environment.is_some() {
                    r.environment = opts.environment.clone();
                }
                let report = self.import_unhashed(&mut r, &mut rec, &opts, progress)?;
                Ok((report, rec.warnings))
            }
            Source::Archive(p) => {
                let mut reader = archive::Reader::open(p)?;
                let report = self.import_archive(&mut reader, &opts, progress)?;
                Ok((report, Vec::new()))
            }
        }
    }
}
