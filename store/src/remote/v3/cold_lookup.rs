//! Cold lookups in index objects a pull has not cached (spec/REMOTE.md,
//! "Index objects with a fanout"): for a few blob names, ranged GETs of
//! an RRX4 object's header, the fanout slots and entries of the buckets
//! the names fall in, and the pack names the matches use, instead of the
//! whole object. An object is fetched whole (and then cached) when the
//! lookups would read a good part of it anyway, or when it is an older
//! RRX3 object. What a ranged lookup learns is kept for this pull only:
//! the cache holds index objects whole or not at all.
//!
//! Each round of requests waits for the one before, and on a remote with
//! real latency rounds cost more than bytes: the header is asked for
//! together with the fanout slots of the header [`Header::guess`] expects
//! from the object's listed size, and a small pack-name table whole with
//! the first slots, so a lookup is two rounds (slots, entries) rather than
//! four (header, slots, entries, pack names).

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use super::fanout_index::{self, Header, Raw, ENTRY, HEADER};
use super::index_cache::{BadIndex, Cache, Uncached};
use crate::remote::client::Remote;
use crate::remote::error::Result;
use crate::remote::ranges::Got;
use crate::remote::v3::{Entry, Kind};

/// Ranges of one index object closer than this are read with one request
/// (the gap's bytes are read for nothing: about a request's headers).
const GAP: u64 = 64;
/// Read an object whole once the lookups' estimated bytes reach this
/// fraction (1/N) of its size.
const WHOLE_FRACTION: u64 = 4;
/// A pack-name table up to this size is read whole, with the first round
/// of slots, rather than the names the entries use, a round later.
const WHOLE_PACKS: u64 = 1024;

/// An uncached index object and what this pull has read of it.
struct Object {
    at: Uncached,
    header: Option<Header>,
    /// Buckets read: their entries.
    buckets: HashMap<u64, Vec<Raw>>,
    /// Fanout slots read ahead with the header: bucket, its first and
    /// end entry (checked when used).
    slots: HashMap<u64, [u64; 2]>,
    packs: HashMap<u32, [u8; 32]>,
    /// The whole pack-name table has been read.
    all_packs: bool,
}

impl Object {
    /// The range of the pack-name table when it is worth reading whole now.
    fn table(&self, h: &Header) -> Option<Range<u64>> {
        let r = h.pack_at(0)..h.size();
        (!self.all_packs && r.end - r.start <= WHOLE_PACKS).then_some(r)
    }

    /// Keep a whole pack-name table read for header `h`.
    fn take_table(&mut self, h: &Header, b: &[u8]) {
        if b.len() as u64 != 32 * u64::from(h.n_packs) {
            return;
        }
        for (p, name) in b.chunks_exact(32).enumerate() {
            let mut n = [0u8; 32];
            n.copy_from_slice(name);
            self.packs.insert(p as u32, n);
        }
        self.all_packs = true;
    }
}

/// The uncached index objects of one pull.
#[derive(Default)]
pub(crate) struct Lazy {
    objects: Vec<Object>,
    /// Objects found damaged while looking up (left out from then on).
    pub bad: Vec<BadIndex>,
}

/// A fanout bucket of an object: (object, bucket).
type Bucket = (usize, u64);

/// One ranged read: which object, which bytes.
type Want = (usize, Range<u64>);

