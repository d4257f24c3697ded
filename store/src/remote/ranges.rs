//! Ranged GETs of a remote's objects (version 3 packs), many in flight,
//! telling a missing or truncated object (damage on the remote) from a
//! failed request (the remote is unreachable).

use std::ops::Range;
use std::sync::atomic::Ordering;

use futures::StreamExt;
use object_store::ObjectStoreExt;

use super::client::{Remote, CONCURRENCY};
use super::dirfs;
use super::error::{RemoteError, Result};

/// What a ranged GET found.
pub enum Got {
    Bytes(Vec<u8>),
    /// The object does not exist.
    Missing,
    /// The object ends at this size, before the range does; the bytes of
    /// the range it has.
    Short(u64, Vec<u8>),
}

/// Bytes requested at once, at most (but [`MIN_IN_FLIGHT`] requests).
/// Responses of requests started together arrive together: with 16 ranges
/// of 4 MiB in flight, every body completed at the end and the checking of
/// their chunks waited for the last; a few at a time, the caller checks
/// one while the next arrive. Eight, not four: a server that makes each
/// response wait (stock s3s-fs: ~42 ms before a kept-alive GET's body)
/// costs a window of four a wait per 16 MiB; with eight the waits overlap
/// (a synthetic 56 MiB pull from it 0.64-0.89 -> 0.55-0.68 s, no change
/// from a file:// remote, 0.49-0.56 -> 0.46-0.52 s from a server without
/// the wait; session 15).
const IN_FLIGHT_BYTES: u64 = 32 << 20;
const MIN_IN_FLIGHT: usize = 4;

/// Requests in flight for `reqs`: [`CONCURRENCY`] small ones, fewer large.
fn in_flight(reqs: &[(String, Range<u64>)]) -> usize {
    let bytes: u64 = reqs.iter().map(|r| r.1.end - r.1.start).sum();
    let avg = bytes / (reqs.len() as u64).max(1);
    let n = IN_FLIGHT_BYTES / avg.max(1);
    (n as usize).clamp(MIN_IN_FLIGHT, CONCURRENCY)
}

impl Remote {
    /// GET every (key, range), [`in_flight`] at once; `f` gets each
    /// request's position in `reqs` and what it found, on this thread.
    pub fn get_ranges_all(
        &self,
        reqs: &[(String, Range<u64>)],
        f: &mut dyn FnMut(usize, Got) -> Result<()>,
    ) -> Result<()> {
        self.rt.block_on(async {
            let gets = futures::stream::iter(reqs.iter().enumerate()).map(|(i, (key, r))| {
                let r = r.clone();
                async move { Ok::<_, RemoteError>((i, self.get_range_one(key, r).await?)) }
            });
            let mut gets = gets.buffer_unordered(in_flight(reqs));
            while let Some(x) = gets.next().await {
                let (i, got) = x?;
                f(i, got)?;
            }
            Ok(())
        })
    }

    async fn get_range_one(&self, key: &str, r: Range<u64>) -> Result<Got> {
        let path = self.path(key);
        self.count(1);
        let want = r.end - r.start;
        let mark = self.trace.begin();
        if let Some(root) = self.root.clone() {
            let (k, (start, end)) = (key.to_string(), (r.start, r.end));
            let got = self
                .blocking(move || dirfs::get_range(&root, &k, start, end))
                .await
                .map_err(|e| self.fs_err(format!("reading {key} bytes {start}..{end}"), e))?;
            let Some((b, size)) = got else {
                return Ok(Got::Missing);
            };
            self.trace.end(mark, "GET", key, Some(&r), b.len() as u64);
            self.received.fetch_add(b.len() as u64, Ordering::Relaxed);
            if size < r.end {
                return Ok(Got::Short(size, b));
            }
            return Ok(Got::Bytes(b));
        }
        // On the runtime's workers, so bodies keep arriving while the
        // caller's thread checks and stores what came before.
        let (store, p, range) = (self.store.clone(), path.clone(), r.clone());
        let got = self
            .rt
            .spawn(async move { store.get_range(&p, range).await })
            .await
            .map_err(|e| RemoteError::Request {
                remote: self.name.clone(),
                url: self.url.clone(),
                what: format!("reading {key} bytes {}..{}", r.start, r.end),
                detail: e.to_string(),
                hint: "",
            })?;
        match got {
            Ok(b) => {
                self.trace.end(mark, "GET", key, Some(&r), b.len() as u64);
                self.received.fetch_add(b.len() as u64, Ordering::Relaxed);
                if (b.len() as u64) < want {
                    return Ok(Got::Short(r.start + b.len() as u64, b.to_vec()));
                }
                Ok(Got::Bytes(b[..want as usize].to_vec()))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(Got::Missing),
            Err(e) => {
                // A range past the end is refused as a bad request: ask
                // the object's size to tell damage from a failure.
                self.count(1);
                match self.store.head(&path).await {
                    Ok(m) if m.size < r.end => Ok(Got::Short(m.size, Vec::new())),
                    Err(object_store::Error::NotFound { .. }) => Ok(Got::Missing),
                    _ => Err(self.err(format!("reading {key} bytes {}..{}", r.start, r.end), e)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reqs(n: usize, len: u64) -> Vec<(String, Range<u64>)> {
        (0..n).map(|i| (format!("k{i}"), 0..len)).collect()
    }

    #[test]
    fn large_ranges_go_a_few_at_a_time() {
        assert_eq!(in_flight(&reqs(100, 300)), CONCURRENCY);
        assert_eq!(in_flight(&reqs(16, 4 << 20)), 8);
        assert_eq!(in_flight(&reqs(8, 2 << 20)), CONCURRENCY);
        assert_eq!(in_flight(&reqs(8, 8 << 20)), MIN_IN_FLIGHT);
        assert_eq!(in_flight(&reqs(2, 64 << 20)), MIN_IN_FLIGHT);
        assert_eq!(in_flight(&[]), CONCURRENCY);
    }
}
