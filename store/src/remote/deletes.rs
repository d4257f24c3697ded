//! Deleting objects of a remote (`remote migrate` removes the version 2
//! objects it converted), many at once. A delete of an object already
//! gone succeeds.

use futures::StreamExt;
use object_store::ObjectStoreExt;

use super::backend::{Backend, CONCURRENCY};
use super::error::{RemoteError, Result};

impl Backend {
    /// Delete every key, [`CONCURRENCY`] at once; returns how many.
    pub fn delete_all(&self, keys: &[String]) -> Result<u64> {
        self.rt.block_on(async {
            let dels = futures::stream::iter(keys).map(|key| async move {
                self.count(1);
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
