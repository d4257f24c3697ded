//! Lock objects of a version 3 remote (spec/REMOTE.md, "Removal"): a push
//! holds a shared lock `locks/shared-<host>-<pid>-<n>` for its whole run;
//! `remote prune` holds the exclusive lock `locks/exclusive`, created with
//! a conditional PUT (`If-None-Match: *`). Each side writes its own lock
//! first and then looks for the other's, so a push and a prune never both
//! go ahead. A lock is rewritten every [`REFRESH`] while held; one not
//! rewritten for [`STALE`] belongs to a process that died and is ignored
//! (and removed by a prune).

use std::time::{Duration, SystemTime};

use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::backend::Backend;
use super::error::{RemoteError, Result};

pub const LOCKS: &str = "locks/";
const EXCLUSIVE: &str = "locks/exclusive";
const REFRESH: Duration = Duration::from_secs(5 * 60);
pub const STALE: Duration = Duration::from_secs(30 * 60);
/// A push waits this long at most for a prune to finish.
const WAIT: Duration = Duration::from_secs(15 * 60);

/// A held lock: rewritten in the background, removed on drop.
pub struct Lock<'a> {
    remote: &'a Backend,
    key: String,
    refresher: tokio::task::JoinHandle<()>,
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

impl Backend {
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

    /// The locks on the remote: (key, fresh).
    fn locks(&self) -> Result<Vec<(String, bool)>> {
        let now = SystemTime::now();
        Ok(self
            .list_meta(LOCKS)?
            .into_iter()
            .map(|(k, modified)| {
                let age = now.duration_since(modified).unwrap_or_default();
                (k, age < STALE)
            })
            .collect())
    }

    /// Take a shared lock (push), waiting while a prune holds the
    /// exclusive one.
    pub fn lock_shared(&self) -> Result<Lock<'_>> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let key = format!(
            "{LOCKS}shared-{}-{}-{}",
            host(),
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let start = std::time::Instant::now();
        loop {
            self.put_lock(&key, "push", false)?;
            let pruning = self
                .locks()?
                .iter()
                .any(|(k, fresh)| k == EXCLUSIVE && *fresh);
            if !pruning {
                return Ok(Lock {
                    remote: self,
                    refresher: self.refresh_in_background(&key, "push"),
                    key,
                });
            }
            // Give way to the prune, then try again.
            self.delete_all(std::slice::from_ref(&key))?;
            if start.elapsed() > WAIT {
                return Err(RemoteError::Busy {
                    remote: self.name.clone(),
                    reason: format!(
                        "a `remote prune` has held {EXCLUSIVE} for over {} minutes: try again later, \
                         or delete that object if no prune runs",
                        WAIT.as_secs() / 60
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
            .filter(|(_, fresh)| !fresh)
            .map(|(k, _)| k)
            .collect();
        self.delete_all(&stale)?;
        if !self.put_lock(EXCLUSIVE, "prune", true)? {
            return Err(RemoteError::Busy {
                remote: self.name.clone(),
                reason: format!("another `remote prune` holds {EXCLUSIVE}: try again later"),
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
            .filter(|(k, fresh)| *fresh && k != EXCLUSIVE)
            .map(|(k, _)| k)
            .collect();
        if !pushes.is_empty() {
            return Err(RemoteError::Busy {
                remote: self.name.clone(),
                reason: format!(
                    "{} push(es) in progress ({}): prune again when they are done",
                    pushes.len(),
                    pushes.join(", ")
                ),
            });
        }
        Ok(lock)
    }
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
