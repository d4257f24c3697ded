//! Fleet replay (issue 21) for `check`, `bisect --label` and `bisect
//! --passes --label`: several recordings at once, over lanes
//! ([`crate::fleet::pool`]); [`each_recording`] runs one search per
//! recording of a selection. A lane is a
//! host job (`jobs`: each replay starts its own runner process) or a GPU
//! (`devices`: one replay per device at a time, the replay options' device
//! set to it). Each lane has its own connection to the store (SQLite in
//! WAL mode serialises the history writes; pack writers lock their own
//! packs), the first lane the caller's.
//!
//! With more than one lane the replays run on threads, so the host backend
//! executes its runners instead of forking them (a multi-threaded process
//! must not fork code that goes on to `malloc` and `dlopen`:
//! `backend::host::process`); each runner maps its own arena in its own
//! address space, so two replays of recordings with the same arena address
//! do not collide. Scratch output files are named per replay
//! (`regress::run`).
//!
//! GPU lanes look ahead ([`crate::fleet::lookahead`]): while a lane's
//! kernel runs, the lane's next recording is prepared (its child started,
//! its input decoded), each lane holding its next recording
//! ([`run_ordered_ahead`]). What a lane prepares only ever serves that
//! lane's next replay, so verdicts and rows are those of `--jobs 1`.

use rrstore_store::Store;

use super::run::RunOptions;
use super::RegressError;
use crate::fleet::lookahead::{Lookahead, Mode};
use crate::fleet::pool::run_ordered_ahead;
use crate::fleet::shard::Shard;
use rrstore_format::RecordingId;

/// How many replays at once, where, and which subset.
#[derive(Clone, Debug)]
pub struct Fleet {
    /// Host: replays at once (at least 1).
    pub jobs: usize,
    /// GPU ordinals to spread over (empty: the options' one device).
    pub devices: Vec<u32>,
    /// Only the recordings of this shard.
    pub shard: Option<Shard>,
    /// Prepare each lane's next recording while its kernel runs: `Gpu`
    /// (the default) on device lanes (`devices`), `All` on every lane,
    /// `None` never.
    pub lookahead: Option<Mode>,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet {
            jobs: 1,
            devices: Vec::new(),
            shard: None,
            lookahead: Some(Mode::Gpu),
        }
    }
}

enum LaneStore<'a> {
    Caller(&'a mut Store),
    Own(Box<Store>),
}

struct Lane<'a> {
    store: LaneStore<'a>,
    run: RunOptions,
}

impl Fleet {
    /// The lookahead mode of these lanes, when they look ahead.
    fn looks_ahead(&self) -> Option<Mode> {
        match self.lookahead {
            Some(Mode::Gpu) if !self.devices.is_empty() => Some(Mode::Gpu),
            Some(Mode::All) => Some(Mode::All),
            _ => None,
        }
    }
}

/// The OpenMP runtime's spin time after a parallel region, set to 0 for the
/// runners of parallel host lanes unless the user chose a wait policy.
/// libomp's worker threads otherwise spin for 200 ms after each parallel
/// region: with two runners on two cores, one runner's idle spinning
/// takes the core the other's kernel needs (`check --jobs 2` measured
/// 1.56-1.69x faster than `--jobs 1` with the default and 1.74-1.75x with
/// 0; BENCHMARKS.md "Session 10"). Only scheduling changes, not what a
/// kernel computes, and it is not an `OMP_*` launch setting.
const BLOCKTIME: &str = "KMP_BLOCKTIME";

impl Fleet {
    /// The run options of each lane: one per device, else `jobs` copies.
    pub fn lane_options(&self, run: &RunOptions) -> Vec<RunOptions> {
        self.lane_options_in(run, &|k| std::env::var_os(k).is_some())
    }

    /// [`lane_options`](Self::lane_options), with `set(name)` saying
    /// whether this process' environment sets a variable.
    fn lane_options_in(&self, run: &RunOptions, set: &dyn Fn(&str) -> bool) -> Vec<RunOptions> {
        if self.devices.is_empty() {
            let mut run = run.clone();
            let host = &mut run.replay.backends.host.env;
            let chosen = set(BLOCKTIME)
                || set("OMP_WAIT_POLICY")
                || host
                    .iter()
                    .any(|(k, _)| k == BLOCKTIME || k == "OMP_WAIT_POLICY");
            if self.jobs > 1 && !chosen {
                host.push((BLOCKTIME.into(), "0".into()));
            }
            return vec![run; self.jobs.max(1)];
        }
        self.devices
            .iter()
            .map(|&d| {
                let mut r = run.clone();
                r.replay.device = d;
                r
            })
            .collect()
    }
}

/// Run `work(store, lane options, i)` for `i` in `0..n` over the lanes of
/// `fleet`; `done` sees each result in order of `i`. Fails only when a
/// lane's store cannot be opened (before anything ran).
#[allow(clippy::type_complexity)]
pub fn each<R: Send>(
    store: &mut Store,
    fleet: &Fleet,
    run: &RunOptions,
    n: usize,
    work: &(dyn Fn(&mut Store, &RunOptions, usize) -> Result<R, RegressError> + Sync),
    done: &mut dyn FnMut(usize, Result<R, RegressError>),
) -> Result<(), RegressError> {
    each_ahead(store, fleet, run, n, &|_| None, work, done)
}

/// The stored recordings a `--label`/`--kernel` filter selects (bisect,
/// tune), resolved to their IDs.
pub fn recordings(
    store: &Store,
    filter: &rrstore_store::LsFilter,
) -> Result<Vec<RecordingId>, RegressError> {
    let mut out = Vec::new();
    for s in store.list(filter)? {
        out.push(store.resolve(&s.id)?);
    }
    Ok(out)
}

