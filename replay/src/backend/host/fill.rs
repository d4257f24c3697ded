//! Filling the arena from files: the runner's side, and the parent's request.
//!
//! The parent sends the input part's extents (see
//! `rrstore_format::extents`: pack, archive or raw file ranges, each with the
//! blake3 of its decoded bytes when it has one) and the runner reads and
//! decodes them straight into the arena: every byte is copied once, from the
//! page cache into the arena, where handing them over from the parent costs a
//! decode into a staging window plus a cross-process copy.
//!
//! A fill runs before the runner loads the image, on one thread per core
//! when it is large (which inputs the runner fills: `fills_from_files`).
//! Overlapping a large fill with the image load measured no faster on two
//! cores (the fill's page faults and the loader's mappings contend), and
//! the fill's own duration stays the rehydration time. In a spare that
//! preloads the runtime ([`super::preload`]) the fill does run during that
//! load, and the threads it starts wait for the loader's lock until the
//! load ends (see [`fill`]). The wire form of a plan is [`encode`] /
//! [`decode`].
//!
//! Relocated replays (issue 19, [`crate::placement`]): each chunk's
//! stored pointers are rebased right after it is decoded, while it is in
//! cache; the few words that straddle two chunks are rebased once all
//! chunks are in.

use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use rrstore_format::chunk::Codec;
use rrstore_format::extents::{Extent, ExtentReader, PartExtents};

use super::client::Pending;
use super::fill_trace::{Probe, Trace};
use super::protocol::{Fields, Msg, Op};
use crate::backend::BackendError;
use crate::placement::Rebaser;

/// Fills smaller than this run on the runner's own thread, at once.
const THREADED_MIN: u64 = 1 << 20;
/// At least this many bytes per worker thread.
const PER_THREAD_MIN: u64 = 2 << 20;
/// At most this many worker threads.
const MAX_THREADS: usize = 16;

/// Why a fill failed: the part offset of the extent and the reason.
pub type FillError = (u64, String);

/// What a fill did: how long it took, and the arena offsets of the stored
/// pointers it rebased (empty unless relocated).
pub type Filled = (Duration, Vec<u64>);

/// Decode `plan` into memory at `base`, on several threads when it is
/// large; returns how long it took, from when the first of those threads
/// started: a thread started while the runner's preload (see
/// [`preload`](super::preload)) is still in `dlopen` waits for the dynamic
/// loader's lock before it runs any of its code, and that wait is the
/// load's, not the fill's (the replay's wall time has both). With a
/// `trace`, each thread's figures are added to it ([`super::fill_trace`]).
///
/// # Safety
/// `base..base + plan.len()` is mapped writable memory that nothing else
/// reads or writes during the call.
pub unsafe fn fill(
    plan: &PartExtents,
    base: u64,
    rebaser: Option<&Rebaser>,
    trace: Option<&Trace>,
) -> Result<Filled, FillError> {
    let started = Instant::now();
    let total = plan.len();
    let threads = if total < THREADED_MIN {
        1
    } else {
        cpus()
            .min(MAX_THREADS)
            .min((total / PER_THREAD_MIN).max(1) as usize)
    };
    let runs = plan.split(threads);
    let traced = |probe: Option<Probe>, offset: u64, bytes: u64| {
        if let (Some(t), Some(p)) = (trace, probe) {
            t.add(p.finish(t.requested, offset, bytes));
        }
    };
    let (took, mut rebased) = if runs.len() <= 1 {
        let mut list = Vec::new();
        let probe = trace.map(|_| Probe::now());
        let r = fill_run(plan, 0..plan.extents.len(), base, 0, rebaser, &mut list);
        traced(probe, 0, total);
        r.map(|()| (started.elapsed(), list))?
    } else {
        std::thread::scope(|s| {
            let workers: Vec<_> = runs
                .into_iter()
                .map(|(run, offset)| {
                    s.spawn(move || {
                        let began = Instant::now();
                        let probe = trace.map(|_| Probe::now());
                        let bytes = plan.extents[run.clone()].iter().map(|e| e.len).sum();
                        let mut list = Vec::new();
                        let r = fill_run(plan, run, base, offset, rebaser, &mut list);
                        traced(probe, offset, bytes);
                        (began, r.map(|()| list))
                    })
                })
                .collect();
            let mut first = Ok(Vec::new());
            let mut began = None::<Instant>;
            for w in workers {
                let r = match w.join() {
                    Ok((at, r)) => {
                        began = Some(began.map_or(at, |b| b.min(at)));
                        r
                    }
                    Err(_) => Err((0, "a fill thread panicked".into())),
                };
                match (&mut first, r) {
                    (Ok(all), Ok(list)) => all.extend(list),
                    (Ok(_), Err(e)) => first = Err(e),
                    _ => {}
                }
            }
            first.map(|list| {
                (
                    began.map_or_else(|| started.elapsed(), |b| b.elapsed()),
                    list,
                )
            })
        })?
    };
    if let Some(r) = rebaser {
        // The words that straddle two chunks, now that both are in.
        // SAFETY: `fill`'s contract; the fill threads have ended.
        let arena = unsafe { std::slice::from_raw_parts_mut(base as *mut u8, total as usize) };
        let mut at = 0u64;
        for e in &plan.extents {
            let word = at - at % 8;
            if !at.is_multiple_of(8) && word + 8 <= total && r.rebase_word_at(arena, 0, word) {
                rebased.push(word);
            }
            at += e.len;
        }
        rebased.sort_unstable();
    }
    Ok((took, rebased))
}

