//! `rrstore rm NAME:ID...` and `rrstore remote prune NAME` (spec/REMOTE.md,
//! "Removal"). `rm` deletes manifests. `prune`, holding the exclusive
//! lock (so no push runs), finds every blob a manifest or image entry
//! still reaches, copies the live blobs of packs that also hold dead ones
//! into new packs, writes one new index of every live blob, and only then
//! deletes the old index objects, the emptied packs and the packs no index
//! named. A reader sees the old or the new index, both complete. It also
//! compacts the shared history (`history::compact`).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rrstore_format::RecordingId;
use serde::Serialize;

use super::blobs::Blobs;
use super::check::{part_chunks, Node};
use super::client::Remote;
use super::error::{RemoteError, Result};
use super::names;
use super::pull::corrupt;
use super::v2::layout;
use super::v3::{self, Entry, Kind};
use super::Event;

#[derive(Clone, Debug, Default, Serialize)]
pub struct PruneReport {
    pub live_blobs: u64,
    pub dead_blobs: u64,
    /// Packs deleted (every blob dead, or left by an interrupted push).
    pub packs_deleted: u64,
    /// Packs rewritten without their dead blobs, and the packs written.
    pub packs_repacked: u64,
    pub packs_written: u64,
    pub index_objects_deleted: u64,
    pub index_objects_written: u64,
    /// Bytes of the deleted and repacked packs, and of the new packs.
    pub bytes_freed: u64,
    pub bytes_written: u64,
    /// Shared history (spec/REMOTE.md, "Shared history"): rows of removed
    /// recordings dropped, rows kept, batches written and deleted.
    pub history_rows_dropped: u64,
    pub history_rows_kept: u64,
    pub history_batches_written: u64,
    pub history_batches_deleted: u64,
}

/// Delete the manifests of recordings `ids`; returns those that were there.
pub fn remove(remote: &Remote, ids: &[RecordingId]) -> Result<Vec<RecordingId>> {
    let there: HashSet<RecordingId> = remote
        .list(layout::RECORDINGS)?
        .iter()
        .filter_map(|k| layout::id_of_key(k))
        .collect();
    let gone: Vec<RecordingId> = ids.iter().filter(|i| there.contains(i)).copied().collect();
    let keys: Vec<String> = gone.iter().map(layout::recording_key).collect();
    remote.delete_all(&keys)?;
    // After the manifests (spec/REMOTE.md, "Signatures"): a signature is
    // never left without its manifest by anything but an interrupted rm.
    // Only names of signature objects: anything else someone put there
    // is left alone (spec/REMOTE.md, "Links and names").
    let mut signatures = Vec::new();
    for id in &gone {
        signatures.extend(
            remote
                .list(&format!("{}{}/", super::signature::SIGNATURES, id.to_hex()))?
                .into_iter()
                .filter(|k| names::is_object(k)),
        );
    }
    remote.delete_all(&signatures)?;
    Ok(gone)
}

