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
    #[error("the pattern `{pattern}` is not a valid glob: {source}")]
    Glob {
        pattern: String,
        #[source]
        source: globset::Error,
    },
    /// A chart could not be drawn (plotters' error, as text).
    #[error("drawing the chart `{chart}`: {message}")]
    Chart { chart: String, message: String },
}