/// Run `search(store, lane options, id)` for each of `ids` over the lanes
/// of `fleet` (`bisect --label`, `bisect --passes --label`); `done` sees
/// each recording's result in the order of `ids`, and one failure does not
/// stop the others. Fails only when a lane's store cannot be opened.
#[allow(clippy::type_complexity)]
pub fn each_recording<R: Send>(
    store: &mut Store,
    ids: &[RecordingId],
    fleet: &Fleet,
    run: &RunOptions,
    search: &(dyn Fn(&mut Store, &RunOptions, &RecordingId) -> Result<R, RegressError> + Sync),
    done: &mut dyn FnMut(usize, Result<R, RegressError>),
) -> Result<(), RegressError> {
    let work = |store: &mut Store, run: &RunOptions, i: usize| search(store, run, &ids[i]);
    each(store, fleet, run, ids.len(), &work, done)
}

/// [`each`], where item `i` replays recording `id_of(i)` first: lanes that
/// look ahead ([`Fleet::lookahead`]) prepare their next item's recording.
#[allow(clippy::type_complexity)]
pub fn each_ahead<R: Send>(
    store: &mut Store,
    fleet: &Fleet,
    run: &RunOptions,
    n: usize,
    id_of: &(dyn Fn(usize) -> Option<RecordingId> + Sync),
    work: &(dyn Fn(&mut Store, &RunOptions, usize) -> Result<R, RegressError> + Sync),
    done: &mut dyn FnMut(usize, Result<R, RegressError>),
) -> Result<(), RegressError> {
    let mut opts = fleet.lane_options(run);
    // No more lanes than items: each would open the store for nothing.
    opts.truncate(n.max(1));
    let dir = store.dir().to_path_buf();
    if let Some(mode) = fleet.looks_ahead() {
        let lanes = opts.len();
        for o in &mut opts {
            o.replay.lookahead = Some(Lookahead::new(dir.clone(), lanes, mode));
        }
    }
    let mut lanes = Vec::with_capacity(opts.len());
    let mut opts = opts.into_iter();
    // Every lane's history rows name the caller's machine.
    let machine = store.machine.clone();
    if let Some(first) = opts.next() {
        lanes.push(Lane {
            store: LaneStore::Caller(store),
            run: first,
        });
    }
    for o in opts {
        let mut own = Store::open_existing(&dir)?;
        own.machine = machine.clone();
        lanes.push(Lane {
            store: LaneStore::Own(Box::new(own)),
            run: o,
        });
    }
    // Only lanes that prepare their next recording claim it early.
    let ahead = fleet.looks_ahead().is_some();
    let lanes = run_ordered_ahead(
        lanes,
        n,
        ahead,
        |lane: &mut Lane, i, next| {
            let s = match &mut lane.store {
                LaneStore::Caller(s) => &mut **s,
                LaneStore::Own(s) => s,
            };
            let ahead = lane.run.replay.lookahead.clone();
            if let Some(l) = &ahead {
                l.advance(id_of(i), next.and_then(id_of));
            }
            let r = work(s, &lane.run, i);
            if let (Some(l), None) = (&ahead, next) {
                // The lane's last recording: nothing to prepare any more.
                l.advance(None, None);
            }
            r
        },
        done,
    );
    if crate::settings::gpu_stats() {
        for (k, lane) in lanes.iter().enumerate() {
            if let Some(l) = &lane.run.replay.lookahead {
                let s = l.stats();
                eprintln!(
                    "rrstore-gpu: lane {k} (device {}) lookahead: {} prepared, {} children prestarted, {} inputs decoded ahead, {} replays used one",
                    lane.run.replay.device, s.started, s.children, s.decoded, s.used
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_make_one_lane_each_and_jobs_copies() {
        let run = RunOptions {
            replay: crate::ReplayOptions::default(),
            use_cache: false,
            keep_output: false,
        };
        let f = Fleet {
            jobs: 3,
            ..Fleet::default()
        };
        assert_eq!(f.lane_options(&run).len(), 3);
        let f = Fleet {
            jobs: 1,
            devices: vec![2, 0, 5],
            ..Fleet::default()
        };
        let d: Vec<u32> = f
            .lane_options(&run)
            .iter()
            .map(|r| r.replay.device)
            .collect();
        assert_eq!(d, [2, 0, 5]);
        assert_eq!(Fleet::default().lane_options(&run).len(), 1);
    }

    #[test]
    fn parallel_host_lanes_do_not_spin_unless_the_user_chose_a_wait_policy() {
        let run = RunOptions {
            replay: crate::ReplayOptions::default(),
            use_cache: false,
            keep_output: false,
        };
        let blocktime = |r: &RunOptions| {
            r.replay
                .backends
                .host
                .env
                .iter()
                .filter(|(k, _)| k == BLOCKTIME)
                .map(|(_, v)| v.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        let two = Fleet {
            jobs: 2,
            ..Fleet::default()
        };
        let unset = |_: &str| false;
        for lane in two.lane_options_in(&run, &unset) {
            assert_eq!(blocktime(&lane), ["0"]);
        }
        // One lane: nothing changes; a policy of the user's: left alone.
        let one = Fleet::default().lane_options_in(&run, &unset);
        assert!(blocktime(&one[0]).is_empty());
        let users = two.lane_options_in(&run, &|k| k == "OMP_WAIT_POLICY");
        assert!(blocktime(&users[0]).is_empty());
        let mut own = run.clone();
        own.replay
            .backends
            .host
            .env
            .push((BLOCKTIME.into(), "50".into()));
        assert_eq!(blocktime(&two.lane_options_in(&own, &unset)[0]), ["50"]);
    }
}
