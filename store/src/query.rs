//! `ls`: recording summaries filtered and sorted in SQL, from the index only
//! (no pack file is touched).

use std::collections::BTreeMap;

use rrstore_format::RecordingId;
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::index::{hash32, u};
use crate::Store;

/// Sort order of `ls`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LsSort {
    /// Newest first.
    #[default]
    Time,
    /// Largest snapshot first.
    Size,
    /// Kernel name, then time.
    Name,
}

/// `ls` filters; all optional, combined with AND.
#[derive(Clone, Debug, Default)]
pub struct LsFilter {
    /// Shell glob on the kernel name.
    pub kernel: Option<String>,
    /// Image target short name (`sm_90`, `gfx942`, `x86_64`, ...).
    pub target: Option<String>,
    /// Tags that must all be set to these values.
    pub tags: Vec<(String, String)>,
    /// Shell glob on the label.
    pub label: Option<String>,
    /// Imported at or after (Unix seconds).
    pub since: Option<i64>,
    /// Only these recordings.
    pub ids: Vec<RecordingId>,
    pub sort: LsSort,
    pub limit: Option<u64>,
}

/// One line of `ls`.
#[derive(Clone, Debug, Serialize)]
pub struct RecordingSummary {
    pub id: String,
    pub kernel: String,
    pub generation: String,
    pub target: String,
    pub arena_base: Option<u64>,
    pub arena_size: u64,
    pub input_size: Option<u64>,
    pub output_size: Option<u64>,
    pub num_args: u64,
    pub num_globals: u64,
    pub logical_size: u64,
    pub imported_at: i64,
    pub source: String,
    pub label: String,
    pub tags: BTreeMap<String, String>,
}

