//! The flags shared by the regression commands: the replay settings
//! ([`super::replay::ReplayFlags`]), whether replay outputs are kept, and
//! the parallel lanes (check, bisect), which [`RegressFlags::options`]
//! turns into the regression runs' options; and which recordings a search
//! runs on ([`Selection`]: bisect, `bisect --passes`, tune).

use anyhow::Context;
use rrstore_format::RecordingId;
use rrstore_replay::regress::lanes::recordings;
use rrstore_replay::regress::run::RunOptions;
use rrstore_store::{LsFilter, LsSort, Store};

use super::replay::ReplayFlags;
use crate::errors::regress_error;
use crate::Globals;

/// One recording by ID prefix, or every one whose label or kernel name
/// matches a glob.
#[derive(clap::Args, Clone)]
pub struct Selection {
    /// Recording ID prefix (or use --label/--kernel for several).
    #[arg(required_unless_present_any = ["label", "kernel"])]
    pub recording: Option<String>,
    /// Every recording whose label matches this glob.
    #[arg(long, value_name = "GLOB", conflicts_with = "recording")]
    pub label: Option<String>,
    /// Every recording whose kernel name matches this glob.
    #[arg(long, value_name = "GLOB", conflicts_with = "recording")]
    pub kernel: Option<String>,
}

impl Selection {
    /// The recordings selected (by name with --label/--kernel); `verb`
    /// says what is done to the one named by ID (`bisect`, `tune`).
    pub fn ids(&self, store: &Store, verb: &str) -> anyhow::Result<Vec<RecordingId>> {
        let ids = match &self.recording {
            Some(p) => vec![store
                .resolve(p)
                .with_context(|| format!("the recording to {verb}"))?],
            None => recordings(
                store,
                &LsFilter {
                    kernel: self.kernel.clone(),
                    label: self.label.clone(),
                    sort: LsSort::Name,
                    ..LsFilter::default()
                },
            )
            .map_err(regress_error)?,
        };
        if ids.is_empty() {
            anyhow::bail!("no recording matches --label/--kernel");
        }
        Ok(ids)
    }
}

/// Replay options shared by check and bisect.
#[derive(clap::Args, Clone)]
pub struct RegressFlags {
    #[command(flatten)]
    pub replay: ReplayFlags,
    /// Do not keep replay outputs in the store (then `diff h:ROW` re-runs).
    #[arg(long)]
    pub no_keep_outputs: bool,
    #[command(flatten)]
    pub parallel: crate::commands::fleet::ParallelArgs,
}

impl RegressFlags {
    pub fn options(&self, use_cache: bool, globals: &Globals) -> anyhow::Result<RunOptions> {
        Ok(RunOptions {
            replay: self.replay.options(globals)?,
            use_cache,
            keep_output: !self.no_keep_outputs,
        })
    }
}
