//! Compiled images cached by what made them (spec/COMPILE.md, section
//! 3): `DIR/<key>/image`, `DIR/<key>/provenance.json` and the compiler's
//! stderr `DIR/<key>/log.txt`, where the key
//! is the blake3 of the IR's hash, the compiler binary's hash, the target
//! and every flag. An entry appears whole or not at all (written in a
//! temporary directory, then renamed), so concurrent compiles of the same
//! inputs race harmlessly (the loser's copy is dropped) and a killed one
//! leaves nothing a later run takes for a result. An entry whose image no
//! longer hashes to its provenance is ignored and compiled again.

use std::path::Path;

use super::command::Plan;
use super::{CompileError, Compiled, Provenance, Toolchain};

/// The cache key of compiling `ir_hash` with `tc` as `plan` says (hex).
pub fn key(ir_hash: &[u8; 32], tc: &Toolchain, plan: &Plan) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"rrstore compiled image v1\0");
    h.update(ir_hash);
    h.update(&tc.blake3);
    h.update(plan.target.as_bytes());
    for f in plan.flags.iter().chain(&plan.after) {
        h.update(b"\0");
        h.update(f.as_bytes());
    }
    h.finalize().to_hex().to_string()
}

/// The cached image for `key`, if a whole and intact one is there.
pub fn lookup(dir: &Path, key: &str) -> Result<Option<Compiled>, CompileError> {
    let entry = dir.join(key);
    let (Ok(meta), Ok(bytes)) = (
        std::fs::read(entry.join("provenance.json")),
        std::fs::read(entry.join("image")),
    ) else {
        return Ok(None);
    };
    let Ok(mut provenance) = serde_json::from_slice::<Provenance>(&meta) else {
        return Ok(None);
    };
    if blake3::hash(&bytes).to_hex().as_str() != provenance.image_blake3 {
        return Ok(None);
    }
    provenance.cached = true;
    provenance.compile_ns = 0;
    provenance.cached_image = Some(entry.join("image"));
    let log = std::fs::read_to_string(entry.join("log.txt")).unwrap_or_default();
    Ok(Some(Compiled {
        bytes,
        provenance,
        log,
    }))
}

/// Cache `bytes` under `key`; returns the cached image's path.
pub fn insert(
    dir: &Path,
    key: &str,
    bytes: &[u8],
    provenance: &Provenance,
    log: &str,
) -> Result<std::path::PathBuf, CompileError> {
    let io = |what, path: &Path, source| CompileError::Io {
        what,
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| io("creating", dir, e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".entry-")
        .tempdir_in(dir)
        .map_err(|e| io("creating a directory in", dir, e))?;
    let write = |name: &str, data: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(&p, data)
            .and_then(|_| std::fs::File::open(&p)?.sync_all())
            .map_err(|e| io("writing", &p, e))
    };
    write("image", bytes)?;
    let meta = serde_json::to_vec_pretty(provenance).unwrap_or_default();
    write("log.txt", log.as_bytes())?;
    write("provenance.json", &meta)?;
    let done = dir.join(key);
    match std::fs::rename(tmp.path(), &done) {
        Ok(()) => {
            // The directory is the entry's now; nothing to remove.
            let _ = tmp.keep();
            Ok(done.join("image"))
        }
        // Another process cached the same inputs first.
        Err(_) if done.join("provenance.json").is_file() => Ok(done.join("image")),
        Err(e) => Err(io("renaming into", &done, e)),
    }
}