/// CPUs this process may run on: the affinity mask, one system call
/// (`available_parallelism` also reads cgroup files, ~0.2 ms).
fn cpus() -> usize {
    // SAFETY: `set` is a plain bitmask the call fills in; its size is passed.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            (libc::CPU_COUNT(&set) as usize).max(1)
        } else {
            1
        }
    }
}

/// Decode the extents `run` of `plan`, which start at byte `offset` of the
/// part, into the memory from `base + offset`. A chunk equal to the one
/// before it (a run of zero pages) is copied from it: it was verified there.
/// With a `rebaser`, each chunk's whole words are rebased once it is in
/// (offsets pushed to `rebased`); a copy is only made from a chunk that had
/// no pointers (a copy of rebased bytes would need its offsets listed too:
/// such a chunk is decoded again instead).
fn fill_run(
    plan: &PartExtents,
    run: std::ops::Range<usize>,
    base: u64,
    mut offset: u64,
    rebaser: Option<&Rebaser>,
    rebased: &mut Vec<u64>,
) -> Result<(), FillError> {
    let mut reader = ExtentReader::new(plan);
    let mut prev: Option<(&Extent, u64)> = None;
    let mut prev_rebased = 0usize;
    for i in run {
        let e = &plan.extents[i];
        let at = base + offset;
        let n = usize::try_from(e.len).map_err(|_| (offset, "extent too large".to_string()))?;
        let before = rebased.len();
        match prev {
            Some((p, from))
                if e.hash.is_some() && p.hash == e.hash && p.len == e.len && prev_rebased == 0 =>
            {
                // SAFETY: both ranges lie in this run's part of the arena
                // (see below), and they do not overlap (`from + len <= at`).
                unsafe { std::ptr::copy_nonoverlapping(from as *const u8, at as *mut u8, n) };
                // Words of another phase than the source's: scan them.
                if let Some(r) = rebaser.filter(|_| !(at - from).is_multiple_of(8)) {
                    // SAFETY: as for the decode below.
                    let dst = unsafe { std::slice::from_raw_parts_mut(at as *mut u8, n) };
                    rebased.extend(r.rebase(dst, offset));
                }
            }
            _ => {
                // SAFETY: `fill`'s contract: the plan's bytes from `base`
                // are mapped, writable and untouched by anything else; runs
                // of different threads are disjoint (`PartExtents::split`).
                let dst = unsafe { std::slice::from_raw_parts_mut(at as *mut u8, n) };
                reader
                    .decode_into(i, dst)
                    .map_err(|err| (offset, err.to_string()))?;
                if let Some(r) = rebaser {
                    rebased.extend(r.rebase(dst, offset));
                }
            }
        }
        prev_rebased = rebased.len() - before;
        prev = Some((e, at));
        offset += e.len;
    }
    Ok(())
}

