//! Device images as store objects: `rrstore image add FILE [--label L]`
//! stores the file's bytes content-addressed (blake3, deduplicated against
//! every recording's image part) and indexes it in the `images` table with
//! its target and a label; `image ls` lists them; regression commands name
//! an image by a hash prefix, its label, or a file (added on the fly).

use std::path::Path;

use rusqlite::OptionalExtension;
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::index::{hash32, u};
use crate::objects::PutReport;
use crate::Store;

/// One stored image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ImageInfo {
    /// blake3 of the image bytes (hex).
    pub hash: String,
    pub len: u64,
    /// Target short name (`x86_64`, `sm_90`, `gfx942`, ...).
    pub target: String,
    pub label: String,
    /// The file it was added from.
    pub source: String,
    /// Unix seconds.
    pub added_at: i64,
}

impl ImageInfo {
    /// The raw 32-byte hash.
    pub fn hash_bytes(&self) -> [u8; 32] {
        rrstore_format::id::parse_hex32(&self.hash).unwrap_or([0; 32])
    }

    /// First 12 hex digits.
    pub fn short(&self) -> &str {
        &self.hash[..12.min(self.hash.len())]
    }
}

/// What `add_image` did.
#[derive(Clone, Debug)]
pub struct AddedImage {
    pub image: ImageInfo,
    /// The image was already indexed (its label may have been updated).
    pub present: bool,
    pub put: PutReport,
}

const COLUMNS: &str = "hash_hex, len, target, label, source, added_at";

fn row(r: &rusqlite::Row) -> rusqlite::Result<ImageInfo> {
    Ok(ImageInfo {
        hash: r.get(0)?,
        len: u(r.get(1)?),
        target: r.get(2)?,
        label: r.get(3)?,
        source: r.get(4)?,
        added_at: r.get(5)?,
    })
}

/// The `images` row of a new image (an existing one keeps its row; only a
/// non-empty label replaces its label).
struct Row<'a> {
    target: &'a str,
    label: &'a str,
    source: &'a str,
    now: i64,
}

impl Row<'_> {
    fn insert(
        &self,
        tx: &rusqlite::Transaction,
        hash: &[u8; 32],
        len: u64,
    ) -> rusqlite::Result<()> {
        tx.execute(
            "INSERT INTO images (hash, hash_hex, len, target, label, source, added_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (hash) DO UPDATE SET \
             label = CASE WHEN excluded.label != '' THEN excluded.label ELSE images.label END",
            rusqlite::params![
                &hash[..],
                rrstore_format::id::hex(hash),
                len as i64,
                self.target,
                self.label,
                self.source,
                self.now
            ],
        )
        .map(|_| ())
    }
}

