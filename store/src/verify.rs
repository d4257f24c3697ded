//! `verify`: index/pack consistency (quick, with every pack's file header)
//! and re-hashing every chunk (`full`). Problems name the recording, the
//! part and the byte range, or the pack.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::FileExt;

use rrstore_format::{PartRole, RecordingId};
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::index::hash32;
use crate::pack::reader::{ChunkLoc, PackFiles};
use crate::pack::{check_header, EntryHeader, ENTRY_HEADER_LEN, PACK_HEADER_LEN};
use crate::read::part_locations;
use crate::Store;

/// One problem found.
#[derive(Clone, Debug, Serialize)]
pub struct Problem {
    pub recording: Option<String>,
    pub part: Option<PartRole>,
    /// Byte range inside the part.
    pub range: Option<(u64, u64)>,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(r) = &self.recording {
            write!(f, "recording {r}")?;
            if let Some(p) = self.part {
                write!(f, ", {p} part")?;
            }
            if let Some((a, b)) = self.range {
                write!(f, ", bytes {a}..{b}")?;
            }
            write!(f, ": ")?;
        }
        f.write_str(&self.message)
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct VerifyReport {
    pub full: bool,
    pub recordings: u64,
    pub chunks: u64,
    /// Bytes re-hashed (full mode).
    pub bytes: u64,
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Store {
    /// Check the given recordings (all when empty).
    pub fn verify(&self, ids: &[RecordingId], full: bool) -> Result<VerifyReport> {
        let mut report = VerifyReport {
            full,
            ..Default::default()
        };
        let ierr = self.ierr("verifying");
        let ids: Vec<RecordingId> = if ids.is_empty() {
            let check: String = self
                .conn()
                .query_row("PRAGMA quick_check", [], |r| r.get(0))
                .map_err(&ierr)?;
            if check != "ok" {
                report.problems.push(Problem {
                    recording: None,
                    part: None,
                    range: None,
                    message: format!("the SQLite index fails its integrity check: {check}"),
                });
            }
            // An index restored from an older copy, or partly rebuilt, does
            // not list every recording the store's metadata knows.
            let (missing, example) = crate::recovery::unaccounted(self.conn(), self.dir())?;
            if missing > 0 {
                report.problems.push(Problem {
                    recording: None,
                    part: None,
                    range: None,
                    message: format!(
                        "the index does not list {missing} recording(s) whose metadata is in the store (e.g. {}): repair the index",
                        example.unwrap_or_default()
                    ),
                });
            }
            let mut stmt = self
                .conn()
                .prepare("SELECT id FROM recordings ORDER BY id")
                .map_err(&ierr)?;
            let rows = stmt
                .query_map([], |r| Ok(RecordingId(hash32(r.get(0)?))))
                .map_err(&ierr)?;
            rows.collect::<rusqlite::Result<_>>().map_err(&ierr)?
        } else {
            ids.to_vec()
        };
        // Chunk hash -> None (good) or Some(reason); each checked once.
        let mut checked: HashMap<[u8; 32], Option<String>> = HashMap::new();
        let mut pack_sizes: HashMap<String, Option<u64>> = HashMap::new();
        // Packs whose header was checked (each once).
        let mut headers: HashSet<String> = HashSet::new();
        let mut packs = PackFiles::new(self.dir());
        let mut buf = Vec::new();
        for id in ids {
            report.recordings += 1;
            let rec = match self.recording(&id) {
                Ok(r) => r,
                Err(e) => {
                    report.problems.push(Problem {
                        recording: Some(id.to_hex()),
                        part: None,
                        range: None,
                        message: e.to_string(),
                    });
                    continue;
                }
            };
            let mut seen_parts = HashSet::new();
            for part in &rec.parts {
                let problem = |range: Option<(u64, u64)>, message: String| Problem {
                    recording: Some(id.to_hex()),
                    part: Some(part.role),
                    range,
                    message,
                };
                let linked: Option<Vec<u8>> = {
                    use rusqlite::OptionalExtension;
                    self.conn()
                        .prepare_cached(
                            "SELECT part FROM recording_parts WHERE recording = ?1 AND role = ?2",
                        )
                        .and_then(|mut s| {
                            s.query_row(rusqlite::params![&id.0[..], part.role.as_str()], |r| {
                                r.get(0)
                            })
                            .optional()
                        })
                        .map_err(&ierr)?
                };
                if linked.as_deref() != Some(&part.blake3[..]) {
                    report.problems.push(problem(
                        None,
                        "the index does not link this part to the recording".into(),
                    ));
                    continue;
                }
                let locs = match part_locations(self.conn(), self.dir(), &part.blake3) {
                    Ok(l) => l,
                    Err(e @ StoreError::Index { .. }) => return Err(e),
                    Err(e) => {
                        report
                            .problems
                            .push(problem(Some((0, part.len)), e.to_string()));
                        continue;
                    }
                };
                let total: u64 = locs.iter().map(|l| l.len as u64).sum();
                if total != part.len {
                    report.problems.push(problem(
                        Some((0, part.len)),
                        format!("its chunks cover {total} bytes, the part has {}", part.len),
                    ));
                    continue;
                }
                let first_visit = seen_parts.insert(part.blake3);
                let mut off = 0u64;
                for loc in &locs {
                    if headers.insert(loc.pack.clone()) {
                        if let Some(message) = header_problem(self, &loc.pack) {
                            report.problems.push(Problem {
                                recording: None,
                                part: None,
                                range: None,
                                message,
                            });
                        }
                    }
                    let range = (off, off + loc.len as u64);
                    off = range.1;
                    let verdict = match checked.get(&loc.hash) {
                        Some(v) => v.clone(),
                        None => {
                            report.chunks += 1;
                            let v = if full {
                                report.bytes += loc.len as u64;
                                buf.resize(loc.len as usize, 0);
                                packs.read_into(loc, &mut buf).err().map(|e| e.to_string())
                            } else {
                                quick_check(self, loc, &mut pack_sizes)
                            };
                            checked.insert(loc.hash, v.clone());
                            v
                        }
                    };
                    if let Some(msg) = verdict {
                        if first_visit {
                            report.problems.push(problem(Some(range), msg));
                        }
                    }
                }
            }
        }
        Ok(report)
    }
}

/// Check a pack's 32-byte file header; a missing pack is reported by its
/// chunks instead.
fn header_problem(store: &Store, pack: &str) -> Option<String> {
    let path = crate::layout::pack_path(store.dir(), pack);
    let mut head = [0u8; PACK_HEADER_LEN as usize];
    let f = std::fs::File::open(&path).ok()?;
    if let Err(e) = f.read_exact_at(&mut head, 0) {
        return Some(format!(
            "pack {}: cannot read its header: {e}",
            path.display()
        ));
    }
    check_header(&head, pack)
        .err()
        .map(|why| format!("pack {}: {why}", path.display()))
}

/// Header-only check of one chunk entry.
fn quick_check(
    store: &Store,
    loc: &ChunkLoc,
    sizes: &mut HashMap<String, Option<u64>>,
) -> Option<String> {
    let path = crate::layout::pack_path(store.dir(), &loc.pack);
    let size = *sizes
        .entry(loc.pack.clone())
        .or_insert_with(|| std::fs::metadata(&path).ok().map(|m| m.len()));
    let Some(size) = size else {
        return Some(format!("pack {} is missing", path.display()));
    };
    let end = loc.data_offset() + loc.stored_len as u64;
    if end > size {
        return Some(format!(
            "pack {} is {size} bytes, the chunk entry at {} ends at {end} (truncated)",
            path.display(),
            loc.offset
        ));
    }
    let mut h = [0u8; ENTRY_HEADER_LEN];
    let read = std::fs::File::open(&path).and_then(|f| f.read_exact_at(&mut h, loc.offset));
    if let Err(e) = read {
        return Some(format!("pack {}: {e}", path.display()));
    }
    match EntryHeader::decode(&h) {
        Err(why) => Some(format!(
            "pack {} at byte {}: {why}",
            path.display(),
            loc.offset
        )),
        Ok(hd)
            if hd.hash != loc.hash
                || hd.len != loc.len
                || hd.stored_len != loc.stored_len
                || hd.codec != loc.codec =>
        {
            Some(format!(
                "pack {} at byte {}: the entry header does not match the index",
                path.display(),
                loc.offset
            ))
        }
        Ok(_) => None,
    }
}
