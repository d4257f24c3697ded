//! `rrstore report`: one self-contained HTML file (no script, no network,
//! no external file; it opens from disk and prints) with SVG charts drawn
//! in Rust by plotters: kernel time per kernel over the history, grouped by
//! image, device and backend with the spread of the repetitions; which
//! image changed which recording's output; for differing replays, a map of
//! the arena; the store's size, dedup and compression by label over time.
//!
//! * [`data`]: what is read from the store (nothing is replayed or written).
//! * [`charts`]: the SVG charts.
//! * `page`: the HTML around them, the tables and the light/dark/print style.
//! * `tuning`: each kernel's launch configurations and images side by side
//!   (what `rrstore tune` replayed), verified ones only ever the fastest.
//! * `compiled`: the images replays compiled from IR, with their provenance.

pub mod charts;
mod compiled;
pub mod data;
mod page;
mod stats;
mod tuning;

use std::path::Path;

use rrstore_store::Store;

pub use data::ReportOptions;

use crate::ReportError;

/// What a written report holds (for the command's summary line).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportSummary {
    pub recordings: usize,
    pub kernels: usize,
    pub replays: usize,
    pub charts: usize,
    pub arena_maps: usize,
    pub labels: usize,
    pub bytes: usize,
}

/// Read the store and write the report to `path`.
pub fn write(
    store: &mut Store,
    opts: &ReportOptions,
    path: &Path,
) -> Result<ReportSummary, ReportError> {
    let g = data::gather(store, opts)?;
    let (html, mut summary) = page::render(&g, opts, store.dir())?;
    summary.bytes = html.len();
    crate::output::write_file(path, |w| w.write_all(html.as_bytes()))?;
    Ok(summary)
}