impl Store {
    /// Resolve a unique hex prefix (at least 4 digits) or a full ID.
    pub fn resolve(&self, prefix: &str) -> Result<RecordingId> {
        let p = prefix.trim().to_ascii_lowercase();
        if p.len() < 4 || p.len() > 64 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::BadPrefix(prefix.to_string()));
        }
        // Range scan on the id_hex index: [p, p with its last digit + 1).
        let mut upper = p.clone().into_bytes();
        if let Some(last) = upper.last_mut() {
            *last += 1;
        }
        let upper = String::from_utf8_lossy(&upper).into_owned();
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id_hex FROM recordings WHERE id_hex >= ?1 AND id_hex < ?2 \
                 ORDER BY id_hex LIMIT 11",
            )
            .map_err(self.ierr("resolving an ID prefix"))?;
        let found: Vec<String> = stmt
            .query_map([&p, &upper], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(self.ierr("resolving an ID prefix"))?;
        match found.len() {
            0 => Err(StoreError::NotFound(prefix.to_string())),
            1 => found[0]
                .parse()
                .map_err(|_| StoreError::NotFound(prefix.to_string())),
            _ => Err(StoreError::Ambiguous {
                prefix: prefix.to_string(),
                candidates: found
                    .iter()
                    .map(|h| h[..16.min(h.len())].to_string())
                    .collect(),
            }),
        }
    }

    /// Recordings matching `filter`, sorted.
    pub fn list(&self, filter: &LsFilter) -> Result<Vec<RecordingSummary>> {
        let (cond, params) = where_clause(filter);
        let sql = format!(
            "SELECT id_hex, kernel, generation, target, arena_base, arena_size, input_size, \
             output_size, num_args, num_globals, logical_size, imported_at, source, label, id \
             FROM recordings r WHERE 1=1{cond}"
        );
        let ierr = self.ierr("listing recordings");
        let mut stmt = self.conn().prepare(&sql).map_err(&ierr)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(params), |r| {
                Ok((
                    RecordingSummary {
                        id: r.get(0)?,
                        kernel: r.get(1)?,
                        generation: r.get(2)?,
                        target: r.get(3)?,
                        arena_base: r.get::<_, Option<i64>>(4)?.map(u),
                        arena_size: u(r.get(5)?),
                        input_size: r.get::<_, Option<i64>>(6)?.map(u),
                        output_size: r.get::<_, Option<i64>>(7)?.map(u),
                        num_args: u(r.get(8)?),
                        num_globals: u(r.get(9)?),
                        logical_size: u(r.get(10)?),
                        imported_at: r.get(11)?,
                        source: r.get(12)?,
                        label: r.get(13)?,
                        tags: BTreeMap::new(),
                    },
                    hash32(r.get(14)?),
                ))
            })
            .map_err(&ierr)?;
        let mut all: Vec<(RecordingSummary, [u8; 32])> =
            rows.collect::<rusqlite::Result<_>>().map_err(&ierr)?;
        // Sorted here rather than in SQL: a scan plus an in-memory sort of
        // the row structs beats SQLite's sorter (which copies every record)
        // or an index walk (a B-tree probe per row) by several times.
        match filter.sort {
            LsSort::Time => all.sort_unstable_by(|a, b| {
                b.0.imported_at
                    .cmp(&a.0.imported_at)
                    .then_with(|| a.0.id.cmp(&b.0.id))
            }),
            LsSort::Size => all.sort_unstable_by(|a, b| {
                b.0.input_size
                    .cmp(&a.0.input_size)
                    .then_with(|| a.0.id.cmp(&b.0.id))
            }),
            LsSort::Name => all.sort_unstable_by(|a, b| {
                a.0.kernel
                    .cmp(&b.0.kernel)
                    .then_with(|| b.0.imported_at.cmp(&a.0.imported_at))
                    .then_with(|| a.0.id.cmp(&b.0.id))
            }),
        }
        if let Some(n) = filter.limit {
            all.truncate(n as usize);
        }
        let (out, ids): (Vec<RecordingSummary>, Vec<[u8; 32]>) = all.into_iter().unzip();
        let mut out = out;
        // Tags in one pass (cheap: only tagged recordings have rows).
        let any_tags = self
            .conn()
            .prepare_cached("SELECT 1 FROM tags LIMIT 1")
            .and_then(|mut s| s.exists([]))
            .map_err(&ierr)?;
        if !any_tags || out.is_empty() {
            return Ok(out);
        }
        let mut tags = self
            .conn()
            .prepare_cached("SELECT recording, key, value FROM tags")
            .map_err(&ierr)?;
        let by_id: std::collections::HashMap<[u8; 32], usize> =
            ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let trows = tags
            .query_map([], |r| {
                Ok((
                    hash32(r.get(0)?),
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(&ierr)?;
        for t in trows {
            let (id, k, v) = t.map_err(&ierr)?;
            if let Some(&i) = by_id.get(&id) {
                out[i].tags.insert(k, v);
            }
        }
        Ok(out)
    }

    /// Tags of one recording.
    pub fn tags(&self, id: &RecordingId) -> Result<BTreeMap<String, String>> {
        let ierr = self.ierr("reading tags");
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT key, value FROM tags WHERE recording = ?1 ORDER BY key")
            .map_err(&ierr)?;
        let rows = stmt
            .query_map([&id.0[..]], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(&ierr)?;
        rows.collect::<rusqlite::Result<_>>().map_err(ierr)
    }

    /// The summary of one recording.
    pub fn summary(&self, id: &RecordingId) -> Result<RecordingSummary> {
        let f = LsFilter {
            ids: vec![*id],
            ..Default::default()
        };
        self.list(&f)?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::NotFound(id.to_hex()))
    }
}

/// The `AND ...` conditions of `filter` (on `recordings r`) and their
/// parameters.
pub(crate) fn where_clause(filter: &LsFilter) -> (String, Vec<rusqlite::types::Value>) {
    let mut sql = String::new();
    let mut params: Vec<rusqlite::types::Value> = Vec::new();
    let p = |v: rusqlite::types::Value, params: &mut Vec<_>| {
        params.push(v);
        format!("?{}", params.len())
    };
    if let Some(k) = &filter.kernel {
        let n = p(k.clone().into(), &mut params);
        sql += &format!(" AND kernel GLOB {n}");
    }
    if let Some(t) = &filter.target {
        let n = p(t.clone().into(), &mut params);
        sql += &format!(" AND target = {n}");
    }
    if let Some(l) = &filter.label {
        let n = p(l.clone().into(), &mut params);
        sql += &format!(" AND label GLOB {n}");
    }
    if let Some(s) = filter.since {
        let n = p(s.into(), &mut params);
        sql += &format!(" AND imported_at >= {n}");
    }
    for (k, v) in &filter.tags {
        let nk = p(k.clone().into(), &mut params);
        let nv = p(v.clone().into(), &mut params);
        sql += &format!(
        " AND EXISTS (SELECT 1 FROM tags t WHERE t.recording = r.id AND t.key = {nk} AND t.value = {nv})"
        );
    }
    if !filter.ids.is_empty() {
        let list: Vec<String> = filter
            .ids
            .iter()
            .map(|id| p(id.0.to_vec().into(), &mut params))
            .collect();
        sql += &format!(" AND id IN ({})", list.join(","));
    }
    (sql, params)
}