impl Store {
    /// Store the image file at `path` with `label` (an existing image keeps
    /// its label unless a non-empty one is given).
    pub fn add_image(&mut self, path: &Path, label: &str) -> Result<AddedImage> {
        let mut head = vec![0u8; 4096];
        let n = {
            use std::io::Read;
            let mut f = std::fs::File::open(path).map_err(|e| StoreError::Source {
                path: path.to_path_buf(),
                source: e,
            })?;
            let mut n = 0;
            loop {
                let k = f.read(&mut head[n..]).map_err(|e| StoreError::Source {
                    path: path.to_path_buf(),
                    source: e,
                })?;
                if k == 0 || n + k == head.len() {
                    n += k;
                    break;
                }
                n += k;
            }
            n
        };
        let target = rrstore_format::image::detect(&head[..n]).short_name();
        let source = std::fs::canonicalize(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string();
        let (hash, _) = crate::objects::hash_file(path)?;
        let present = self.image(&hash)?.is_some();
        let row = Row {
            target: &target,
            label,
            source: &source,
            now: crate::now_unix(),
        };
        let put = self.put_object(path, &|tx, hash, len| row.insert(tx, hash, len))?;
        self.added(put, present)
    }

    /// Store `data`, one device image read from the file at `path`, with
    /// its `target` column, `label` and `source` description.
    pub(crate) fn add_image_bytes(
        &mut self,
        path: &Path,
        data: &[u8],
        target: &str,
        label: &str,
        source: &str,
    ) -> Result<AddedImage> {
        let present = self.image(blake3::hash(data).as_bytes())?.is_some();
        let row = Row {
            target,
            label,
            source,
            now: crate::now_unix(),
        };
        let put = self.put_object_bytes(path, data, &|tx, hash, len| row.insert(tx, hash, len))?;
        self.added(put, present)
    }

    fn added(&self, put: PutReport, present: bool) -> Result<AddedImage> {
        let image = self.image(&put.hash)?.ok_or_else(|| {
            StoreError::Internal("the image row vanished right after it was written".into())
        })?;
        Ok(AddedImage {
            image,
            present,
            put,
        })
    }

    /// The indexed image with this hash.
    pub fn image(&self, hash: &[u8; 32]) -> Result<Option<ImageInfo>> {
        self.conn()
            .prepare_cached(&format!("SELECT {COLUMNS} FROM images WHERE hash = ?1"))
            .and_then(|mut s| s.query_row([&hash[..]], row).optional())
            .map_err(self.ierr("reading an image row"))
    }

    /// All images, oldest first.
    pub fn images(&self) -> Result<Vec<ImageInfo>> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM images ORDER BY added_at, label, hash_hex"
            ))
            .and_then(|mut s| s.query_map([], row)?.collect())
            .map_err(self.ierr("listing images"))
    }

    /// An image by unique hash prefix (at least 4 hex digits) or exact label.
    pub fn resolve_image(&self, spec: &str) -> Result<ImageInfo> {
        let p = spec.trim().to_ascii_lowercase();
        let mut found: Vec<ImageInfo> = Vec::new();
        if p.len() >= 4 && p.len() <= 64 && p.bytes().all(|b| b.is_ascii_hexdigit()) {
            found = self
                .conn()
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM images WHERE substr(hash_hex, 1, ?2) = ?1 LIMIT 11"
                ))
                .and_then(|mut s| {
                    s.query_map(rusqlite::params![p, p.len() as i64], row)?
                        .collect()
                })
                .map_err(self.ierr("resolving an image hash prefix"))?;
        }
        if found.is_empty() {
            found = self
                .conn()
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM images WHERE label = ?1 LIMIT 11"
                ))
                .and_then(|mut s| s.query_map([spec], row)?.collect())
                .map_err(self.ierr("resolving an image label"))?;
        }
        match found.len() {
            0 => Err(StoreError::ObjectNotFound(format!(
                "no stored image matches `{spec}` (by hash prefix or label); see `rrstore image ls`, or give the image file"
            ))),
            1 => Ok(found.remove(0)),
            _ => Err(StoreError::Ambiguous {
                prefix: spec.to_string(),
                candidates: found
                    .iter()
                    .map(|i| format!("{} ({})", i.short(), i.label))
                    .collect(),
            }),
        }
    }

    /// The images `spec` names: one by unique hash prefix, else every image
    /// with that exact label (the device images of one offload application
    /// share its label: the caller picks one per recording).
    pub fn resolve_image_set(&self, spec: &str) -> Result<Vec<ImageInfo>> {
        let by_label: Vec<ImageInfo> = self
            .conn()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM images WHERE label = ?1 ORDER BY added_at, hash_hex"
            ))
            .and_then(|mut s| s.query_map([spec], row)?.collect())
            .map_err(self.ierr("resolving an image label"))?;
        match self.resolve_image(spec) {
            Err(StoreError::Ambiguous { .. }) if by_label.len() > 1 => Ok(by_label),
            other => other.map(|i| vec![i]),
        }
    }

    /// Labels of the indexed images among `hashes` (empty when unknown).
    pub fn image_label(&self, hash: &[u8; 32]) -> Result<String> {
        Ok(self.image(hash)?.map(|i| i.label).unwrap_or_default())
    }

    /// The image part hash of a stored recording, from the index.
    pub fn recording_image_hash(
        &self,
        id: &rrstore_format::RecordingId,
    ) -> Result<Option<[u8; 32]>> {
        let v: Option<Option<Vec<u8>>> = self
            .conn()
            .prepare_cached("SELECT image_hash FROM recordings WHERE id = ?1")
            .and_then(|mut s| s.query_row([&id.0[..]], |r| r.get(0)).optional())
            .map_err(self.ierr("reading a recording's image hash"))?;
        Ok(v.flatten().map(hash32))
    }
}
