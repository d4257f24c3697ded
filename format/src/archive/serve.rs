//! How an open [`Reader`] serves its parts: as a [`PartSource`] (a part
//! streamed, decoded whole on all threads, or described as extents of the
//! archive file) and chunk by chunk with the stored bytes ([`Chunks`]).
//! Every byte served is verified, as [`super::reader`] says.

use std::io;

use super::decode::Decoder;
use super::layout::HEADER_LEN;
use super::reader::{Reader, StoredChunk};
use crate::error::FormatError;
use crate::extents::{Extent, PartExtents};
use crate::id::hex;
use crate::model::{PartRole, PartSource};

impl Reader {
    /// Iterate a part's chunks in order with their stored bytes, each read
    /// and verified (decompressed and hashed) before it is yielded.
    pub fn chunks(&self, role: PartRole) -> Result<Chunks<'_>, FormatError> {
        let list = self.part_chunks(role).ok_or_else(|| self.no_part(role))?;
        Ok(Chunks {
            reader: self,
            list: list.iter(),
            decoder: Decoder::new(),
            scratch: Vec::new(),
            last: None,
        })
    }

    /// Decode a part into `dst` (exactly the part's length) on all threads.
    fn decode_part_into(&self, role: PartRole, dst: &mut [u8]) -> Result<(), FormatError> {
        let (info, list) = self
            .parts
            .iter()
            .find(|(p, _)| p.role == role)
            .ok_or_else(|| self.no_part(role))?;
        if dst.len() as u64 != info.len {
            return Err(FormatError::Invalid {
                path: self.path.to_path_buf(),
                message: format!(
                    "the {role} part is {} bytes but the buffer given is {} bytes",
                    info.len,
                    dst.len()
                ),
            });
        }
        self.decode_runs(list, &mut *dst)?;
        let actual = *blake3::hash(dst).as_bytes();
        if actual != info.blake3 {
            return Err(FormatError::Corrupt {
                path: self.path.to_path_buf(),
                offset: self.chunks.first().map_or(HEADER_LEN, |c| c.offset),
                message: format!(
                    "the {role} part's chunks are all intact but together hash to {}, not the recorded {}: the index is damaged",
                    hex(&actual),
                    hex(&info.blake3)
                ),
            });
        }
        Ok(())
    }

    /// Decode the chunks `list` into `dst` (their total length), split into
    /// runs of about equal bytes, one per thread.
    fn decode_runs(&self, list: &[u32], dst: &mut [u8]) -> Result<(), FormatError> {
        let per = dst.len() as u64 / self.threads as u64 + 1;
        let mut runs: Vec<(&[u32], &mut [u8])> = Vec::with_capacity(self.threads);
        let (mut rest_list, mut rest_dst) = (list, dst);
        while !rest_list.is_empty() {
            let (mut n, mut bytes) = (0usize, 0u64);
            while n < rest_list.len() && (bytes < per || n == 0) {
                bytes += u64::from(self.chunks[rest_list[n] as usize].len);
                n += 1;
            }
            let (l, lr) = rest_list.split_at(n);
            let (d, dr) = std::mem::take(&mut rest_dst).split_at_mut(bytes as usize);
            runs.push((l, d));
            rest_list = lr;
            rest_dst = dr;
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = runs
                .into_iter()
                .map(|(l, d)| {
                    s.spawn(move || {
                        let mut dec = Decoder::new();
                        let mut off = 0usize;
                        for &c in l {
                            let ci = &self.chunks[c as usize];
                            let end = off + ci.len as usize;
                            dec.decode(&self.file, &self.path, ci, &mut d[off..end])?;
                            off = end;
                        }
                        Ok::<(), FormatError>(())
                    })
                })
                .collect();
            let mut result = Ok(());
            for h in handles {
                let r = h.join().unwrap_or_else(|_| {
                    Err(FormatError::Invalid {
                        path: self.path.to_path_buf(),
                        message: "a decoding thread panicked".into(),
                    })
                });
                if result.is_ok() {
                    result = r;
                }
            }
            result
        })
    }
}

impl PartSource for Reader {
    fn open_part(&mut self, role: PartRole) -> io::Result<Box<dyn io::Read + '_>> {
        let i = self
            .parts
            .iter()
            .position(|(p, _)| p.role == role)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, self.no_part(role)))?;
        Ok(Box::new(self.part_reader(i)))
    }

    fn read_part_into(&mut self, role: PartRole, dst: &mut [u8]) -> io::Result<()> {
        self.decode_part_into(role, dst)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn extents(&mut self, role: PartRole) -> io::Result<Option<PartExtents>> {
        let (_, list) = self
            .parts
            .iter()
            .find(|(p, _)| p.role == role)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, self.no_part(role)))?;
        let path = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.to_path_buf());
        let mut extents = Vec::with_capacity(list.len());
        for &row in list.iter() {
            // `validate_parts` checked every row against the table.
            let Some(c) = self.chunks.get(row as usize) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("the {role} part refers to a missing chunk row {row}"),
                ));
            };
            extents.push(Extent {
                file: 0,
                offset: c.offset,
                stored_len: u64::from(c.stored_len),
                len: u64::from(c.len),
                codec: c.codec,
                hash: Some(c.hash),
            });
        }
        Ok(Some(PartExtents {
            files: vec![path],
            extents,
        }))
    }
}

/// Iterator over a part's chunks with their verified stored bytes.
pub struct Chunks<'a> {
    reader: &'a Reader,
    list: std::slice::Iter<'a, u32>,
    decoder: Decoder,
    scratch: Vec<u8>,
    /// The row yielded last and its stored bytes, when small: a run of the
    /// same chunk (zeros) is decoded and verified once.
    last: Option<(u32, Vec<u8>)>,
}

impl Chunks<'_> {
    /// The uncompressed (verified) bytes of the chunk [`Iterator::next`]
    /// returned last: lets a caller hash the whole part as it copies the
    /// stored chunks.
    pub fn plain(&self) -> &[u8] {
        &self.scratch
    }
}

impl Iterator for Chunks<'_> {
    type Item = Result<StoredChunk, FormatError>;
    fn next(&mut self) -> Option<Self::Item> {
        let &i = self.list.next()?;
        let r = self.reader;
        let ci = r.chunks[i as usize];
        if let Some((row, stored)) = &self.last {
            if *row == i {
                // `scratch` still holds this chunk's verified plain bytes.
                return Some(Ok(StoredChunk {
                    index: i,
                    hash: ci.hash,
                    len: ci.len,
                    codec: ci.codec,
                    data: stored.clone(),
                }));
            }
        }
        self.last = None;
        self.scratch.resize(ci.len as usize, 0);
        Some(
            self.decoder
                .decode(&r.file, &r.path, &ci, &mut self.scratch)
                .map(|()| {
                    let data = self.decoder.take_stored();
                    // Small frames (runs of zeros, repeated patterns) are
                    // kept for a repeat; large ones rarely repeat in a row.
                    if data.len() <= 4096 {
                        self.last = Some((i, data.clone()));
                    }
                    StoredChunk {
                        index: i,
                        hash: ci.hash,
                        len: ci.len,
                        codec: ci.codec,
                        data,
                    }
                }),
        )
    }
}
