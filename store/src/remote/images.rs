//! The image library on a remote (`push --images`, `pull --images`): each
//! image of `rrstore image add` travels as a part (its bytes, chunked and
//! deduplicated like any recording part) plus an immutable image entry
//! `images/<ab>/<image blake3>` with its target, label and source, written
//! after the part. A pulled image is checked like a part (its bytes'
//! blake3 = its name) and enters the local `images` table in one
//! transaction with its part.

use super::error::Result;
use super::pull::{corrupt, Session};
use super::v2::layout;
use super::Event;

impl Session<'_> {
    /// Pull every image on the remote that the local image library lacks.
    pub fn pull_images(&mut self, progress: &mut dyn FnMut(Event)) -> Result<()> {
        let remote = self.remote;
        progress(Event::Phase("listing the remote's images".into()));
        let mut todo = Vec::new();
        for key in remote.list(layout::IMAGES)? {
            let Some(h) = layout::hash_of_key(&key, layout::IMAGES) else {
                continue;
            };
            if self.store.has_image(&h)? {
                self.report.images_present += 1;
            } else {
                todo.push(h);
            }
        }
        let mut entries = Vec::new();
        remote.get_all(todo.iter().map(layout::image_key), &mut |key, body| {
            let h = layout::hash_of_key(&key, layout::IMAGES).unwrap_or_default();
            let body = body.ok_or_else(|| corrupt(remote, &key, "listed but missing".into()))?;
            let e = layout::decode_image(&body, &h).map_err(|r| corrupt(remote, &key, r))?;
            entries.push((h, e));
            Ok(())
        })?;
        entries.sort_by(|a, b| (a.1.added_at, &a.1.hash).cmp(&(b.1.added_at, &b.1.hash)));
        for (h, e) in entries {
            progress(Event::Phase(format!(
                "pulling image {} {}",
                &e.hash[..12],
                e.label
            )));
            let source = format!("{}: {}", remote.url, e.source);
            let added = self.retry(&format!("image {}", e.hash), &mut |s| {
                let Some(pulled) = s.fetch_parts(&[(h, e.len)], progress)? else {
                    return Ok(None);
                };
                let r = s.store.xfer_commit_image(&e, &h, &pulled, &source)?;
                s.committed(&pulled, r);
                Ok(r)
            })?;
            if added {
                self.report.images += 1;
                self.report.logical_bytes += e.len;
                self.report.image_hashes.push(e.hash);
            } else {
                self.report.images_present += 1;
            }
        }
        Ok(())
    }
}
