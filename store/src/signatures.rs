//! The signatures a store keeps of its recordings: those a pull verified
//! and those a `push --sign` made, so `show` can say who signed a
//! recording. One file per (recording, key) under
//! `meta/signatures/<ab>/<recording ID>/<key id>`, holding the signature
//! object as on the remote (spec/STORE.md, "Signatures"). The objects are
//! self-verifying: they are checked again whenever they are read, so a file
//! altered on disk is reported, never believed.

use std::path::{Path, PathBuf};

use rrstore_format::RecordingId;

use crate::error::{Result, StoreError};
use crate::layout::{self, META_SIGNATURES};
use crate::signing::SignatureObject;
use crate::Store;

/// A signature read back from the store.
#[derive(Clone, Debug)]
pub enum Kept {
    Valid(SignatureObject),
    /// A file that does not verify (changed on disk): its path and why.
    Invalid {
        path: PathBuf,
        reason: String,
    },
}

fn dir_of(store_dir: &Path, id: &RecordingId) -> PathBuf {
    layout::meta_path(store_dir, META_SIGNATURES, &id.to_hex())
}

impl Store {
    /// Keep `sigs` (already verified) of recording `id`; a signature by a
    /// key already kept replaces the old file (both verify).
    pub fn keep_signatures(&self, id: &RecordingId, sigs: &[SignatureObject]) -> Result<()> {
        if sigs.is_empty() {
            return Ok(());
        }
        let dir = dir_of(self.dir(), id);
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
        for s in sigs {
            let path = dir.join(s.public.key_id());
            let tmp = dir.join(format!(".{}.tmp-{}", s.public.key_id(), std::process::id()));
            let r = std::fs::write(&tmp, s.encode()).and_then(|_| std::fs::rename(&tmp, &path));
            if let Err(e) = r {
                let _ = std::fs::remove_file(&tmp);
                return Err(StoreError::io(&path, e));
            }
        }
        Ok(())
    }

    /// The signatures kept of recording `id`, each verified again, ordered
    /// by key id.
    pub fn signatures(&self, id: &RecordingId) -> Result<Vec<Kept>> {
        let dir = dir_of(self.dir(), id);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io(&dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io(&dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let body = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
            let kept = match SignatureObject::decode_verified(&body, id) {
                Ok(s) if s.public.key_id() == name => Kept::Valid(s),
                Ok(s) => Kept::Invalid {
                    path,
                    reason: format!("it holds a signature by key {}", s.public.key_id()),
                },
                Err(reason) => Kept::Invalid { path, reason },
            };
            out.push((name, kept));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out.into_iter().map(|(_, k)| k).collect())
    }
}
