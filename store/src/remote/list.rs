//! What a remote holds, from its manifests alone (`rrstore ls NAME:`), and
//! choosing recordings on a remote (`pull` by ID prefix, kernel, label).
//! A corrupt manifest costs only its own recording: it is set aside as
//! [`Damaged`] and the others are listed or chosen.

use rrstore_format::{PartRole, RecordingId};

use super::client::Remote;
use super::error::{RemoteError, Result};
use super::v2::layout::{self, Manifest};
use super::Damaged;
use crate::query::{LsFilter, LsSort, RecordingSummary};

/// Recording IDs on the remote (one LIST).
pub fn ids(remote: &Remote) -> Result<Vec<RecordingId>> {
    let mut v: Vec<RecordingId> = remote
        .list(layout::RECORDINGS)?
        .iter()
        .filter_map(|k| layout::id_of_key(k))
        .collect();
    v.sort();
    Ok(v)
}

/// Manifests of a remote: the intact ones, sorted by ID, and the
/// recordings whose manifest is corrupt.
#[derive(Debug, Default)]
pub struct Manifests {
    pub intact: Vec<(RecordingId, Manifest)>,
    pub damaged: Vec<Damaged>,
}

/// Fetch and check the manifests of `ids`.
pub fn manifests(remote: &Remote, ids: &[RecordingId]) -> Result<Manifests> {
    let mut out = Vec::with_capacity(ids.len());
    let mut damaged = Vec::new();
    let keys = ids.iter().map(layout::recording_key);
    remote.get_all(keys, &mut |key, body| {
        let Some(id) = layout::id_of_key(&key) else {
            return Ok(());
        };
        let body = body.ok_or_else(|| RemoteError::NotFound {
            remote: remote.name.clone(),
            id: id.to_hex(),
        })?;
        match layout::decode_manifest(&body, &id) {
            Ok(m) => out.push((id, m)),
            Err(reason) => damaged.push(Damaged {
                id: id.to_hex(),
                reason: RemoteError::Corrupt {
                    remote: remote.name.clone(),
                    key: key.clone(),
                    reason,
                }
                .to_string(),
            }),
        }
        Ok(())
    })?;
    out.sort_by_key(|(id, _)| *id);
    damaged.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(Manifests {
        intact: out,
        damaged,
    })
}

/// Resolve a hex prefix (at least 4 digits) among `ids`.
pub fn resolve(remote: &Remote, ids: &[RecordingId], prefix: &str) -> Result<RecordingId> {
    let p = prefix.trim().to_ascii_lowercase();
    if p.len() < 4 || p.len() > 64 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(crate::StoreError::BadPrefix(prefix.to_string()).into());
    }
    let found: Vec<&RecordingId> = ids
        .iter()
        .filter(|id| id.to_hex().starts_with(&p))
        .collect();
    match found[..] {
        [one] => Ok(*one),
        [] => Err(RemoteError::NotFound {
            remote: remote.name.clone(),
            id: prefix.to_string(),
        }),
        _ => Err(RemoteError::Ambiguous {
            remote: remote.name.clone(),
            prefix: prefix.to_string(),
            candidates: found.iter().take(10).map(|id| id.short()).collect(),
        }),
    }
}

/// Which recordings of a remote to pull.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub ids: Vec<String>,
    pub all: bool,
    pub kernel: Option<String>,
    pub label: Option<String>,
}

/// The recordings a selection chose (with their manifests when they had to
/// be read to filter), and those whose manifest is corrupt, so they could
/// not be filtered (nor pulled).
#[derive(Debug, Default)]
pub struct Selected {
    pub recordings: Vec<(RecordingId, Option<Manifest>)>,
    pub damaged: Vec<Damaged>,
}

/// Resolve a selection to IDs.
pub fn select(remote: &Remote, sel: &Selection) -> Result<Selected> {
    let all = ids(remote)?;
    let mut chosen: Vec<RecordingId> = if sel.ids.is_empty() {
        all.clone()
    } else {
        sel.ids
            .iter()
            .map(|p| resolve(remote, &all, p))
            .collect::<Result<_>>()?
    };
    chosen.sort();
    chosen.dedup();
    if sel.kernel.is_none() && sel.label.is_none() {
        return Ok(Selected {
            recordings: chosen.into_iter().map(|id| (id, None)).collect(),
            damaged: Vec::new(),
        });
    }
    let filter = LsFilter {
        kernel: sel.kernel.clone(),
        label: sel.label.clone(),
        ..Default::default()
    };
    let matcher = Matcher::new(&filter)?;
    let read = manifests(remote, &chosen)?;
    Ok(Selected {
        recordings: read
            .intact
            .into_iter()
            .filter(|(id, m)| matcher.matches(&summary(id, m)))
            .map(|(id, m)| (id, Some(m)))
            .collect(),
        damaged: read.damaged,
    })
}