/// Append `plan` to a request.
pub fn encode(m: &mut Msg, plan: &PartExtents) {
    m.u64(plan.files.len() as u64);
    for f in &plan.files {
        m.bytes(f.as_os_str().as_bytes());
    }
    m.u64(plan.extents.len() as u64);
    for e in &plan.extents {
        m.u64(u64::from(e.file))
            .u64(e.offset)
            .u64(e.stored_len)
            .u64(e.len)
            .u64(e.codec as u64)
            .bytes(e.hash.as_ref().map_or(&[][..], |h| &h[..]));
    }
}

/// Append the fill's relocation (none, or the recorded base and span; the
/// new base is the fill's address).
pub fn encode_rebaser(m: &mut Msg, r: Option<&Rebaser>) {
    match r {
        Some(r) => m.u64(1).u64(r.old_base).u64(r.span),
        None => m.u64(0),
    };
}

/// Read what [`encode_rebaser`] wrote, for a fill at `base`.
pub fn decode_rebaser(f: &mut Fields<'_>, base: u64) -> std::io::Result<Option<Rebaser>> {
    Ok(match f.u64()? {
        0 => None,
        _ => Some(Rebaser {
            old_base: f.u64()?,
            new_base: base,
            span: f.u64()?,
        }),
    })
}

/// Read a plan written by [`encode`].
pub fn decode(f: &mut Fields<'_>) -> std::io::Result<PartExtents> {
    let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
    let nfiles = f.u64()?;
    let mut files = Vec::new();
    for _ in 0..nfiles {
        let bytes = f.bytes()?;
        files.push(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(bytes)));
    }
    let n = f.u64()?;
    let mut extents = Vec::new();
    for _ in 0..n {
        let file = u32::try_from(f.u64()?).map_err(|_| bad("extent file index"))?;
        let (offset, stored_len, len) = (f.u64()?, f.u64()?, f.u64()?);
        let codec = u8::try_from(f.u64()?)
            .ok()
            .and_then(Codec::from_u8)
            .ok_or_else(|| bad("extent codec"))?;
        let hash = match f.bytes()? {
            [] => None,
            h => Some(<[u8; 32]>::try_from(h).map_err(|_| bad("extent hash"))?),
        };
        if file as usize >= files.len() {
            return Err(bad("extent names a file that is not listed"));
        }
        extents.push(Extent {
            file,
            offset,
            stored_len,
            len,
            codec,
            hash,
        });
    }
    Ok(PartExtents { files, extents })
}

/// The parent's side of a fill: ask the runner, collect its outcome.
impl super::HostBackend {
    /// Ask the runner to fill the arena from the files `extents` name
    /// (decoded and verified by the runner, rebasing stored pointers when
    /// the arena is relocated); [`finish_fill`](Self::finish_fill)
    /// collects the outcome.
    pub fn start_fill(&mut self, extents: &PartExtents) -> Result<(), BackendError> {
        let base = self.arena_at(0, 0)?.base;
        let mut m = Msg::op(Op::Fill);
        m.u64(base);
        encode(&mut m, extents);
        encode_rebaser(&mut m, self.rebaser.as_ref());
        self.send(&m)?;
        self.pending.push(Pending::Fill);
        Ok(())
    }

