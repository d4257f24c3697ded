//! Where a store lives and the paths inside it (spec/STORE.md, "Layout").

use std::path::{Path, PathBuf};

/// File name of the SQLite index inside the store directory.
pub const INDEX_FILE: &str = "index.sqlite";
/// Directory holding the pack files, fanned out by the first two hex digits.
pub const PACKS_DIR: &str = "packs";
/// Lock taken (shared) by pack writers while creating a pack file and
/// (exclusive) by gc while sweeping orphan pack files.
pub const PACKS_LOCK: &str = "packs.lock";
/// Lock held exclusively by a running gc (one gc at a time).
pub const GC_LOCK: &str = "gc.lock";
/// Scratch space (record runs, temporary files), same file system as packs.
pub const TMP_DIR: &str = "tmp";
/// The store marker: magic, format version, store ID (spec/STORE.md).
pub const CONFIG_FILE: &str = "config";
/// Space kept free for SQLite's WAL index (`index.sqlite-shm`): deleted to
/// let the index open on a full disk, made again when space is back
/// (store/src/index/shm_reserve.rs).
pub const SHM_RESERVE: &str = "index-shm.reserve";
/// Recovery metadata of recordings and parts, for `repair`.
pub const META_DIR: &str = "meta";
/// Under [`META_DIR`]: one file per recording.
pub const META_RECORDINGS: &str = "recordings";
/// Under [`META_DIR`]: one chunk list per part.
pub const META_PARTS: &str = "parts";
/// Under [`META_DIR`]: verified signatures of recordings, one directory per
/// recording (store/src/signatures.rs).
pub const META_SIGNATURES: &str = "signatures";
/// Under [`META_DIR`]: recording files `repair` could not restore.
pub const META_LOST: &str = "lost";

/// The store directory: `explicit` (`--store DIR`), else `default`
/// (the caller's setting: `$RRSTORE_DIR`), else `$XDG_DATA_HOME/rrstore`,
/// else `~/.local/share/rrstore`.
pub fn resolve_dir(explicit: Option<&Path>, default: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit.or(default) {
        return Some(p.to_path_buf());
    }
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = env("XDG_DATA_HOME") {
        return Some(p.join("rrstore"));
    }
    env("HOME").map(|h| h.join(".local/share/rrstore"))
}

/// Relative path of a pack file: `packs/<first two hex digits>/<name>.pack`.
pub fn pack_path(dir: &Path, name: &str) -> PathBuf {
    let fan = name.get(..2).unwrap_or("00");
    dir.join(PACKS_DIR).join(fan).join(format!("{name}.pack"))
}

/// The pack files (`packs/<fan>/<name>.pack`) as the file system lists them
/// now, in no order; a fan directory or entry that cannot be read is
/// skipped (the callers count or sweep what they can see; `repair`, which
/// must see everything, lists strictly itself).
pub fn pack_files(dir: &Path) -> impl Iterator<Item = PathBuf> {
    std::fs::read_dir(dir.join(PACKS_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|fan| {
            std::fs::read_dir(fan.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
}

/// `meta/<kind>/<first two hex digits>/<hex>`.
pub fn meta_path(dir: &Path, kind: &str, hex: &str) -> PathBuf {
    let fan = hex.get(..2).unwrap_or("00");
    dir.join(META_DIR).join(kind).join(fan).join(hex)
}
