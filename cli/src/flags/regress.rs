//! The flags shared by the regression commands check and bisect: the
//! replay settings ([`super::replay::ReplayFlags`]), whether replay
//! outputs are kept, and the parallel lanes; [`RegressFlags::options`]
//! turns them into the regression runs' options.

use rrstore_replay::regress::run::RunOptions;

use super::replay::ReplayFlags;
use crate::Globals;

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
