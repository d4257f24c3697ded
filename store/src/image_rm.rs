//! `rrstore image rm`: dropping images from the image library. Like `rm` of
//! a recording (and git's `rm`), only the `images` row goes; the bytes stay
//! until `gc`, which keeps them while a recording's image part or a saved
//! output shares them. History rows keep naming the image's hash.

use rusqlite::TransactionBehavior;

use crate::error::{Result, StoreError};
use crate::images::ImageInfo;
use crate::Store;

impl Store {
    /// Remove `images` from the image library in one transaction (all or
    /// none). Returns how many rows were removed.
    pub fn remove_images(&mut self, images: &[ImageInfo]) -> Result<usize> {
        let path = self.index_path();
        let err = |source| StoreError::Index {
            path: path.clone(),
            context: "removing images".into(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let mut n = 0;
        for i in images {
            n += tx
                .execute("DELETE FROM images WHERE hash = ?1", [&i.hash_bytes()[..]])
                .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        Ok(n)
    }
}
