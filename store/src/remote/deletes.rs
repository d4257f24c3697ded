//! Deleting objects of a remote (`remote migrate` removes the version 2
//! objects it converted, `rm` manifests and signatures, `remote prune`
//! packs and index objects, locks their own), many at once. A delete of
//! an object already gone succeeds. Only keys that are exactly the name of
//! an rrstore object or temporary file are deleted (`names`): any other is
//! refused before anything is deleted.

use futures::StreamExt;
use object_store::ObjectStoreExt;

use super::client::{Remote, CONCURRENCY};
use super::dirfs;
use super::error::{RemoteError, Result};
use super::names;

impl Remote {
    /// Delete every key, [`CONCURRENCY`] at once; returns how many.
    pub fn delete_all(&self, keys: &[String]) -> Result<u64> {
        if let Some(key) = keys.iter().find(|k| !names::deletable(k)) {
            return Err(RemoteError::Unsafe {
                remote: self.name.clone(),
                url: self.url.clone(),
                key: key.clone(),
                reason: "is not the name of an rrstore object".into(),
            });
        }
        self.rt.block_on(async {
            let dels = futures::stream::iter(keys).map(|key| async move {
                self.count(1);
                if let Some(root) = self.root.clone() {
                    let k = key.clone();
                    return self
                        .blocking(move || dirfs::delete(&root, &k))
                        .await
                        .map(drop)
                        .map_err(|e| self.fs_err(format!("deleting {key}"), e));
                }
                match self.store.delete(&self.path(key)).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(self.err(format!("deleting {key}"), e)),
                }
            });
            let mut dels = dels.buffer_unordered(CONCURRENCY);
            let mut n = 0u64;
            while let Some(r) = dels.next().await {
                r?;
                n += 1;
            }
            Ok::<u64, RemoteError>(n)
        })
    }
}
