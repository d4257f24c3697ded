//! Reading chunk entries back from pack files, checked against the index and
//! against their blake3 (never returns unverified bytes, but through
//! [`PackFiles::read_into_unverified`], for a caller that verifies what it
//! assembles from many chunks as a whole).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rrstore_format::chunk::{self, ChunkHash, Codec};

use crate::layout;
use crate::pack::{EntryHeader, ENTRY_HEADER_LEN, PACK_HEADER_LEN};

/// Where the index says a chunk is.
#[derive(Clone, Debug)]
pub struct ChunkLoc {
    pub hash: ChunkHash,
    pub pack: String,
    pub offset: u64,
    pub stored_len: u32,
    pub len: u32,
    pub codec: Codec,
}

impl ChunkLoc {
    /// Where the chunk's stored bytes start in its pack: right after the
    /// entry header (spec/STORE.md).
    pub fn data_offset(&self) -> u64 {
        self.offset + ENTRY_HEADER_LEN as u64
    }
}

/// Why reading a chunk failed.
#[derive(Debug)]
pub enum ReadError {
    /// The pack file is gone (gc may have moved the chunk: look it up again).
    Missing(PathBuf),
    Io(PathBuf, std::io::Error),
    /// The bytes are there but wrong.
    Corrupt(PathBuf, u64, String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Missing(p) => write!(f, "pack {} is missing", p.display()),
            ReadError::Io(p, e) => write!(f, "reading pack {}: {e}", p.display()),
            ReadError::Corrupt(p, off, why) => {
                write!(f, "pack {} at byte {off}: {why}", p.display())
            }
        }
    }
}

/// Open pack files, by name.
pub struct PackFiles {
    dir: PathBuf,
    open: HashMap<String, File>,
    buf: Vec<u8>,
    decoder: chunk::Decoder,
}

impl PackFiles {
    pub fn new(dir: &Path) -> PackFiles {
        PackFiles {
            dir: dir.to_path_buf(),
            open: HashMap::new(),
            buf: Vec::new(),
            decoder: chunk::Decoder::default(),
        }
    }

    /// Forget open handles (after gc moved chunks).
    pub fn reset(&mut self) {
        self.open.clear();
    }

    fn file(&mut self, pack: &str) -> Result<(&File, PathBuf), ReadError> {
        let path = layout::pack_path(&self.dir, pack);
        if !self.open.contains_key(pack) {
            let f = File::open(&path).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    ReadError::Missing(path.clone())
                } else {
                    ReadError::Io(path.clone(), e)
                }
            })?;
            self.open.insert(pack.to_string(), f);
        }
        let f = self
            .open
            .get(pack)
            .ok_or_else(|| ReadError::Missing(path.clone()))?;
        Ok((f, path))
    }

    /// Read the chunk at `loc`, decode it into `dst` (length `loc.len`) and
    /// verify its blake3.
    pub fn read_into(&mut self, loc: &ChunkLoc, dst: &mut [u8]) -> Result<(), ReadError> {
        self.read_checked(loc, dst, true)
    }

    /// [`PackFiles::read_into`] without the check of the chunk's bytes
    /// against its blake3 (the entry header is still checked against the
    /// index): only for a caller that hashes what it assembles and compares
    /// that, as `pull` checks each new part against the part's blake3, so
    /// the part's bytes are hashed once rather than twice.
    pub fn read_into_unverified(
        &mut self,
        loc: &ChunkLoc,
        dst: &mut [u8],
    ) -> Result<(), ReadError> {
        self.read_checked(loc, dst, false)
    }

    fn read_checked(
        &mut self,
        loc: &ChunkLoc,
        dst: &mut [u8],
        verify: bool,
    ) -> Result<(), ReadError> {
        let mut buf = std::mem::take(&mut self.buf);
        let mut decoder = std::mem::take(&mut self.decoder);
        let r = self.read_into_buf(loc, dst, &mut buf, &mut decoder, verify);
        (self.buf, self.decoder) = (buf, decoder);
        r
    }

    fn read_into_buf(
        &mut self,
        loc: &ChunkLoc,
        dst: &mut [u8],
        buf: &mut Vec<u8>,
        d: &mut chunk::Decoder,
        verify: bool,
    ) -> Result<(), ReadError> {
        let (file, path) = self.file(&loc.pack)?;
        let corrupt = |why: String| ReadError::Corrupt(path.clone(), loc.offset, why);
        let mut h = [0u8; ENTRY_HEADER_LEN];
        read_exact_at(file, &mut h, loc.offset).map_err(&corrupt)?;
        let header = EntryHeader::decode(&h).map_err(corrupt)?;
        if header.hash != loc.hash
            || header.len != loc.len
            || header.stored_len != loc.stored_len
            || header.codec != loc.codec
        {
            return Err(corrupt(format!(
                "the entry header does not match the index (chunk {})",
                rrstore_format::id::hex(&loc.hash)
            )));
        }
        if dst.len() != loc.len as usize {
            return Err(corrupt(
                "destination length differs from the chunk length".into(),
            ));
        }
        let data_off = loc.data_offset();
        match loc.codec {
            Codec::Raw => {
                read_exact_at(file, dst, data_off).map_err(&corrupt)?;
                if verify {
                    chunk::verify(dst, &loc.hash).map_err(|e| corrupt(e.to_string()))?;
                }
            }
            Codec::Zstd => {
                buf.resize(loc.stored_len as usize, 0);
                read_exact_at(file, buf, data_off).map_err(&corrupt)?;
                let r = if verify {
                    d.decode_into(Codec::Zstd, buf, dst, &loc.hash)
                } else {
                    d.decode_unverified_into(Codec::Zstd, buf, dst, &loc.hash)
                };
                r.map_err(|e| corrupt(e.to_string()))?;
            }
        }
        Ok(())
    }
}

fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> Result<(), String> {
    file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            "the pack file ends inside this chunk entry (truncated)".to_string()
        } else {
            e.to_string()
        }
    })
}

/// One entry found by [`scan`].
pub struct ScannedEntry {
    pub offset: u64,
    pub header: EntryHeader,
}

/// Walk a pack's entries after its header, without the index (`repair`).
/// The header itself is checked apart ([`crate::pack::check_header`]): the
/// entries check themselves, so a damaged header does not hide them. Stops
/// at the first entry that does not parse and reports where.
/// Entries found, and where and why the walk stopped early (if it did).
pub type ScanResult = (Vec<ScannedEntry>, Option<(u64, String)>);

pub fn scan(path: &Path) -> std::io::Result<ScanResult> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    if size < PACK_HEADER_LEN {
        return Ok((Vec::new(), Some((0, "shorter than a pack header".into()))));
    }
    let mut out = Vec::new();
    let mut off = PACK_HEADER_LEN;
    while off < size {
        if off + ENTRY_HEADER_LEN as u64 > size {
            return Ok((out, Some((off, "truncated entry header".into()))));
        }
        let mut h = [0u8; ENTRY_HEADER_LEN];
        file.read_exact_at(&mut h, off)?;
        match EntryHeader::decode(&h) {
            Ok(header) => {
                let end = off + ENTRY_HEADER_LEN as u64 + header.stored_len as u64;
                if end > size {
                    return Ok((out, Some((off, "truncated entry".into()))));
                }
                out.push(ScannedEntry {
                    offset: off,
                    header,
                });
                off = end;
            }
            Err(why) => return Ok((out, Some((off, why)))),
        }
    }
    Ok((out, None))
}
