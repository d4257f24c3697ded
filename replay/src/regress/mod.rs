//! The regression workflow: "did this compiler / runtime / driver change
//! alter what my kernels compute, and where did it start?"
//!
//! * [`image`]: [`image::ImageOverride`] (run a recording with another image
//!   of the same kernel) and resolving `HASH|LABEL|FILE` image arguments.
//! * [`run`]: one replay of a stored recording with an image, through the
//!   history cache (recording ID + image hash -> output hash), keeping the
//!   output bytes for `diff`.
//! * [`check`]: replay every matching recording, compare with the recorded
//!   output and the recorded-image run.
//! * [`bisect`]: binary search over an ordered list of images.
//! * [`lanes`]: several recordings at once over the fleet's lanes (host
//!   jobs or devices), for check, bisect and `bisect --passes`.
//! * [`tune`]: the fastest verified launch configuration and compile
//!   variant (successive halving over the grid).
//! * [`diff`]: compare two recordings or two kept replay outputs, streamed.

pub mod bisect;
pub mod check;
pub mod diff;
pub mod image;
pub mod lanes;
pub mod passes;
pub mod run;
pub mod tune;

use rrstore_store::StoreError;

use crate::ReplayError;

/// Errors of the regression commands.
#[derive(Debug, thiserror::Error)]
pub enum RegressError {
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Bad arguments (`--good`/`--bad` out of range, too few images, ...).
    #[error("{0}")]
    Usage(String),
    /// The reference run of a bisection failed: nothing to compare with.
    #[error("{0}")]
    BadReference(String),
    /// An image argument names device images, none built for the
    /// recording's target.
    #[error("image `{image}` holds no device image for the recording's target {target}; it holds {holds}; build the application for that target (clang `-fopenmp-targets=...` / `--offload-arch=...`)")]
    NoImageForTarget {
        image: String,
        target: String,
        holds: String,
    },
    /// Several different device images serve the recording's target.
    #[error("image `{image}` holds several device images for the recording's target {target}: {}; name one by its hash", candidates.join("; "))]
    AmbiguousImage {
        image: String,
        target: String,
        candidates: Vec<String>,
    },
    #[error("reading {what}: {source}")]
    Read {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// Hex of a hash, first 12 digits.
pub fn short(h: &[u8; 32]) -> String {
    let mut s = rrstore_format::id::hex(h);
    s.truncate(12);
    s
}
