//! Reading blobs (chunks, tree nodes, part objects) by name, whatever the
//! layout: through the index cache and ranged GETs of packs (version 3),
//! neighbouring ranges of a pack coalesced, or as version 2 objects of
//! their own. Every caller checks what it gets; this module only finds it.

use std::cell::{Cell, RefCell};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::client::Remote;
use super::error::{RemoteError, Result};
use super::ranges::Got;
use super::v2::layout;
use super::v3::cold_lookup::Lazy;
use super::v3::index_cache::{BadIndex, Cache};
use super::v3::{self, Entry, Kind};
use super::Received;

/// Ranges of one pack closer than this are always fetched with one
/// request: a gap this small costs less than a request's own headers.
const COALESCE_GAP: u64 = 64;
/// A larger gap is read through only while the gaps stay below 1/N of the
/// blob bytes the request carries: gap bytes are transferred for nothing,
/// and a 16 KiB gap to save one request was a bad trade (a pull into a
/// store holding a similar recording received 1.17x what it lacked). With
/// 512 B gaps always read and 1/32, gaps were still 1.6 % of a `jacobi`
/// pull's chunk bytes, a third of its 1.05x budget (issue 20); 1/128
/// keeps them under 0.8 %.
const GAP_FRACTION: u64 = 128;
/// A pull into an empty store reads uncached index objects whole when they
/// are at most 1/N of the logical bytes it brings.
const WHOLE_INDEX_FRACTION: u64 = 64;
/// A coalesced request covers at most this much.
const MAX_RANGE: u64 = 4 << 20;

/// A blob as found: where (for error messages) and its bytes, or why not.
pub type Found = std::result::Result<Vec<u8>, String>;

pub(crate) struct Blobs<'a> {
    pub remote: &'a Remote,
    /// Version 3: the index cache; `None` on a version 2 remote.
    pub cache: Option<Cache>,
    /// Index objects left out of the cache because they are damaged.
    pub bad_index: Vec<BadIndex>,
    /// A pull's index objects not cached yet, looked up lazily.
    lazy: RefCell<Lazy>,
    /// Bytes received by kind of blob, index lookups and gaps.
    pub tally: Cell<Received>,
}

/// The layout version of `remote`: 3 with the marker, else 2.
pub fn layout_version(remote: &Remote) -> Result<u32> {
    parse_marker(remote, remote.get(v3::MARKER)?)
}

/// The layout version a marker object says (`None`: no marker, 2).
fn parse_marker(remote: &Remote, marker: Option<Vec<u8>>) -> Result<u32> {
    let Some(b) = marker else {
        return Ok(2);
    };
    let line = String::from_utf8_lossy(&b);
    let v = line
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("rrstore remote layout "))
        .and_then(|v| v.trim().parse::<u32>().ok());
    match v {
        Some(3) => Ok(3),
        Some(v) => Err(RemoteError::Corrupt {
            remote: remote.name.clone(),
            key: v3::MARKER.into(),
            reason: format!("layout version {v} (this rrstore reads 1 to 3): upgrade rrstore"),
        }),
        None => Err(RemoteError::Corrupt {
            remote: remote.name.clone(),
            key: v3::MARKER.into(),
            reason: "not a layout marker".into(),
        }),
    }
}

fn v2_dir(kind: Kind) -> &'static str {
    match kind {
        Kind::Chunk => layout::CHUNKS,
        Kind::Node => layout::LISTS,
        Kind::Part => layout::PARTS,
    }
}

pub fn v2_key(kind: Kind, name: &[u8; 32]) -> String {
    match kind {
        Kind::Chunk => layout::chunk_key(name),
        Kind::Node => layout::list_key(name),
        Kind::Part => layout::part_key(name),
    }
}

/// The tally's field for blobs of `kind`.
fn field(kind: Kind) -> fn(&mut Received) -> &mut u64 {
    match kind {
        Kind::Chunk => |t| &mut t.chunks,
        Kind::Node => |t| &mut t.nodes,
        Kind::Part => |t| &mut t.parts,
    }
}

/// How a pack blob is named in messages.
pub fn describe(e: &Entry) -> String {
    format!(
        "{} at offset {} ({} {})",
        v3::pack_key(&e.pack),
        e.offset,
        e.kind.word(),
        rrstore_format::id::hex(&e.name)
    )
}

