//! Where a part's stored bytes lie in files on disk, for readers that decode
//! a part themselves instead of being handed its bytes.
//!
//! The host replay backend uses it to fill the arena: its runner process
//! reads each extent from the pack (or archive, or raw LLVM file) and decodes
//! it straight into the arena, so the snapshot's bytes are copied once, not
//! decoded in the parent and copied across processes again.
//!
//! A part is the concatenation of its extents' decoded bytes. An extent with
//! a hash (a stored chunk) is verified after decoding, like every other read
//! of a chunk; a raw LLVM file has no per-chunk hashes, and its extents have
//! none.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use crate::chunk::{self, ChunkHash, Codec};
use crate::error::{FormatError, Result};

/// Largest extent cut from a plain (raw, unhashed) file: small enough to
/// share a file's bytes between decoding threads.
pub const PLAIN_EXTENT: u64 = 4 << 20;

/// One piece of a part: `stored_len` bytes at `offset` of `files[file]`,
/// which decode (`codec`) to `len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Index into [`PartExtents::files`].
    pub file: u32,
    pub offset: u64,
    pub stored_len: u64,
    pub len: u64,
    pub codec: Codec,
    /// blake3 of the decoded bytes, checked after decoding when present.
    pub hash: Option<ChunkHash>,
}

/// A part's bytes as extents of files, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartExtents {
    pub files: Vec<PathBuf>,
    pub extents: Vec<Extent>,
}

impl PartExtents {
    /// The part's length: the sum of the extents' decoded lengths
    /// (saturating: a corrupt index cannot wrap it around to a small value).
    pub fn len(&self) -> u64 {
        self.extents
            .iter()
            .fold(0u64, |a, e| a.saturating_add(e.len))
    }

    pub fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    /// The bytes `0..len` of the plain file `path`, as raw extents of at
    /// most [`PLAIN_EXTENT`] bytes without hashes.
    pub fn plain_file(path: PathBuf, len: u64) -> PartExtents {
        let mut extents = Vec::new();
        let mut at = 0;
        while at < len {
            let n = PLAIN_EXTENT.min(len - at);
            extents.push(Extent {
                file: 0,
                offset: at,
                stored_len: n,
                len: n,
                codec: Codec::Raw,
                hash: None,
            });
            at += n;
        }
        PartExtents {
            files: vec![path],
            extents,
        }
    }

    /// At most `n` runs of consecutive extents of about equal decoded bytes,
    /// each with the part offset it starts at: one per decoding thread.
    pub fn split(&self, n: usize) -> Vec<(Range<usize>, u64)> {
        let per = self.len().div_ceil(n.max(1) as u64).max(1);
        let mut out = Vec::new();
        let (mut first, mut start, mut bytes) = (0, 0u64, 0u64);
        for (i, e) in self.extents.iter().enumerate() {
            bytes = bytes.saturating_add(e.len);
            if bytes >= per {
                out.push((first..i + 1, start));
                first = i + 1;
                start = start.saturating_add(bytes);
                bytes = 0;
            }
        }
        if first < self.extents.len() {
            out.push((first..self.extents.len(), start));
        }
        out
    }
}

/// Reads and decodes extents of one [`PartExtents`], keeping the files it
/// opened and a [`chunk::Decoder`] of its own; one per thread.
pub struct ExtentReader<'a> {
    plan: &'a PartExtents,
    open: Vec<Option<File>>,
    scratch: Vec<u8>,
    decoder: chunk::Decoder,
}

