//! `--junit FILE` and `--markdown FILE` of `check`, `bisect`, `replay` and
//! `tune`: the flags, and writing the suite rrstore_report builds from the
//! result.

use std::path::PathBuf;

use anyhow::Context;
use rrstore_report::{junit, markdown, output, Suite};

#[derive(clap::Args, Clone, Default)]
pub struct CiArgs {
    /// Also write the results as JUnit XML to FILE (one testcase per
    /// recording, per kernel for bisect and tune), for GitLab, GitHub
    /// Actions, Jenkins.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write a Markdown summary table to FILE (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}

impl CiArgs {
    pub fn wanted(&self) -> bool {
        self.junit.is_some() || self.markdown.is_some()
    }

    /// When a file is asked for: the suite `build` makes from the labels
    /// of `ids` (each case's class name) and the time now, written.
    pub fn write_labelled(
        &self,
        store: &rrstore_store::Store,
        ids: &[rrstore_format::RecordingId],
        build: impl FnOnce(&[String], i64) -> Suite,
    ) -> anyhow::Result<()> {
        if !self.wanted() {
            return Ok(());
        }
        let labels: Vec<String> = ids
            .iter()
            .map(|id| store.recording_label(id).unwrap_or_default())
            .collect();
        self.write(&build(&labels, rrstore_report::time::now_unix()))
    }

    /// Write the files asked for.
    pub fn write(&self, suite: &Suite) -> anyhow::Result<()> {
        if let Some(p) = &self.junit {
            output::write_file(p, |w| junit::write(suite, w))
                .map_err(crate::errors::report_error)
                .context("writing the --junit report (is its directory there and writable?)")?;
        }
        if let Some(p) = &self.markdown {
            output::write_file(p, |w| markdown::write(suite, w))
                .map_err(crate::errors::report_error)
                .context("writing the --markdown summary (is its directory there and writable?)")?;
        }
        Ok(())
    }
}