impl<'a> Blobs<'a> {
    /// The blobs of `remote`, no cache attached yet.
    pub fn new(remote: &'a Remote) -> Blobs<'a> {
        Blobs {
            remote,
            cache: None,
            bad_index: Vec::new(),
            lazy: RefCell::new(Lazy::default()),
            tally: Cell::new(Received::default()),
        }
    }

    /// Open the blobs of `remote`; on a version 3 remote, refresh the
    /// index cache kept in store directory `dir`.
    pub fn open(dir: &Path, remote: &'a Remote) -> Result<Blobs<'a>> {
        let mut b = Blobs::new(remote);
        if layout_version(remote)? == 3 {
            b.attach(dir)?;
        }
        Ok(b)
    }

    /// [`Blobs::open`] for a pull: index objects not cached yet are only
    /// listed, and looked up with ranged GETs as blobs are asked for
    /// (`v3::cold_lookup`); those read whole on the way join the cache. The marker,
    /// the listing and the objects `also` (the pull's manifests) are
    /// requested in one round; returns `also`'s bodies, in order.
    pub fn open_lazy(
        dir: &Path,
        remote: &'a Remote,
        also: &[String],
    ) -> Result<(Blobs<'a>, Vec<Option<Vec<u8>>>)> {
        let mut b = Blobs::new(remote);
        let (marker, listed, bodies) = remote.join(async {
            futures::join!(
                remote.get_async(v3::MARKER),
                remote.list_async(v3::INDEX),
                remote.get_many_async(also)
            )
        });
        if parse_marker(remote, marker?)? == 3 {
            let listed: Vec<(String, u64)> = listed?.into_iter().map(|o| (o.key, o.size)).collect();
            let mut c = Cache::open(dir, remote)?;
            let uncached = c.sync_listed(&listed)?;
            b.lazy = RefCell::new(Lazy::new(uncached));
            b.cache = Some(c);
        }
        Ok((b, bodies?))
    }

    /// Read the index objects not cached yet whole (they join the cache),
    /// when that is cheaper than looking blobs up in them one by one: a
    /// pull into a store that holds no chunk, which needs about every blob
    /// its recordings use (spec/REMOTE.md, "Read order (pull, version 3)").
    /// Only when they are at most 1/[`WHOLE_INDEX_FRACTION`] of
    /// `logical`, the bytes the pull brings. Returns the tree nodes they
    /// list when those too are at most that fraction of `logical`: the
    /// pull fetches them with its part objects, rather than one round per
    /// level of the trees.
    pub fn read_index_whole(&mut self, logical: u64) -> Result<Vec<Entry>> {
        let Some(c) = &self.cache else {
            return Ok(Vec::new());
        };
        let mut lazy = self.lazy.borrow_mut();
        if lazy.is_empty() || lazy.size().saturating_mul(WHOLE_INDEX_FRACTION) > logical {
            return Ok(Vec::new());
        }
        let keys = lazy.take_all();
        drop(lazy);
        let before = self.got();
        let mut nodes = Vec::new();
        let bad = c.fetch_whole_with(self.remote, keys, &mut |entries| {
            nodes.extend(entries.iter().filter(|e| e.kind == Kind::Node).cloned());
        });
        self.add(self.got() - before, |t| &mut t.index);
        // Reported with those a lookup finds damaged (`lazy_bad`).
        self.lazy.borrow_mut().bad.extend(bad?);
        let node_bytes: u64 = nodes.iter().map(|e| u64::from(e.len)).sum();
        if node_bytes.saturating_mul(WHOLE_INDEX_FRACTION) > logical {
            nodes.clear();
        }
        Ok(nodes)
    }

    /// Add to the tally: `f` picks the field.
    fn add(&self, n: u64, f: fn(&mut Received) -> &mut u64) {
        let mut t = self.tally.get();
        *f(&mut t) += n;
        self.tally.set(t);
    }

    fn got(&self) -> u64 {
        self.remote.received.load(Ordering::Relaxed)
    }

    /// Index objects found damaged while looking blobs up lazily.
    pub fn lazy_bad(&self) -> Vec<BadIndex> {
        self.lazy.borrow().bad.clone()
    }

    /// Use (and refresh) the index cache.
    pub fn attach(&mut self, dir: &Path) -> Result<()> {
        let mut c = Cache::open(dir, self.remote)?;
        self.bad_index = c.refresh(self.remote)?;
        self.cache = Some(c);
        Ok(())
    }

    pub fn lookup(&self, kind: Kind, name: &[u8; 32]) -> Result<Option<Entry>> {
        match &self.cache {
            Some(c) => c.lookup(kind, name),
            None => Ok(None),
        }
    }

    /// Fetch blobs `names` of `kind`; `f` gets each name, where it was
    /// looked for, and its bytes or why it could not be had.
    pub fn get(
        &self,
        kind: Kind,
        names: &[[u8; 32]],
        f: &mut dyn FnMut([u8; 32], String, Found) -> Result<()>,
    ) -> Result<()> {
        let mut packed: Vec<Entry> = Vec::new();
        let mut misses: Vec<[u8; 32]> = Vec::new();
        for n in names {
            match self.lookup(kind, n)? {
                Some(e) => packed.push(e),
                None => misses.push(*n),
            }
        }
        let mut lazy = self.lazy.borrow_mut();
        if let (Some(c), false) = (&self.cache, lazy.is_empty() || misses.is_empty()) {
            let before = self.got();
            let found = lazy.lookup(self.remote, c, kind, &misses);
            self.add(self.got() - before, |t| &mut t.index);
            let mut found = found?;
            // Objects read whole joined the cache.
            misses.retain(|n| match found.remove(n) {
                Some(e) => {
                    packed.push(e);
                    false
                }
                None => true,
            });
            let mut still = Vec::new();
            for n in misses {
                match c.lookup(kind, &n)? {
                    Some(e) => packed.push(e),
                    None => still.push(n),
                }
            }
            misses = still;
        }
        drop(lazy);
        let own: Vec<String> = misses.iter().map(|n| v2_key(kind, n)).collect();
        if !own.is_empty() {
            let dir = v2_dir(kind);
            self.remote.get_all(own.into_iter(), &mut |key, body| {
                let name = layout::hash_of_key(&key, dir).unwrap_or_default();
                if let Some(b) = &body {
                    self.add(b.len() as u64, field(kind));
                }
                let found = body.ok_or_else(|| "missing".to_string());
                f(name, key, found)
            })?;
        }
        self.get_packed(packed, &mut |e, at, found| f(e.name, at, found))
    }

    /// Ranged GETs of pack blobs, neighbours coalesced; `f` gets each
    /// entry, where it was read and its bytes or why not.
    pub fn get_packed(
        &self,
        mut packed: Vec<Entry>,
        f: &mut dyn FnMut(&Entry, String, Found) -> Result<()>,
    ) -> Result<()> {
        packed.sort_by_key(|e| (e.pack, e.offset));
        packed.dedup_by(|a, b| a.pack == b.pack && a.offset == b.offset && a.name == b.name);
        let mut reqs: Vec<(String, Range<u64>)> = Vec::new();
        let mut members: Vec<Vec<Entry>> = Vec::new();
        // The current request's blob bytes and gap bytes.
        let (mut useful, mut gaps) = (0u64, 0u64);
        for e in packed {
            let end = e.offset + e.len as u64;
            if let (Some(last), Some(m)) = (reqs.last_mut(), members.last_mut()) {
                let same = m.first().is_some_and(|x| x.pack == e.pack);
                let gap = e.offset.saturating_sub(last.1.end);
                let cheap =
                    gap <= COALESCE_GAP || (gaps + gap) * GAP_FRACTION <= useful + e.len as u64;
                if same
                    && cheap
                    && end.max(last.1.end) - last.1.start <= MAX_RANGE
                    && e.offset >= last.1.start
                {
                    last.1.end = last.1.end.max(end);
                    useful += e.len as u64;
                    gaps += gap;
                    m.push(e);
                    continue;
                }
            }
            (useful, gaps) = (e.len as u64, 0);
            reqs.push((v3::pack_key(&e.pack), e.offset..end));
            members.push(vec![e]);
        }
        self.remote.get_ranges_all(&reqs, &mut |i, got| {
            let start = reqs[i].1.start;
            let useful: u64 = members[i].iter().map(|e| e.len as u64).sum();
            match &got {
                Got::Bytes(b) => {
                    // A request may carry blobs of several kinds.
                    for e in &members[i] {
                        self.add(u64::from(e.len), field(e.kind));
                    }
                    self.add((b.len() as u64).saturating_sub(useful), |t| &mut t.gaps);
                }
                Got::Short(_, b) => self.add(b.len() as u64, |t| &mut t.other),
                Got::Missing => {}
            }
            for e in &members[i] {
                let s = (e.offset - start) as usize;
                let slice = |b: &Vec<u8>| b.get(s..s + e.len as usize).map(<[u8]>::to_vec);
                let found = match &got {
                    Got::Bytes(b) => slice(b).ok_or_else(|| "short read".to_string()),
                    Got::Missing => Err("the pack is missing (an index object names it)".into()),
                    Got::Short(size, b) => slice(b).ok_or_else(|| {
                        format!(
                            "the pack is {size} bytes, the index puts this blob at {}..{}",
                            e.offset,
                            e.offset + e.len as u64
                        )
                    }),
                };
                f(e, describe(e), found)?;
            }
            Ok(())
        })
    }
}