impl<'a> ExtentReader<'a> {
    pub fn new(plan: &'a PartExtents) -> ExtentReader<'a> {
        ExtentReader {
            plan,
            open: plan.files.iter().map(|_| None).collect(),
            scratch: Vec::new(),
            decoder: chunk::Decoder::default(),
        }
    }

    /// Decode extent `i` into `dst` (its decoded length) and verify its
    /// hash when it has one. On error `dst`'s contents are unspecified.
    pub fn decode_into(&mut self, i: usize, dst: &mut [u8]) -> Result<()> {
        let plan = self.plan;
        let e = plan.extents.get(i).ok_or_else(|| FormatError::Invalid {
            path: PathBuf::new(),
            message: format!("extent {i} of {} does not exist", plan.extents.len()),
        })?;
        let path = plan
            .files
            .get(e.file as usize)
            .ok_or_else(|| FormatError::Invalid {
                path: PathBuf::new(),
                message: format!("extent {i} names file {} of {}", e.file, plan.files.len()),
            })?;
        let at = |message: String| FormatError::Corrupt {
            path: path.clone(),
            offset: e.offset,
            message,
        };
        if dst.len() as u64 != e.len {
            return Err(at(format!(
                "the destination is {} bytes, the extent decodes to {}",
                dst.len(),
                e.len
            )));
        }
        let slot = &mut self.open[e.file as usize];
        if slot.is_none() {
            let f = File::open(path).map_err(|source| FormatError::Io {
                path: path.clone(),
                source,
            })?;
            *slot = Some(f);
        }
        let Some(file) = slot.as_ref() else {
            return Err(at("the file could not be kept open".into()));
        };
        let read = |file: &File, buf: &mut [u8]| {
            file.read_exact_at(buf, e.offset).map_err(|source| {
                if source.kind() == std::io::ErrorKind::UnexpectedEof {
                    at("the file ends inside this extent (truncated)".into())
                } else {
                    FormatError::Io {
                        path: path.clone(),
                        source,
                    }
                }
            })
        };
        match (e.codec, e.hash) {
            (Codec::Raw, _) if e.stored_len != e.len => Err(at(format!(
                "a raw extent of {} bytes stores {}",
                e.len, e.stored_len
            ))),
            (Codec::Raw, None) => read(file, dst),
            (Codec::Raw, Some(expected)) => {
                read(file, dst)?;
                chunk::verify(dst, &expected).map_err(|err| at(err.to_string()))
            }
            (Codec::Zstd, hash) => {
                let stored_len = usize::try_from(e.stored_len)
                    .map_err(|_| at("the stored length does not fit in memory".into()))?;
                self.scratch.resize(stored_len, 0);
                read(file, &mut self.scratch)?;
                let Some(expected) = hash else {
                    return Err(at("a compressed extent without its hash".into()));
                };
                self.decoder
                    .decode_into(Codec::Zstd, &self.scratch, dst, &expected)
                    .map_err(|source| FormatError::Chunk {
                        path: path.clone(),
                        source,
                    })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn extent(offset: u64, stored: &[u8], len: u64, codec: Codec, plain: &[u8]) -> Extent {
        Extent {
            file: 0,
            offset,
            stored_len: stored.len() as u64,
            len,
            codec,
            hash: Some(chunk::hash(plain)),
        }
    }

    #[test]
    fn decodes_raw_and_zstd_extents_and_rejects_corrupt_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pack");
        let plain_a: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let plain_b = vec![9u8; 70_000];
        let (codec_b, stored_b) = chunk::compress(&plain_b, 3);
        assert_eq!(codec_b, Codec::Zstd);
        let mut f = File::create(&path).unwrap();
        f.write_all(b"header").unwrap();
        f.write_all(&plain_a).unwrap();
        f.write_all(&stored_b).unwrap();
        drop(f);
        let a = extent(6, &plain_a, 5000, Codec::Raw, &plain_a);
        let b = extent(5006, &stored_b, 70_000, Codec::Zstd, &plain_b);
        let mut bad = a;
        bad.offset = 7;
        let plan = PartExtents {
            files: vec![path.clone()],
            extents: vec![a, b, bad],
        };
        assert_eq!(plan.len(), 80_000);
        let mut r = ExtentReader::new(&plan);
        let mut out = vec![0u8; 5000];
        r.decode_into(0, &mut out).unwrap();
        assert_eq!(out, plain_a);
        let mut out = vec![0u8; 70_000];
        r.decode_into(1, &mut out).unwrap();
        assert_eq!(out, plain_b);
        let mut out = vec![0u8; 5000];
        let err = r.decode_into(2, &mut out).unwrap_err().to_string();
        assert!(
            err.contains("corrupt") && err.contains("at byte 7"),
            "{err}"
        );
        let err = r.decode_into(0, &mut [0u8; 10]).unwrap_err().to_string();
        assert!(err.contains("destination is 10 bytes"), "{err}");
    }

    #[test]
    fn a_missing_file_or_short_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short");
        std::fs::write(&path, [1u8; 100]).unwrap();
        let plan = PartExtents::plain_file(path.clone(), 200);
        let err = ExtentReader::new(&plan)
            .decode_into(0, &mut [0u8; 200])
            .unwrap_err()
            .to_string();
        assert!(err.contains("truncated") && err.contains("short"), "{err}");
        let gone = PartExtents::plain_file(dir.path().join("gone"), 10);
        let err = ExtentReader::new(&gone)
            .decode_into(0, &mut [0u8; 10])
            .unwrap_err()
            .to_string();
        assert!(err.contains("gone"), "{err}");
    }

    #[test]
    fn plain_files_are_cut_and_splits_cover_every_extent_once() {
        let plan = PartExtents::plain_file("f".into(), 3 * PLAIN_EXTENT + 5);
        assert_eq!(plan.extents.len(), 4);
        assert_eq!(plan.len(), 3 * PLAIN_EXTENT + 5);
        assert!(PartExtents::plain_file("f".into(), 0).is_empty());
        for n in 1..6 {
            let runs = plan.split(n);
            assert!(runs.len() <= n, "{n}: {runs:?}");
            let mut next = 0;
            let mut offset = 0;
            for (r, start) in &runs {
                assert_eq!(r.start, next);
                assert_eq!(*start, offset);
                offset += plan.extents[r.clone()].iter().map(|e| e.len).sum::<u64>();
                next = r.end;
            }
            assert_eq!(next, plan.extents.len());
        }
    }
}
