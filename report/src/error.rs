//! Errors of the report writers; each names the file it was about.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot write the report {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] rrstore_store::StoreError),
    /// Comparing a kept replay output with the recorded one for the arena map.
    #[error("comparing the output of history row {row} with the recorded output: {source}")]
    Diff {
        row: i64,
        #[source]
        source: Box<rrstore_replay::regress::RegressError>,
    },
    /// A chart could not be drawn (plotters' error, as text).
    #[error("drawing the chart `{chart}`: {message}")]
    Chart { chart: String, message: String },
}