pub fn prune(dir: &Path, remote: &Remote, progress: &mut dyn FnMut(Event)) -> Result<PruneReport> {
    if super::blobs::layout_version(remote)? != 3 {
        return Err(RemoteError::NotV3 {
            remote: remote.name.clone(),
        });
    }
    progress(Event::Phase("taking the exclusive lock".into()));
    let _lock = remote.lock_exclusive()?;
    let blobs = Blobs::open(dir, remote)?;
    let Some(cache) = &blobs.cache else {
        return Err(RemoteError::NotV3 {
            remote: remote.name.clone(),
        });
    };
    if let Some(b) = blobs.bad_index.first() {
        return Err(corrupt(
            remote,
            &b.key,
            format!("{} (prune cannot tell what is live)", b.reason),
        ));
    }
    // Index objects and packs by their exact names: nothing else under
    // `index/` or `packs/` is rrstore's to delete.
    let index_keys: Vec<String> = remote
        .list(v3::INDEX)?
        .into_iter()
        .filter(|k| names::is_object(k))
        .collect();
    // What is live: everything a manifest or image entry reaches.
    progress(Event::Phase("finding live data".into()));
    let mut live: HashSet<(Kind, [u8; 32])> = HashSet::new();
    let mut nodes: HashMap<[u8; 32], Node> = HashMap::new();
    let mut parts: Vec<[u8; 32]> = Vec::new();
    let mut bad: Option<(String, String)> = None;
    let mut recordings: HashSet<RecordingId> = HashSet::new();
    let keys = remote.list(layout::RECORDINGS)?;
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let (Some(id), Some(body)) = (layout::id_of_key(&key), body) else {
            return Ok(());
        };
        match layout::decode_manifest(&body, &id) {
            Ok(m) => {
                recordings.insert(id);
                parts.extend(m.recording.parts.iter().map(|p| p.blake3))
            }
            Err(r) => bad = Some((key, r)),
        }
        Ok(())
    })?;
    let keys = remote.list(layout::IMAGES)?;
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let (Some(h), Some(body)) = (layout::hash_of_key(&key, layout::IMAGES), body) else {
            return Ok(());
        };
        match layout::decode_image(&body, &h) {
            Ok(_) => parts.push(h),
            Err(r) => bad = Some((key, r)),
        }
        Ok(())
    })?;
    if let Some((key, r)) = bad {
        return Err(corrupt(
            remote,
            &key,
            format!("{r} (prune cannot tell what is live)"),
        ));
    }
    // The history of the recordings still there, in one batch.
    progress(Event::Phase("compacting the replay history".into()));
    let h = super::history::compact(dir, remote, &recordings)?;
    parts.sort();
    parts.dedup();
    for p in &parts {
        match part_chunks(&blobs, &mut nodes, p)? {
            Ok(refs) => {
                live.insert((Kind::Part, *p));
                live.extend(refs.into_iter().map(|r| (Kind::Chunk, r.0)));
            }
            Err(r) => {
                return Err(corrupt(
                    remote,
                    &layout::part_key(p),
                    format!("{r} (prune cannot tell what is live)"),
                ))
            }
        }
    }
    live.extend(nodes.keys().map(|h| (Kind::Node, *h)));
    // Each live blob once, from the first pack that has it.
    let mut by_pack: HashMap<[u8; 32], Vec<(Entry, bool)>> = HashMap::new();
    let mut kept: HashSet<(Kind, [u8; 32])> = HashSet::new();
    cache.each(&mut |e| {
        let alive = live.contains(&(e.kind, e.name)) && kept.insert((e.kind, e.name));
        by_pack.entry(e.pack).or_default().push((e, alive));
        Ok(())
    })?;
    let mut report = PruneReport {
        live_blobs: kept.len() as u64,
        history_rows_dropped: h.rows_dropped,
        history_rows_kept: h.rows_kept,
        history_batches_written: h.batches_written,
        history_batches_deleted: h.batches_deleted,
        ..Default::default()
    };
    let sizes: HashMap<String, u64> = remote
        .list_sized(v3::PACKS)?
        .into_iter()
        .filter(|(k, _)| names::is_object(k))
        .collect();
    let mut new_index: Vec<Entry> = Vec::new();
    let mut doomed: Vec<String> = Vec::new();
    let mut out: Vec<u8> = Vec::new();
    let mut out_entries: Vec<Entry> = Vec::new();
    let flush =
        |out: &mut Vec<u8>, es: &mut Vec<Entry>, r: &mut PruneReport, idx: &mut Vec<Entry>| {
            if out.is_empty() {
                return Ok::<(), RemoteError>(());
            }
            let name = *blake3::hash(out).as_bytes();
            r.bytes_written += out.len() as u64;
            remote.put(&v3::pack_key(&name), std::mem::take(out))?;
            r.packs_written += 1;
            for mut e in es.drain(..) {
                e.pack = name;
                idx.push(e);
            }
            Ok(())
        };
    let mut packs: Vec<[u8; 32]> = by_pack.keys().copied().collect();
    packs.sort();
    progress(Event::Phase("repacking".into()));
    for pack in packs {
        let es = &by_pack[&pack];
        let key = v3::pack_key(&pack);
        let dead = es.iter().filter(|e| !e.1).count();
        report.dead_blobs += dead as u64;
        if dead == 0 {
            new_index.extend(es.iter().map(|e| e.0.clone()));
            continue;
        }
        let size = sizes.get(&key).copied().unwrap_or(0);
        if dead < es.len() {
            let body = remote.get(&key)?.ok_or_else(|| {
                corrupt(remote, &key, "missing (an index object names it)".into())
            })?;
            for (e, alive) in es {
                if !alive {
                    continue;
                }
                let b = body
                    .get(e.offset as usize..(e.offset + e.len as u64) as usize)
                    .ok_or_else(|| corrupt(remote, &key, "shorter than its index says".into()))?;
                out_entries.push(Entry {
                    offset: out.len() as u64,
                    ..e.clone()
                });
                out.extend_from_slice(b);
                if out.len() as u64 >= remote.pack_target {
                    flush(&mut out, &mut out_entries, &mut report, &mut new_index)?;
                }
            }
            report.packs_repacked += 1;
        } else {
            report.packs_deleted += 1;
        }
        report.bytes_freed += size;
        doomed.push(key);
    }
    flush(&mut out, &mut out_entries, &mut report, &mut new_index)?;
    // Packs no index names: left by interrupted pushes (none runs now).
    let indexed: HashSet<String> = by_pack.keys().map(v3::pack_key).collect();
    for (k, size) in &sizes {
        if !indexed.contains(k) {
            report.packs_deleted += 1;
            report.bytes_freed += size;
            doomed.push(k.clone());
        }
    }
    if doomed.is_empty() && index_keys.len() <= 1 {
        return Ok(report);
    }
    // The new index first, then the old one goes, then the packs.
    progress(Event::Phase("writing the new index".into()));
    let mut written = HashSet::new();
    v3::push::put_index(remote, &new_index, &mut |name, _, _| {
        written.insert(v3::index_key(name));
        report.index_objects_written += 1;
        Ok(())
    })?;
    let old: Vec<String> = index_keys
        .into_iter()
        .filter(|k| !written.contains(k))
        .collect();
    report.index_objects_deleted = remote.delete_all(&old)?;
    remote.delete_all(&doomed)?;
    // This store's cache follows at once.
    let mut b = Blobs::new(remote);
    b.attach(dir)?;
    Ok(report)
}
