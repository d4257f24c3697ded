//! Fleet replay (issue 21): every device of a node, every node of a
//! cluster. This module owns the pieces that do not replay by themselves:
//!
//! * [`devices`]: `--device N|UUID` and `--devices LIST|all` against the
//!   devices a backend lists.
//! * [`shard`]: `--shard I/N|auto|auto/N`, a deterministic subset of the
//!   recordings by ID, from the command line or a batch scheduler's
//!   environment (Slurm job arrays, Kubernetes Indexed Jobs).
//! * [`pool`]: running independent items over lanes (host jobs or
//!   devices), one item per lane at a time, results delivered in order.
//! * [`lookahead`]: a device lane preparing its next recording while the
//!   current kernel runs.
//! * [`collect`]: gathering every shard's check results into one report.
//!
//! `regress::lanes` (check, bisect) uses them; the CLI only parses.

pub mod collect;
pub mod devices;
pub mod lookahead;
pub mod pool;
pub mod shard;

/// Errors of the fleet options and of collecting shard results.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A device list or device that cannot be read.
    #[error("`{spec}` is not a device: {why}")]
    BadDevice { spec: String, why: String },
    /// A device that the backend does not have.
    #[error("{backend} has no device {device}; its devices: {available}")]
    NoDevice {
        backend: String,
        device: String,
        available: String,
    },
    /// A shard that cannot be read or resolved.
    #[error("shard `{spec}`: {why}")]
    BadShard { spec: String, why: String },
    /// A shard results file that cannot be read.
    #[error("shard results {what}: {why}")]
    BadResults { what: String, why: String },
    /// No shard results at all for a run.
    #[error("no shard results for run `{run}` in {place}")]
    NoResults { run: String, place: String },
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Remote(#[from] rrstore_store::remote::RemoteError),
}
