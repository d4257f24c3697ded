//! `rrstore image rm`: dropping images from the image library. Like `rm` of
//! a recording (and git's `rm`), only the `images` row goes; the bytes stay
//! until `gc`, which keeps them while a recording's image part or a saved
//! output shares them. History rows keep naming the image's hash.

use crate::error::Result;
use crate::images::ImageInfo;
use crate::index::write;
use crate::Store;

impl Store {
    /// Remove `images` from the image library in one transaction (all or
    /// none). Returns how many rows were removed.
    pub fn remove_images(&mut self, images: &[ImageInfo]) -> Result<usize> {
        let index = self.index_path();
        write::in_transaction(&mut self.conn, &index, "removing images", |tx| {
            images
                .iter()
                .try_fold(0, |n, i| Ok(n + write::delete_image(tx, &i.hash_bytes())?))
        })
    }
}
