//! `rrstore remote migrate NAME`: convert a version 2 remote to version 3
//! in place (spec/REMOTE.md, "Migration"): every chunk, tree node and part
//! object is checked and copied as a blob into packs, then indexed; the
//! manifests and image entries are rewritten as version 3; the layout
//! marker is written; only then are the version 2 objects deleted.

use std::path::Path;

use serde::Serialize;

use super::blobs::{layout_version, Blobs};
use super::client::Remote;
use super::error::Result;
use super::local::check_entry;
use super::v2::layout;
use super::v3::{self, Entry, Kind};
use super::Event;

/// GETs per round (their bodies are held until appended).
const ROUND: usize = 256;

/// What a migration did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MigrateReport {
    /// The layout before (3: there was nothing to do).
    pub from: u32,
    pub blobs: u64,
    pub packs: u64,
    pub index_objects: u64,
    pub manifests: u64,
    pub images: u64,
    /// Version 2 objects deleted once everything was copied.
    pub deleted: u64,
    /// Objects that were damaged and left out, and why.
    pub damaged: Vec<String>,
}

pub fn migrate(
    dir: &Path,
    remote: &Remote,
    progress: &mut dyn FnMut(Event),
) -> Result<MigrateReport> {
    let mut report = MigrateReport {
        from: layout_version(remote)?,
        ..Default::default()
    };
    if report.from == 3 {
        return Ok(report);
    }
    let mut old: Vec<String> = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut pack: Vec<u8> = Vec::new();
    let mut here: Vec<Entry> = Vec::new();
    let mut flush = |pack: &mut Vec<u8>, here: &mut Vec<Entry>, report: &mut MigrateReport| {
        if pack.is_empty() {
            return Ok(());
        }
        let name = *blake3::hash(pack).as_bytes();
        remote.put(&v3::pack_key(&name), std::mem::take(pack))?;
        report.packs += 1;
        for mut e in here.drain(..) {
            e.pack = name;
            entries.push(e);
        }
        Ok::<(), super::RemoteError>(())
    };
    for (kind, dir_key) in [
        (Kind::Chunk, layout::CHUNKS),
        (Kind::Node, layout::LISTS),
        (Kind::Part, layout::PARTS),
    ] {
        progress(Event::Phase(format!("copying {dir_key}")));
        // Objects by their exact names: only those are deleted after.
        let keys: Vec<String> = remote
            .list(dir_key)?
            .into_iter()
            .filter(|k| super::names::is_object(k))
            .collect();
        for round in keys.chunks(ROUND) {
            let mut got: Vec<(String, [u8; 32], Vec<u8>)> = Vec::new();
            remote.get_all(round.iter().cloned(), &mut |key, body| {
                let Some(h) = layout::hash_of_key(&key, dir_key) else {
                    return Ok(());
                };
                let Some(body) = body else { return Ok(()) };
                let checked = match kind {
                    Kind::Chunk => check_entry(&body, &h).map(drop),
                    Kind::Node if blake3::hash(&body).as_bytes() != &h => {
                        Err("its bytes do not hash to its name".into())
                    }
                    Kind::Node => Ok(()),
                    Kind::Part => layout::decode_part(&body).map(drop),
                };
                match checked {
                    Ok(()) => got.push((key, h, body)),
                    Err(r) => report.damaged.push(format!("{key}: {r}")),
                }
                Ok(())
            })?;
            got.sort_by(|a, b| a.0.cmp(&b.0));
            for (key, name, body) in got {
                here.push(Entry {
                    kind,
                    name,
                    pack: [0; 32],
                    offset: pack.len() as u64,
                    len: body.len() as u32,
                });
                pack.extend_from_slice(&body);
                report.blobs += 1;
                progress(Event::Bytes(body.len() as u64));
                old.push(key);
                if pack.len() as u64 >= remote.pack_target {
                    flush(&mut pack, &mut here, &mut report)?;
                }
            }
        }
    }
    flush(&mut pack, &mut here, &mut report)?;
    progress(Event::Phase("writing the index".into()));
    v3::push::put_index(remote, &entries, &mut |_, _, _| {
        report.index_objects += 1;
        Ok(())
    })?;
    progress(Event::Phase("rewriting manifests".into()));
    let (manifests, images) = rewrite_entries(remote, &mut report.damaged)?;
    report.manifests = manifests;
    report.images = images;
    remote.put(v3::MARKER, v3::MARKER_BODY.to_vec())?;
    progress(Event::Phase("deleting version 2 objects".into()));
    report.deleted = remote.delete_all(&old)?;
    // Fill this store's cache now: the next push or pull needs no refresh.
    let mut b = Blobs::new(remote);
    b.attach(dir)?;
    Ok(report)
}

/// Rewrite every manifest and image entry in version 3; damaged ones are
/// left as they are and named.
fn rewrite_entries(remote: &Remote, damaged: &mut Vec<String>) -> Result<(u64, u64)> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    let keys = remote.list(layout::RECORDINGS)?;
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let (Some(id), Some(body)) = (layout::id_of_key(&key), body) else {
            return Ok(());
        };
        match layout::decode_manifest(&body, &id) {
            Ok(mut m) => {
                m.version = layout::MANIFEST_VERSION;
                match layout::encode_manifest(&m) {
                    Ok(b) => out.push((key, b)),
                    Err(r) => damaged.push(format!("{key}: {r}")),
                }
            }
            Err(r) => damaged.push(format!("{key}: {r}")),
        }
        Ok(())
    })?;
    let manifests = out.len() as u64;
    let keys = remote.list(layout::IMAGES)?;
    let mut images = 0u64;
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let (Some(h), Some(body)) = (layout::hash_of_key(&key, layout::IMAGES), body) else {
            return Ok(());
        };
        match layout::decode_image(&body, &h) {
            Ok(mut e) => {
                e.version = layout::MANIFEST_VERSION;
                match layout::encode_image(&e) {
                    Ok(b) => {
                        out.push((key, b));
                        images += 1;
                    }
                    Err(r) => damaged.push(format!("{key}: {r}")),
                }
            }
            Err(r) => damaged.push(format!("{key}: {r}")),
        }
        Ok(())
    })?;
    remote.put_all(out.into_iter().map(Ok), &mut |_| {})?;
    Ok((manifests, images))
}
