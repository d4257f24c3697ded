//! The compact `ls` table: exactly the columns `rrstore ls` prints, read
//! straight from the SQLite rows into byte arenas plus one fixed-size row
//! per recording (no per-row allocation), sorted in memory. The two halves
//! of the ID space are read in parallel (the upper one through a second
//! connection): SQLite's page walk is most of the time of a large listing.
//! The full [`crate::RecordingSummary`] rows ([`Store::list`]) are for
//! `--json`.

use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

use crate::error::{Result, StoreError};
use crate::query::{where_clause, LsFilter, LsSort};
use crate::Store;

/// Set in [`Text::start`] for text in the upper half's arena.
const UPPER: u32 = 1 << 31;

/// A byte range of one of [`LsTable`]'s text arenas.
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

/// Rows and text of one half of the ID space.
#[derive(Debug, Default)]
struct Half {
    text: Vec<u8>,
    rows: Vec<LsRow>,
}

/// What `ls` prints, sorted like [`Store::list`]; see the module doc.
#[derive(Debug, Default)]
pub struct LsTable {
    lower: Half,
    upper: Half,
    /// Row numbers (lower rows first, then upper), sorted and limited.
    order: Vec<u32>,
    /// Longest kernel, target and label, in bytes.
    pub kernel_width: usize,
    pub target_width: usize,
    pub label_width: usize,
}

impl LsTable {
    fn row(&self, i: u32) -> &LsRow {
        let n = self.lower.rows.len();
        match (i as usize).checked_sub(n) {
            None => &self.lower.rows[i as usize],
            Some(j) => &self.upper.rows[j],
        }
    }

    /// The rows in listing order.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = &LsRow> + '_ {
        self.order.iter().map(|&i| self.row(i))
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    fn text(&self, t: Text) -> &[u8] {
        let (arena, start) = if t.start & UPPER != 0 {
            (&self.upper.text, (t.start & !UPPER) as usize)
        } else {
            (&self.lower.text, t.start as usize)
        };
        &arena[start..start + t.len as usize]
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
}

fn push_text(arena: &mut Vec<u8>, flag: u32, v: ValueRef<'_>) -> Text {
    let b: &[u8] = match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => b,
        _ => b"",
    };
    let start = arena.len() as u32 | flag;
    arena.extend_from_slice(b);
    Text {
        start,
        len: b.len() as u32,
    }
}

fn int(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        _ => None,
    }
}

/// Rows of `sql` (the columns `list_table` selects) into a half table;
/// `flag` marks its text ranges.
fn scan(
    conn: &Connection,
    sql: &str,
    params: &[Value],
    flag: u32,
    ierr: &dyn Fn(rusqlite::Error) -> StoreError,
) -> Result<Half> {
    // Room for every row the index could hold (a recording row takes well
    // over 128 bytes of its pages): never copied while it grows, and pages
    // not filled are never touched.
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .map_err(ierr)?;
    let guess = (pages.max(0) as usize * 4096 / 128).min(1 << 22);
    let mut h = Half {
        text: Vec::with_capacity(guess * 16),
        rows: Vec::with_capacity(guess),
    };
    let mut stmt = conn.prepare(sql).map_err(ierr)?;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params))
        .map_err(ierr)?;
    while let Some(r) = rows.next().map_err(ierr)? {
        let mut id = [0u8; 32];
        if let ValueRef::Blob(b) = r.get_ref(0).map_err(ierr)? {
            let n = b.len().min(32);
            id[..n].copy_from_slice(&b[..n]);
        }
        let kernel = push_text(&mut h.text, flag, r.get_ref(1).map_err(ierr)?);
        let target = push_text(&mut h.text, flag, r.get_ref(2).map_err(ierr)?);
        let label = push_text(&mut h.text, flag, r.get_ref(5).map_err(ierr)?);
        h.rows.push(LsRow {
            id,
            input_size: int(r.get_ref(3).map_err(ierr)?).map(|v| v as u64),
            num_args: int(r.get_ref(4).map_err(ierr)?).unwrap_or(0) as u64,
            imported_at: int(r.get_ref(6).map_err(ierr)?).unwrap_or(0),
            kernel,
            target,
            label,
        });
    }
    Ok(h)
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
        let mut t = LsTable::default();
        if filter.ids.is_empty() {
            let path = self.index_path();
            let low = format!("{sql} AND id < X'80'");
            let high = format!("{sql} AND id >= X'80'");
            let upper_err = self.ierr("listing recordings");
            let (a, b) = std::thread::scope(|s| {
                let upper = s.spawn(|| -> Result<Half> {
                    let conn = crate::index::open(&path, false)?;
                    scan(&conn, &high, &params, UPPER, &upper_err)
                });
                let a = scan(self.conn(), &low, &params, 0, &ierr);
                let b = upper.join().unwrap_or_else(|_| {
                    Err(StoreError::Worker("the listing thread panicked".into()))
                });
                (a, b)
            });
            t.lower = a?;
            t.upper = b?;
        } else {
            t.lower = scan(self.conn(), &sql, &params, 0, &ierr)?;
        }
        let n = (t.lower.rows.len() + t.upper.rows.len()) as u32;
        // Same orders as `Store::list`. Sorting (key, row) pairs moves 16
        // bytes per swap instead of a whole row.
        let mut order: Vec<(i64, u32)> = (0..n)
            .map(|i| {
                let r = t.row(i);
                let key = match filter.sort {
                    LsSort::Time | LsSort::Name => r.imported_at,
                    // Option order: None sorts below every size.
                    LsSort::Size => r.input_size.map_or(i64::MIN, |v| v as i64),
                };
                (key, i)
            })
            .collect();
        let by_id = |a: u32, b: u32| t.row(a).id.cmp(&t.row(b).id);
        match filter.sort {
            LsSort::Time | LsSort::Size => {
                order.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| by_id(a.1, b.1)))
            }
            LsSort::Name => order.sort_unstable_by(|a, b| {
                t.kernel(t.row(a.1))
                    .cmp(t.kernel(t.row(b.1)))
                    .then_with(|| b.0.cmp(&a.0))
                    .then_with(|| by_id(a.1, b.1))
            }),
        }
        if let Some(n) = filter.limit {
            order.truncate(n as usize);
        }
        t.order = order.iter().map(|&(_, i)| i).collect();
        let (mut kw, mut tw, mut lw) = (0, 0, 0);
        for r in t.rows() {
            kw = kw.max(r.kernel.len as usize);
            tw = tw.max(r.target.len as usize);
            lw = lw.max(r.label.len as usize);
        }
        (t.kernel_width, t.target_width, t.label_width) = (kw, tw, lw);
        Ok(t)
    }
}
