//! The compact `ls` table: exactly the columns `rrstore ls` prints, read
//! straight from the SQLite rows into one byte arena plus one fixed-size
//! row per recording (no per-row allocation), sorted in memory. A store of
//! 100,000 recordings lists in a few tens of milliseconds; the full
//! [`crate::RecordingSummary`] rows ([`Store::list`]) are for `--json`.

use rusqlite::types::ValueRef;

use crate::error::Result;
use crate::query::{where_clause, LsFilter, LsSort};
use crate::Store;

/// A byte range of [`LsTable`]'s text arena.
#[derive(Clone, Copy, Debug, Default)]
struct Text {
    start: u32,
    len: u32,
}

/// One recording of an [`LsTable`].
#[derive(Clone, Copy, Debug)]
pub struct LsRow {
    /// The recording ID (its hex form sorts like these bytes).
    pub id: [u8; 32],
    pub input_size: Option<u64>,
    pub num_args: u64,
    pub imported_at: i64,
    kernel: Text,
    target: Text,
    label: Text,
}

/// What `ls` prints, sorted like [`Store::list`]; see the module doc.
#[derive(Debug, Default)]
pub struct LsTable {
    text: Vec<u8>,
    rows: Vec<LsRow>,
    /// Longest kernel, target and label, in bytes.
    pub kernel_width: usize,
    pub target_width: usize,
    pub label_width: usize,
}

impl LsTable {
    pub fn rows(&self) -> &[LsRow] {
        &self.rows
    }

    fn text(&self, t: Text) -> &[u8] {
        &self.text[t.start as usize..(t.start + t.len) as usize]
    }

    /// Kernel name bytes (UTF-8 as stored).
    pub fn kernel(&self, r: &LsRow) -> &[u8] {
        self.text(r.kernel)
    }

    pub fn target(&self, r: &LsRow) -> &[u8] {
        self.text(r.target)
    }

    pub fn label(&self, r: &LsRow) -> &[u8] {
        self.text(r.label)
    }

    fn push_text(&mut self, v: ValueRef<'_>) -> Text {
        let b: &[u8] = match v {
            ValueRef::Text(b) | ValueRef::Blob(b) => b,
            _ => b"",
        };
        let start = self.text.len() as u32;
        self.text.extend_from_slice(b);
        Text {
            start,
            len: b.len() as u32,
        }
    }
}

fn int(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        _ => None,
    }
}

impl Store {
    /// The recordings matching `filter` as an [`LsTable`] (tags are only
    /// filtered on, not returned).
    pub fn list_table(&self, filter: &LsFilter) -> Result<LsTable> {
        let (cond, params) = where_clause(filter);
        let sql = format!(
            "SELECT id, kernel, target, input_size, num_args, label, imported_at \
             FROM recordings r WHERE 1=1{cond}"
        );
        let ierr = self.ierr("listing recordings");
        let mut stmt = self.conn().prepare(&sql).map_err(&ierr)?;
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params))
            .map_err(&ierr)?;
        let mut t = LsTable::default();
        while let Some(r) = rows.next().map_err(&ierr)? {
            let mut id = [0u8; 32];
            if let ValueRef::Blob(b) = r.get_ref(0).map_err(&ierr)? {
                let n = b.len().min(32);
                id[..n].copy_from_slice(&b[..n]);
            }
            let kernel = t.push_text(r.get_ref(1).map_err(&ierr)?);
            let target = t.push_text(r.get_ref(2).map_err(&ierr)?);
            let label = t.push_text(r.get_ref(5).map_err(&ierr)?);
            t.rows.push(LsRow {
                id,
                input_size: int(r.get_ref(3).map_err(&ierr)?).map(|v| v as u64),
                num_args: int(r.get_ref(4).map_err(&ierr)?).unwrap_or(0) as u64,
                imported_at: int(r.get_ref(6).map_err(&ierr)?).unwrap_or(0),
                kernel,
                target,
                label,
            });
        }
        // Same orders as `Store::list`. Sorting (key, row) pairs moves 16
        // bytes per swap instead of a whole row.
        let rows = &t.rows;
        let text = &t.text;
        let by_id = |a: u32, b: u32| rows[a as usize].id.cmp(&rows[b as usize].id);
        let mut order: Vec<(i64, u32)> = match filter.sort {
            LsSort::Time | LsSort::Name => rows
                .iter()
                .enumerate()
                .map(|(i, r)| (r.imported_at, i as u32))
                .collect(),
            // Option order: None sorts below every size.
            LsSort::Size => rows
                .iter()
                .enumerate()
                .map(|(i, r)| (r.input_size.map_or(i64::MIN, |v| v as i64), i as u32))
                .collect(),
        };
        match filter.sort {
            LsSort::Time | LsSort::Size => {
                order.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| by_id(a.1, b.1)))
            }
            LsSort::Name => {
                let kernel = |i: u32| {
                    let k = rows[i as usize].kernel;
                    &text[k.start as usize..(k.start + k.len) as usize]
                };
                order.sort_unstable_by(|a, b| {
                    kernel(a.1)
                        .cmp(kernel(b.1))
                        .then_with(|| b.0.cmp(&a.0))
                        .then_with(|| by_id(a.1, b.1))
                })
            }
        }
        if let Some(n) = filter.limit {
            order.truncate(n as usize);
        }
        t.rows = order.iter().map(|&(_, i)| rows[i as usize]).collect();
        for r in &t.rows {
            t.kernel_width = t.kernel_width.max(r.kernel.len as usize);
            t.target_width = t.target_width.max(r.target.len as usize);
            t.label_width = t.label_width.max(r.label.len as usize);
        }
        Ok(t)
    }
}