/// `ls NAME:`: summaries of the remote's recordings matching `filter`, and
/// the recordings whose manifest is corrupt (not filtered: what they hold
/// is unknown).
pub fn summaries(
    remote: &Remote,
    filter: &LsFilter,
) -> Result<(Vec<RecordingSummary>, Vec<Damaged>)> {
    let matcher = Matcher::new(filter)?;
    let mut ids = ids(remote)?;
    if !filter.ids.is_empty() {
        ids.retain(|id| filter.ids.contains(id));
    }
    let read = manifests(remote, &ids)?;
    let mut rows: Vec<RecordingSummary> = read
        .intact
        .iter()
        .map(|(id, m)| summary(id, m))
        .filter(|s| matcher.matches(s))
        .collect();
    match filter.sort {
        LsSort::Time => {
            rows.sort_by(|a, b| b.imported_at.cmp(&a.imported_at).then(a.id.cmp(&b.id)))
        }
        LsSort::Size => rows.sort_by(|a, b| b.input_size.cmp(&a.input_size).then(a.id.cmp(&b.id))),
        LsSort::Name => rows.sort_by(|a, b| {
            a.kernel
                .cmp(&b.kernel)
                .then(b.imported_at.cmp(&a.imported_at))
        }),
    }
    if let Some(n) = filter.limit {
        rows.truncate(n as usize);
    }
    Ok((rows, read.damaged))
}

/// An `ls` row from a manifest.
pub fn summary(id: &RecordingId, m: &Manifest) -> RecordingSummary {
    let r = &m.recording;
    RecordingSummary {
        id: id.to_hex(),
        kernel: r.kernel.clone(),
        generation: r.generation.as_str().to_string(),
        target: r.image_target.short_name(),
        arena_base: r.arena.base,
        arena_size: r.arena.size,
        input_size: r.part(PartRole::Input).map(|p| p.len),
        output_size: r.part(PartRole::Output).map(|p| p.len),
        num_args: r.args.len() as u64,
        num_globals: r.globals.len() as u64,
        logical_size: r.logical_size(),
        imported_at: m.imported_at,
        source: m.source.clone(),
        label: m.label.clone(),
        tags: m.tags.clone(),
    }
}

/// `LsFilter` applied in memory (shell globs as in `ls`).
struct Matcher {
    kernel: Option<globset::GlobMatcher>,
    label: Option<globset::GlobMatcher>,
    target: Option<String>,
    tags: Vec<(String, String)>,
    since: Option<i64>,
}

impl Matcher {
    fn new(f: &LsFilter) -> Result<Matcher> {
        let glob = |g: &Option<String>| -> Result<Option<globset::GlobMatcher>> {
            g.as_ref()
                .map(|g| {
                    globset::GlobBuilder::new(g)
                        .literal_separator(false)
                        .build()
                        .map(|g| g.compile_matcher())
                        .map_err(|e| {
                            crate::StoreError::Invalid(format!("`{g}` is not a glob: {e}")).into()
                        })
                })
                .transpose()
        };
        Ok(Matcher {
            kernel: glob(&f.kernel)?,
            label: glob(&f.label)?,
            target: f.target.clone(),
            tags: f.tags.clone(),
            since: f.since,
        })
    }

    fn matches(&self, s: &RecordingSummary) -> bool {
        self.kernel.as_ref().is_none_or(|g| g.is_match(&s.kernel))
            && self.label.as_ref().is_none_or(|g| g.is_match(&s.label))
            && self.target.as_ref().is_none_or(|t| *t == s.target)
            && self.since.is_none_or(|t| s.imported_at >= t)
            && self
                .tags
                .iter()
                .all(|(k, v)| s.tags.get(k).is_some_and(|x| x == v))
    }
}
