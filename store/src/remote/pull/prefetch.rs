//! The first stage of `pull`: fetch, for all the recordings of a pull at
//! once, what they lack before any is committed: their manifests, the
//! part objects, the chunk-list nodes level by level, and the chunks (into
//! the pull's local pack, indexed in batches). Done per recording, each of
//! these was a round trip of its own: 27 recordings cost ~100 sequential
//! rounds. Nothing here decides a recording's fate: what fails to arrive
//! or to check is left out silently, and the per-recording stage
//! (`pull::fetch_parts`) fetches it again and reports it for the
//! recording that needs it.

use std::collections::{HashMap, HashSet};

use rrstore_format::chunk::ChunkHash;
use rrstore_format::RecordingId;

use super::Session;
use crate::remote::error::Result;
use crate::remote::v2::layout::{self, Manifest, PartObject};
use crate::remote::v3::Kind;
use crate::remote::Event;

impl Session<'_> {
    /// Prefetch for `todo` (manifests filled in where missing, those that
    /// fail left `None` for the per-recording stage to report).
    pub(super) fn prefetch(
        &mut self,
        todo: &mut [(RecordingId, Option<Manifest>)],
        progress: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let remote = self.remote;
        let want: Vec<String> = todo
            .iter()
            .filter(|(_, m)| m.is_none())
            .map(|(id, _)| layout::recording_key(id))
            .collect();
        if !want.is_empty() {
            let mut got: HashMap<String, Manifest> = HashMap::new();
            let mut manifest_bytes = 0u64;
            // Those fetched when the session opened, then the others.
            let (opened, want): (Vec<String>, Vec<String>) =
                want.into_iter().partition(|k| self.opened.contains_key(k));
            let opened: Vec<(String, Option<Vec<u8>>)> = opened
                .into_iter()
                .filter_map(|k| self.opened.remove_entry(&k))
                .collect();
            let decode = |todo: &[(RecordingId, Option<Manifest>)],
                          got: &mut HashMap<String, Manifest>,
                          key: String,
                          body: Option<Vec<u8>>| {
                let id = todo
                    .iter()
                    .find(|(id, _)| layout::recording_key(id) == key)
                    .map(|t| t.0);
                if let (Some(id), Some(body)) = (id, body) {
                    if let Ok(m) = layout::decode_manifest(&body, &id) {
                        got.insert(key, m);
                    }
                }
            };
            for (key, body) in opened {
                decode(&*todo, &mut got, key, body);
            }
            remote.get_all(want.into_iter(), &mut |key, body| {
                if let Some(b) = &body {
                    manifest_bytes += b.len() as u64;
                }
                decode(&*todo, &mut got, key, body);
                Ok(())
            })?;
            self.manifest_bytes += manifest_bytes;
            for (id, m) in todo.iter_mut() {
                if m.is_none() {
                    *m = got.remove(&layout::recording_key(id));
                }
            }
        }
        let parts: Vec<([u8; 32], u64)> = self.store.xfer_reading(|store| {
            let mut parts = Vec::new();
            let mut seen = HashSet::new();
            for (_, m) in todo.iter() {
                for p in m.iter().flat_map(|m| &m.recording.parts) {
                    if seen.insert(p.blake3) && !store.has_part(&p.blake3)? {
                        parts.push((p.blake3, p.len));
                    }
                }
            }
            Ok::<_, crate::remote::error::RemoteError>(parts)
        })?;
        if parts.is_empty() {
            return Ok(());
        }
        // A new store needs about every blob of what it pulls: rather than
        // three rounds of lookups per tree level, one read of the index.
        let ahead = if self.store.xfer_holds_no_chunk()? {
            let logical: u64 = parts.iter().map(|p| p.1).sum();
            self.blobs.read_index_whole(logical)?
        } else {
            Vec::new()
        };
        progress(Event::Phase(format!(
            "fetching the chunk lists of {} parts",
            parts.len()
        )));
        let mut names: Vec<[u8; 32]> = parts.iter().map(|p| p.0).collect();
        let mut objs: Vec<([u8; 32], String, PartObject)> = Vec::new();
        if !ahead.is_empty() {
            // The part objects and every tree node of the index objects
            // just read, in one round; nodes are checked against their
            // names here and decoded when their level is known.
            let mut entries = Vec::new();
            let mut rest = Vec::new();
            for n in names {
                match self.blobs.lookup(Kind::Part, &n)? {
                    Some(e) => entries.push(e),
                    None => rest.push(n),
                }
            }
            names = rest;
            entries.extend(ahead);
            let bodies = &mut self.node_bodies;
            self.blobs.get_packed(entries, &mut |e, at, body| {
                let Ok(body) = body else { return Ok(()) };
                match e.kind {
                    Kind::Part => {
                        if let Ok(obj) = layout::decode_part(&body) {
                            objs.push((e.name, at, obj));
                        }
                    }
                    Kind::Node if *blake3::hash(&body).as_bytes() == e.name => {
                        bodies.insert(e.name, body);
                    }
                    _ => {}
                }
                Ok(())
            })?;
        }
        self.blobs.get(Kind::Part, &names, &mut |h, at, body| {
            if let Some(obj) = body.ok().and_then(|b| layout::decode_part(&b).ok()) {
                objs.push((h, at, obj));
            }
            Ok(())
        })?;
        // Nodes of every part's tree, one round per level for all parts.
        for v in [1, 2] {
            let tops: Vec<&PartObject> = objs
                .iter()
                .map(|o| &o.2)
                .filter(|o| (o.version == 1) == (v == 1))
                .collect();
            self.fetch_nodes(&tops, true)?;
        }
        // Nodes fetched ahead that no tree of this pull reached (other
        // recordings of the same pushes): nothing will ask for them.
        self.node_bodies = HashMap::new();
        // The chunks they list that the store lacks, all at once.
        let mut listed: Vec<(ChunkHash, u32)> = Vec::new();
        let mut queued = HashSet::new();
        for (_, _, obj) in &objs {
            let Some(chunks) = self.chunk_list_quiet(obj)? else {
                continue;
            };
            listed.extend(chunks.into_iter().filter(|(h, _)| queued.insert(*h)));
        }
        let (missing, total) = self.lacking(&listed)?;
        progress(Event::Start {
            what: format!("receiving {} chunks", missing.len()),
            total,
        });
        self.fetch_chunks(&missing, true, progress)?;
        self.prefetched
            .extend(objs.into_iter().map(|(h, at, o)| (h, (at, o))));
        Ok(())
    }
}
