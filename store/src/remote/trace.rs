//! Request tracing, for finding where a slow push or pull waits: with
//! tracing on (`RemoteOptions::trace`; the CLI's `RRSTORE_REMOTE_TRACE=1`)
//! every request a `Remote`
//! makes is written to stderr as one line when it ends, with when it began
//! (milliseconds since the remote opened), how long it took, the verb,
//! the key, the byte range and the bytes moved. Requests that begin only
//! after an earlier one ended are the round trips a transfer depends on
//! (docs/remote.md, "Tracing requests").

use std::ops::Range;
use std::time::Instant;

/// Where a traced request began; `None` when tracing is off.
pub(super) type Mark = Option<Instant>;

/// The remote client's trace: its origin, or `None` when tracing is off.
#[derive(Clone, Copy)]
pub(super) struct Trace(Option<Instant>);

impl Trace {
    pub fn new(on: bool) -> Trace {
        Trace(on.then(Instant::now))
    }

    pub fn begin(&self) -> Mark {
        self.0.map(|_| Instant::now())
    }

    /// Write the line of a request begun at `mark`.
    pub fn end(&self, mark: Mark, verb: &str, key: &str, range: Option<&Range<u64>>, bytes: u64) {
        let (Some(origin), Some(began)) = (self.0, mark) else {
            return;
        };
        let at = began.duration_since(origin).as_secs_f64() * 1e3;
        let took = began.elapsed().as_secs_f64() * 1e3;
        let range = range.map_or(String::new(), |r| format!(" {}..{}", r.start, r.end));
        eprintln!("rrstore-trace {at:10.1}ms {took:8.1}ms {verb} {key}{range} {bytes}B");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_marks_nothing() {
        let t = Trace(None);
        assert!(t.begin().is_none());
        // Ends without an origin write nothing and do not panic.
        t.end(None, "GET", "k", None, 0);
    }

    #[test]
    fn on_marks_each_request() {
        let t = Trace(Some(Instant::now()));
        let m = t.begin();
        assert!(m.is_some());
        t.end(m, "GET", "packs/ab", Some(&(0..10)), 10);
    }
}
