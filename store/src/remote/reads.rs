//! LIST and GET requests of a [`Remote`]: async forms that a caller can
//! run together, so requests that do not depend on each other share one
//! round trip ([`Remote::join`]), and the blocking forms the rest of the
//! crate uses. Every request is counted and traced (`trace`).

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

use super::client::{Remote, CONCURRENCY};
use super::dirfs;
use super::error::{RemoteError, Result};
use super::temp;

/// One listed object: key (relative to the remote's root), size, time.
pub struct Listed {
    pub key: String,
    pub size: u64,
    pub modified: SystemTime,
}

impl Remote {
    /// Run `f` (requests made with the async forms below) to completion.
    pub fn join<F: Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// LIST the objects under `dir`. On a file:// remote, a link below the
    /// directory is an error (`dirfs`), and the staging files of older
    /// versions are left out (as `object_store` did).
    pub async fn list_async(&self, dir: &str) -> Result<Vec<Listed>> {
        if let Some(root) = self.root.clone() {
            let mark = self.trace.begin();
            let d = dir.to_string();
            let items = self
                .blocking(move || dirfs::list(&root, &d))
                .await
                .map_err(|e| self.fs_err(format!("listing {dir}"), e))?;
            self.trace.end(mark, "LIST", dir, None, items.len() as u64);
            self.count(1 + items.len() as u64 / 1000);
            return Ok(items
                .into_iter()
                .filter(|e| !temp::is_legacy_staging(&e.key))
                .map(|e| Listed {
                    key: e.key,
                    size: e.size,
                    modified: e.modified,
                })
                .collect());
        }
        let prefix = self.path(dir.trim_end_matches('/'));
        let base_len = self.base_len();
        let mark = self.trace.begin();
        let items: Vec<object_store::ObjectMeta> = self
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| self.err(format!("listing {dir}"), e))?;
        self.trace.end(mark, "LIST", dir, None, items.len() as u64);
        self.count(1 + items.len() as u64 / 1000);
        Ok(items
            .into_iter()
            .filter_map(|m| {
                Some(Listed {
                    key: m.location.as_ref().get(base_len..)?.to_string(),
                    size: m.size,
                    modified: m.last_modified.into(),
                })
            })
            .collect())
    }

    /// Keys under `dir` with their last-modified times.
    pub fn list_meta(&self, dir: &str) -> Result<Vec<(String, SystemTime)>> {
        let l = self.join(self.list_async(dir))?;
        Ok(l.into_iter().map(|o| (o.key, o.modified)).collect())
    }

    /// Keys under `dir` with their sizes.
    pub fn list_sized(&self, dir: &str) -> Result<Vec<(String, u64)>> {
        let l = self.join(self.list_async(dir))?;
        Ok(l.into_iter().map(|o| (o.key, o.size)).collect())
    }

    /// Keys under `dir` (e.g. `chunks/`), relative to the remote's root.
    pub fn list(&self, dir: &str) -> Result<Vec<String>> {
        let l = self.join(self.list_async(dir))?;
        Ok(l.into_iter().map(|o| o.key).collect())
    }

    /// Keys under each of `dirs`, listed [`CONCURRENCY`] at once.
    pub fn list_many(&self, dirs: &[String]) -> Result<Vec<String>> {
        self.join(async {
            let lists = futures::stream::iter(dirs).map(|d| self.list_async(d));
            let mut lists = lists.buffered(CONCURRENCY);
            let mut keys = Vec::new();
            while let Some(l) = lists.next().await {
                keys.extend(l?.into_iter().map(|o| o.key));
            }
            Ok(keys)
        })
    }

    /// An object's bytes, `None` when it does not exist.
    pub async fn get_async(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(key);
        self.count(1);
        let mark = self.trace.begin();
        let b = if let Some(root) = self.root.clone() {
            let k = key.to_string();
            self.blocking(move || dirfs::get(&root, &k))
                .await
                .map_err(|e| self.fs_err(format!("reading {key}"), e))?
        } else {
            let r = match self.store.get(&path).await {
                Ok(g) => g.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            };
            r.map_err(|e| self.err(format!("reading {key}"), e))?
                .map(|b| b.to_vec())
        };
        let n = b.as_ref().map_or(0, |b| b.len() as u64);
        self.trace.end(mark, "GET", key, None, n);
        self.received.fetch_add(n, Ordering::Relaxed);
        Ok(b)
    }

    /// Every object of `keys` ([`CONCURRENCY`] at once), `None` for those
    /// that do not exist, in the order of `keys`.
    pub async fn get_many_async(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>> {
        let gets = futures::stream::iter(keys).map(|k| self.get_async(k));
        gets.buffered(CONCURRENCY).try_collect().await
    }

    /// An object's bytes, `None` when it does not exist.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.join(self.get_async(key))
    }

    /// Download `keys` up to [`CONCURRENCY`] at once and hand each (key,
    /// bytes or `None` if missing) to `f`, on this thread, in completion order.
    pub fn get_all<I>(
        &self,
        keys: I,
        f: &mut dyn FnMut(String, Option<Vec<u8>>) -> Result<()>,
    ) -> Result<()>
    where
        I: Iterator<Item = String>,
    {
        self.join(async {
            let downloads = futures::stream::iter(keys).map(|key| async move {
                let body = self.get_async(&key).await?;
                Ok::<_, RemoteError>((key, body))
            });
            let mut downloads = downloads.buffer_unordered(CONCURRENCY);
            while let Some(r) = downloads.next().await {
                let (key, body) = r?;
                f(key, body)?;
            }
            Ok(())
        })
    }
}
