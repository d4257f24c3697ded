//! Lock objects of a version 3 remote (spec/REMOTE.md, "Removal"): a push
//! holds a shared lock `locks/shared-<host>-<pid>-<n>` for its whole run;
//! `remote prune` holds the exclusive lock `locks/exclusive`, created with
//! a conditional PUT (`If-None-Match: *`). Each side writes its own lock
//! first and then looks for the other's, so a push and a prune never both
//! go ahead. A lock is rewritten every [`REFRESH`] while held; one not
//! rewritten for [`STALE`] belongs to a process that died and is ignored
//! (and removed by a prune), and so, at once, is one of this host whose
//! process no longer runs (judged as `temp` judges temporary files).

use std::time::{Duration, SystemTime};

use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::client::Remote;
use super::error::{RemoteError, Result};

pub const LOCKS: &str = "locks/";
const EXCLUSIVE: &str = "locks/exclusive";
const REFRESH: Duration = Duration::from_secs(5 * 60);
pub const STALE: Duration = Duration::from_secs(30 * 60);
/// A push waits this long at most for a prune to finish.
const WAIT: Duration = Duration::from_secs(15 * 60);

/// A held lock: rewritten in the background, removed on drop.
pub struct Lock<'a> {
    remote: &'a Remote,
    key: String,
    refresher: tokio::task::JoinHandle<()>,
}

impl Lock<'_> {
    /// The lock object's key.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl Drop for Lock<'_> {
    fn drop(&mut self) {
        self.refresher.abort();
        let _ = self.remote.delete_all(std::slice::from_ref(&self.key));
    }
}

fn body(kind: &str) -> Vec<u8> {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!(
        "{{\"kind\":\"{kind}\",\"host\":\"{}\",\"pid\":{},\"time\":{now}}}\n",
        rrstore_format::output::host_name(),
        std::process::id()
    )
    .into_bytes()
}

impl Remote {
    /// PUT `key`; with `create`, only if it does not exist (`Ok(false)`:
    /// it did).
    fn put_lock(&self, key: &str, kind: &str, create: bool) -> Result<bool> {
        if let Some(root) = &self.root {
            self.count(1);
            return super::temp::write_object(root, key, &body(kind), create)
                .map_err(|e| self.fs_err(format!("writing lock {key}"), e));
        }
        let path = self.path(key);
        let opts = PutOptions {
            mode: if create {
                PutMode::Create
            } else {
                PutMode::Overwrite
            },
            ..Default::default()
        };
        self.count(1);
        let r = self.rt.block_on(
            self.store
                .put_opts(&path, PutPayload::from(body(kind)), opts),
        );
        match r {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(self.err(format!("writing lock {key}"), e)),
        }
    }

    /// Keep `key` fresh until the returned handle is aborted.
    fn refresh_in_background(&self, key: &str, kind: &'static str) -> tokio::task::JoinHandle<()> {
        let store = self.store.clone();
        let path = self.path(key);
        let (root, key) = (self.root.clone(), key.to_string());
        self.rt.spawn(async move {
            loop {
                tokio::time::sleep(REFRESH).await;
                match &root {
                    Some(root) => {
                        let (root, key) = (root.clone(), key.clone());
                        let _ = tokio::task::spawn_blocking(move || {
                            super::temp::write_object(&root, &key, &body(kind), false)
                        })
                        .await;
                    }
                    None => {
                        let _ = store.put(&path, PutPayload::from(body(kind))).await;
                    }
                }
            }
        })
    }

    /// The lock objects on the remote (keys of another form under
    /// `locks/` are no lock of rrstore's and are ignored), judged: the
    /// exclusive lock's holder is read from its body.
    fn locks(&self) -> Result<Vec<Held>> {
        let now = SystemTime::now();
        let me = host();
        let mut out = Vec::new();
        for (key, modified) in self.list_meta(LOCKS)? {
            if !is_lock_key(&key) {
                continue;
            }
            let holder = if key == EXCLUSIVE {
                // Gone since the listing: nothing holds it.
                let Some(b) = self.get(&key)? else { continue };
                holder_of_body(&b)
            } else {
                holder_of_key(&key)
            };
            let age = now.duration_since(modified).unwrap_or_default();
            let dead_here = holder
                .as_ref()
                .is_some_and(|h| h.host == me && super::temp::process_gone(h.pid));
            out.push(Held {
                fresh: age < STALE && !dead_here,
                key,
                age,
                holder,
            });
        }
        Ok(out)
    }