    /// Wait for the fill [`start_fill`](Self::start_fill) began: how long it
    /// took in the runner, or why it failed (a file gone, moved or corrupt).
    /// The outer error is the runner itself failing.
    pub fn finish_fill(&mut self) -> Result<Result<Duration, String>, BackendError> {
        self.settle()?;
        Ok(self
            .filled
            .take()
            .unwrap_or_else(|| Err("no fill was started".into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: u64 = 0x7f1a_fde0_0010;
    const NEW: u64 = 0x3000_0000_0010;

    /// A 5 MiB input of raw chunks of odd lengths (so words straddle chunk
    /// and thread boundaries), runs of equal chunks (copied from the one
    /// before: zeros, and ones holding pointers), pointers everywhere.
    fn input(dir: &std::path::Path) -> (Vec<u8>, PartExtents) {
        let size = 5usize << 20;
        let mut data = vec![0u8; size];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for w in (0..size - 8).step_by(8).filter(|w| w % 3 == 0) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = if x.is_multiple_of(4) {
                OLD + x % size as u64
            } else {
                x
            };
            data[w..w + 8].copy_from_slice(&v.to_le_bytes());
        }
        // (length, repeat of the chunk before: 0 no, 1 zeroed pair, 2 as is)
        let pattern = [
            (10_007usize, 0),
            (13, 0),
            (4_099, 0),
            (4_099, 1),
            (8_192, 0),
            (65_537, 0),
            (65_537, 2),
            (8_191, 0),
            (8_191, 2),
        ];
        let mut lens = Vec::new();
        let mut at = 0usize;
        for &(len, repeat) in pattern.iter().cycle() {
            if at >= size {
                break;
            }
            let len = len.min(size - at);
            if repeat > 0 && lens.last() == Some(&len) {
                let (a, b) = data.split_at_mut(at);
                if repeat == 1 {
                    a[at - len..].fill(0);
                }
                b[..len].copy_from_slice(&a[at - len..]);
            }
            lens.push(len);
            at += len;
        }
        let file = dir.join("input.raw");
        std::fs::write(&file, &data).unwrap();
        let mut extents = Vec::new();
        let mut off = 0u64;
        for len in lens {
            let bytes = &data[off as usize..off as usize + len];
            extents.push(Extent {
                file: 0,
                offset: off,
                stored_len: len as u64,
                len: len as u64,
                codec: Codec::Raw,
                hash: Some(*blake3::hash(bytes).as_bytes()),
            });
            off += len as u64;
        }
        (
            data,
            PartExtents {
                files: vec![file],
                extents,
            },
        )
    }

    #[test]
    fn a_relocated_fill_rebases_exactly_what_a_whole_scan_does() {
        let tmp = tempfile::tempdir().unwrap();
        let (data, plan) = input(tmp.path());
        // Both kinds of repeated chunks are there (copied, or decoded
        // again because the one before held pointers).
        let repeats = |zero: bool| {
            plan.extents
                .windows(2)
                .filter(|w| w[0].hash == w[1].hash)
                .filter(|w| {
                    let o = w[1].offset as usize;
                    data[o..o + w[1].len as usize].iter().all(|&b| b == 0) == zero
                })
                .count()
        };
        assert!(repeats(true) > 10 && repeats(false) > 10);
        let r = Rebaser {
            old_base: OLD,
            new_base: NEW,
            span: data.len() as u64,
        };
        let mut want = data.clone();
        let want_list = r.rebase(&mut want, 0);
        assert!(want_list.len() > 10_000);
        let mut arena = vec![0u8; data.len()];
        // SAFETY: `arena` is writable memory of the plan's length that
        // nothing else touches during the call.
        let (_, list) = unsafe { fill(&plan, arena.as_mut_ptr() as u64, Some(&r), None) }.unwrap();
        assert!(arena == want, "the filled arena differs from a whole scan");
        assert_eq!(list, want_list);
        // Without relocation the fill is the input as it is.
        let mut plain = vec![0u8; data.len()];
        // SAFETY: as above.
        let (_, none) = unsafe { fill(&plan, plain.as_mut_ptr() as u64, None, None) }.unwrap();
        assert!(plain == data && none.is_empty());
    }
}