impl Lazy {
    pub fn new(uncached: Vec<Uncached>) -> Lazy {
        Lazy {
            objects: uncached
                .into_iter()
                .map(|at| Object {
                    at,
                    header: None,
                    buckets: HashMap::new(),
                    slots: HashMap::new(),
                    packs: HashMap::new(),
                    all_packs: false,
                })
                .collect(),
            bad: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Bytes of the uncached index objects.
    pub fn size(&self) -> u64 {
        self.objects.iter().map(|o| o.at.size).sum()
    }

    /// The keys of the uncached objects, which are no longer looked up
    /// here (the caller reads them whole).
    pub fn take_all(&mut self) -> Vec<String> {
        std::mem::take(&mut self.objects)
            .into_iter()
            .map(|o| o.at.key)
            .collect()
    }

    /// Where blobs `names` of `kind` are, as far as the uncached index
    /// objects say (names none lists are left out). Objects read whole on
    /// the way are added to `cache`.
    pub fn lookup(
        &mut self,
        remote: &Remote,
        cache: &Cache,
        kind: Kind,
        names: &[[u8; 32]],
    ) -> Result<HashMap<[u8; 32], Entry>> {
        if names.is_empty() || self.objects.is_empty() {
            return Ok(HashMap::new());
        }
        self.read_whole_where_cheaper(remote, cache, names.len() as u64)?;
        self.read_headers(remote, names)?;
        // Old RRX3 objects turned up by their headers: read whole.
        self.read_whole_where_cheaper(remote, cache, names.len() as u64)?;
        self.read_buckets(remote, names)?;
        let mut raw: Vec<(usize, Raw)> = Vec::new();
        for (i, o) in self.objects.iter().enumerate() {
            let Some(h) = &o.header else { continue };
            for n in names {
                let found = o.buckets.get(&h.bucket(n)).into_iter().flatten();
                if let Some(r) = found.into_iter().find(|r| r.name == *n && r.kind == kind) {
                    raw.push((i, r.clone()));
                }
            }
        }
        self.read_packs(remote, &raw)?;
        let mut out = HashMap::new();
        for (i, r) in raw {
            let o = &self.objects[i];
            let Some(h) = &o.header else { continue };
            let e = r.resolve(h, |p| {
                o.packs
                    .get(&p)
                    .copied()
                    .ok_or_else(|| format!("pack number {p} was not read"))
            });
            match e {
                Ok(e) => {
                    out.entry(e.name).or_insert(e);
                }
                Err(reason) => self.damaged(i, reason),
            }
        }
        self.drop_damaged();
        Ok(out)
    }

    /// Read whole (and cache) the objects a lookup of `n` names would read
    /// a good part of, and those known to be RRX3.
    fn read_whole_where_cheaper(&mut self, remote: &Remote, cache: &Cache, n: u64) -> Result<()> {
        let mut whole = Vec::new();
        self.objects.retain(|o| {
            let per_name = match &o.header {
                Some(h) => 8 + ENTRY * (h.n / h.buckets() + 2) + 32,
                None => 8 + ENTRY * 3 + 32,
            };
            let old = o.header.is_none() && o.at.size < HEADER;
            let take = old || n.saturating_mul(per_name) * WHOLE_FRACTION >= o.at.size;
            if take {
                whole.push(o.at.key.clone());
            }
            !take
        });
        if !whole.is_empty() {
            self.bad.extend(cache.fetch_whole(remote, whole)?);
        }
        Ok(())
    }

    /// Read the headers not read yet, each with the slots of `names`'
    /// buckets and the pack-name table its guessed header places.
    fn read_headers(&mut self, remote: &Remote, names: &[[u8; 32]]) -> Result<()> {
        // (object, guessed header, bucket or None for the pack table)
        let mut ahead: Vec<(usize, Header, Option<u64>)> = Vec::new();
        let mut wants: Vec<Want> = Vec::new();
        for (i, o) in self.objects.iter().enumerate() {
            if o.header.is_some() {
                continue;
            }
            wants.push((i, 0..HEADER));
            let Some(g) = Header::guess(o.at.size) else {
                continue;
            };
            let bs: BTreeSet<u64> = names.iter().map(|n| g.bucket(n)).collect();
            for b in bs {
                ahead.push((i, g, Some(b)));
            }
            if o.table(&g).is_some() {
                ahead.push((i, g, None));
            }
        }
        let n_headers = wants.len();
        for (i, g, b) in &ahead {
            wants.push(match b {
                Some(b) => (*i, g.slot_at(*b)..g.slot_at(b + 2)),
                None => (*i, g.pack_at(0)..g.size()),
            });
        }
        let mut got = self.read(remote, &wants)?;
        let rest = got.split_off(n_headers);
        let mut old = Vec::new();
        for ((i, _), b) in wants.iter().zip(got) {
            let Some(b) = b else { continue };
            if b.starts_with(b"RRX3") {
                old.push(*i);
                continue;
            }
            match Header::decode(&b, self.objects[*i].at.size) {
                Ok(h) => self.objects[*i].header = Some(h),
                Err(reason) => self.damaged(*i, reason),
            }
        }
        // What was read ahead counts where the guess was the header.
        for ((i, g, b), bytes) in ahead.into_iter().zip(rest) {
            let o = &mut self.objects[i];
            let (Some(bytes), Some(h)) = (bytes, o.header) else {
                continue;
            };
            if h != g {
                continue;
            }
            match b {
                Some(b) => {
                    if let [s0, s1] = fanout_index::slots(&bytes)[..] {
                        o.slots.insert(b, [s0, s1]);
                    }
                }
                None => o.take_table(&h, &bytes),
            }
        }
        // Marked by a size below any header: read whole next.
        for i in old {
            self.objects[i].at.size = 0;
        }
        self.drop_damaged();
        Ok(())
    }

    /// Read the fanout slots, then the entries, of the buckets `names` fall
    /// in (those not read yet).
    fn read_buckets(&mut self, remote: &Remote, names: &[[u8; 32]]) -> Result<()> {
        let mut need: Vec<(usize, u64)> = Vec::new();
        for (i, o) in self.objects.iter().enumerate() {
            let Some(h) = &o.header else { continue };
            let bs: BTreeSet<u64> = names
                .iter()
                .map(|n| h.bucket(n))
                .filter(|b| !o.buckets.contains_key(b))
                .collect();
            need.extend(bs.into_iter().map(|b| (i, b)));
        }
        // Slots read ahead need no request; small pack tables come along.
        let (ahead, need): (Vec<Bucket>, Vec<Bucket>) = need
            .into_iter()
            .partition(|(i, b)| self.objects[*i].slots.contains_key(b));
        let mut slots: Vec<Want> = need
            .iter()
            .filter_map(|&(i, b)| {
                let h = self.objects[i].header?;
                Some((i, h.slot_at(b)..h.slot_at(b + 2)))
            })
            .collect();
        let n_slots = slots.len();
        let mut tables: Vec<usize> = need.iter().map(|n| n.0).collect();
        tables.dedup();
        tables.retain(|&i| {
            let o = &self.objects[i];
            o.header.is_some_and(|h| o.table(&h).is_some())
        });
        for &i in &tables {
            if let Some(h) = self.objects[i].header {
                slots.push((i, h.pack_at(0)..h.size()));
            }
        }
        let mut got = self.read(remote, &slots)?;
        for (i, b) in tables.into_iter().zip(got.split_off(n_slots)) {
            let o = &mut self.objects[i];
            if let (Some(b), Some(h)) = (b, o.header) {
                o.take_table(&h, &b);
            }
        }
        let got = got.into_iter().map(|s| s.map(|s| fanout_index::slots(&s)));
        let pre: Vec<(Bucket, Option<Vec<u64>>)> = ahead
            .iter()
            .map(|&(i, b)| ((i, b), self.objects[i].slots.get(&b).map(|s| s.to_vec())))
            .collect();
        let all: Vec<_> = need.iter().copied().zip(got).chain(pre).collect();
        let mut entries: Vec<(usize, u64, Want)> = Vec::new();
        for ((i, b), s) in all {
            let (Some(s), Some(h)) = (s, self.objects[i].header) else {
                continue;
            };
            if s.len() != 2 {
                self.damaged(
                    i,
                    format!("damaged fanout: slots {b}, {} unreadable", b + 1),
                );
                continue;
            }
            if let Err(r) = fanout_index::check_fanout(&h, b, &s) {
                self.damaged(i, r);
                continue;
            }
            entries.push((i, b, (i, h.entry_at(s[0])..h.entry_at(s[1]))));
        }
        let wants: Vec<Want> = entries.iter().map(|e| e.2.clone()).collect();
        let got = self.read(remote, &wants)?;
        for ((i, b, _), raw) in entries.into_iter().zip(got) {
            let (Some(raw), Some(h)) = (raw, self.objects[i].header) else {
                continue;
            };
            match fanout_index::bucket_entries(&h, b, &raw) {
                Ok(rs) => {
                    self.objects[i].buckets.insert(b, rs);
                }
                Err(r) => self.damaged(i, r),
            }
        }
        Ok(())
    }

    /// Read the names of the packs `raw` entries use (those not read yet).
    fn read_packs(&mut self, remote: &Remote, raw: &[(usize, Raw)]) -> Result<()> {
        let mut need: BTreeSet<(usize, u32)> = BTreeSet::new();
        for (i, r) in raw {
            let o = &self.objects[*i];
            if let Some(h) = &o.header {
                if r.pack < h.n_packs && !o.packs.contains_key(&r.pack) {
                    need.insert((*i, r.pack));
                }
            }
        }
        let need: Vec<(usize, u32)> = need.into_iter().collect();
        let wants: Vec<Want> = need
            .iter()
            .filter_map(|&(i, p)| {
                let h = self.objects[i].header?;
                Some((i, h.pack_at(p)..h.pack_at(p + 1)))
            })
            .collect();
        let got = self.read(remote, &wants)?;
        for ((i, p), b) in need.into_iter().zip(got) {
            if let Some(b) = b {
                let mut h = [0u8; 32];
                h.copy_from_slice(&b);
                self.objects[i].packs.insert(p, h);
            }
        }
        Ok(())
    }

    /// Ranged reads, neighbours of one object coalesced; each want's bytes,
    /// or `None` where its object was gone (pruned since the listing: left
    /// out) or short (damaged: reported).
    fn read(&mut self, remote: &Remote, wants: &[Want]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut order: Vec<usize> = (0..wants.len()).collect();
        order.sort_by_key(|&w| (wants[w].0, wants[w].1.start));
        let mut reqs: Vec<(String, Range<u64>)> = Vec::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut obj_of: Vec<usize> = Vec::new();
        for w in order {
            let (i, r) = &wants[w];
            if r.is_empty() {
                continue;
            }
            if let (Some(last), Some(m), Some(&o)) =
                (reqs.last_mut(), members.last_mut(), obj_of.last())
            {
                if o == *i && r.start <= last.1.end + GAP {
                    last.1.end = last.1.end.max(r.end);
                    m.push(w);
                    continue;
                }
            }
            reqs.push((self.objects[*i].at.key.clone(), r.clone()));
            members.push(vec![w]);
            obj_of.push(*i);
        }
        let mut out: Vec<Option<Vec<u8>>> = wants
            .iter()
            .map(|(_, r)| r.is_empty().then(Vec::new))
            .collect();
        let mut broken: Vec<(usize, String)> = Vec::new();
        let mut gone: Vec<usize> = Vec::new();
        remote.get_ranges_all(&reqs, &mut |q, got| {
            let start = reqs[q].1.start;
            match got {
                Got::Bytes(b) => {
                    for &w in &members[q] {
                        let r = &wants[w].1;
                        let s = (r.start - start) as usize;
                        out[w] = b.get(s..s + (r.end - r.start) as usize).map(<[u8]>::to_vec);
                    }
                }
                Got::Missing => gone.push(obj_of[q]),
                Got::Short(size, _) => broken.push((
                    obj_of[q],
                    format!("it is {size} bytes, shorter than listed"),
                )),
            }
            Ok(())
        })?;
        for (i, reason) in broken {
            self.damaged(i, reason);
        }
        for i in gone {
            // Removed by a prune since the listing: as if never listed.
            self.objects[i].header = None;
            self.objects[i].at.size = u64::MAX;
        }
        Ok(out)
    }

    /// Object `i` is damaged: name it; it is left out.
    fn damaged(&mut self, i: usize, reason: String) {
        let o = &mut self.objects[i];
        if !self.bad.iter().any(|b| b.key == o.at.key) {
            self.bad.push(BadIndex {
                key: o.at.key.clone(),
                reason,
            });
        }
        o.header = None;
        o.at.size = u64::MAX;
    }

    /// Forget the objects found damaged or gone.
    fn drop_damaged(&mut self) {
        self.objects.retain(|o| o.at.size != u64::MAX);
    }
}