    /// Take a shared lock (push), waiting while a prune holds the
    /// exclusive one; `notice` is told once, when the wait begins, what
    /// is waited for.
    pub fn lock_shared(&self, notice: &mut dyn FnMut(String)) -> Result<Lock<'_>> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let key = format!(
            "{LOCKS}shared-{}-{}-{}",
            host(),
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let start = std::time::Instant::now();
        let mut told = false;
        loop {
            self.put_lock(&key, "push", false)?;
            let locks = self.locks()?;
            let Some(prune) = locks.iter().find(|l| l.key == EXCLUSIVE && l.fresh) else {
                return Ok(Lock {
                    remote: self,
                    refresher: self.refresh_in_background(&key, "push"),
                    key,
                });
            };
            if !told {
                told = true;
                notice(format!(
                    "waiting for a `remote prune` of remote `{}` to finish: {} ({}); \
                     a push waits up to {} minutes",
                    self.name,
                    EXCLUSIVE,
                    prune.describe(),
                    WAIT.as_secs() / 60
                ));
            }
            // Give way to the prune, then try again.
            self.delete_all(std::slice::from_ref(&key))?;
            if start.elapsed() > WAIT {
                return Err(RemoteError::Busy {
                    remote: self.name.clone(),
                    reason: format!(
                        "a `remote prune` has held {EXCLUSIVE} for over {} minutes ({}): try again later, \
                         or delete that object if no prune runs",
                        WAIT.as_secs() / 60,
                        prune.describe()
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Take the exclusive lock (prune): fails when another prune holds it
    /// or a push holds a shared lock. Stale locks are removed.
    pub fn lock_exclusive(&self) -> Result<Lock<'_>> {
        let stale: Vec<String> = self
            .locks()?
            .into_iter()
            .filter(|l| !l.fresh)
            .map(|l| l.key)
            .collect();
        self.delete_all(&stale)?;
        if !self.put_lock(EXCLUSIVE, "prune", true)? {
            let holder = self
                .locks()?
                .into_iter()
                .find(|l| l.key == EXCLUSIVE)
                .map(|l| format!(" ({})", l.describe()))
                .unwrap_or_default();
            return Err(RemoteError::Busy {
                remote: self.name.clone(),
                reason: format!(
                    "another `remote prune` holds {EXCLUSIVE}{holder}: try again later"
                ),
            });
        }
        let lock = Lock {
            remote: self,
            refresher: self.refresh_in_background(EXCLUSIVE, "prune"),
            key: EXCLUSIVE.to_string(),
        };
        let pushes: Vec<String> = self
            .locks()?
            .into_iter()
            .filter(|l| l.fresh && l.key != EXCLUSIVE)
            .map(|l| format!("{}: {}", l.key, l.describe()))
            .collect();
        if !pushes.is_empty() {
            return Err(RemoteError::Busy {
                remote: self.name.clone(),
                reason: format!(
                    "{} push(es) in progress ({}): prune again when they are done",
                    pushes.len(),
                    pushes.join("; ")
                ),
            });
        }
        Ok(lock)
    }
}

/// A lock object found on the remote.
struct Held {
    key: String,
    /// Time since it was last written.
    age: Duration,
    holder: Option<Holder>,
    /// Held by a live process: written within [`STALE`], and, when its
    /// holder is of this host, by a process that still runs.
    fresh: bool,
}

/// Who wrote a lock: host (as [`host`] writes it) and process.
struct Holder {
    host: String,
    pid: u32,
}

impl Held {
    /// "held by host H, pid P, written N s ago", printable whatever the
    /// remote holds.
    fn describe(&self) -> String {
        let who = match &self.holder {
            Some(h) => format!("held by host {}, pid {}", h.host, h.pid),
            None => "holder unknown".into(),
        };
        format!("{who}, written {} s ago", self.age.as_secs())
    }
}

/// The holder a shared lock's key names.
fn holder_of_key(key: &str) -> Option<Holder> {
    let rest = key.strip_prefix(LOCKS)?.strip_prefix("shared-")?;
    let mut it = rest.rsplitn(3, '-');
    let (_, pid, host) = (it.next()?, it.next()?, it.next()?);
    Some(Holder {
        host: host.to_string(),
        pid: pid.parse().ok()?,
    })
}

/// The holder a lock's body names (`{"host": ..., "pid": ...}`); a host
/// of other characters than [`host`] writes is no host of rrstore's.
fn holder_of_body(b: &[u8]) -> Option<Holder> {
    #[derive(serde::Deserialize)]
    struct Body {
        host: String,
        pid: u32,
    }
    let b: Body = serde_json::from_slice(b).ok()?;
    let clean = !b.host.is_empty()
        && b.host.len() <= 255
        && b.host
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_');
    clean.then_some(Holder {
        host: b.host,
        pid: b.pid,
    })
}

/// `locks/exclusive` or `locks/shared-<host>-<pid>-<n>` (the host as
/// [`host`] writes it).
pub fn is_lock_key(key: &str) -> bool {
    let Some(name) = key.strip_prefix(LOCKS) else {
        return false;
    };
    if key == EXCLUSIVE {
        return true;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(rest) = name.strip_prefix("shared-") else {
        return false;
    };
    let mut it = rest.rsplitn(3, '-');
    let (Some(n), Some(pid), Some(host)) = (it.next(), it.next(), it.next()) else {
        return false;
    };
    digits(n)
        && digits(pid)
        && !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The host name as a key component: other than letters, digits and `-`
/// replaced by `_`.
fn host() -> String {
    rrstore_format::output::host_name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
