//! `--junit FILE` and `--markdown FILE` of `check`, `bisect` and `replay`:
//! the flags, and writing the suite rrstore_report builds from the result.

use std::path::PathBuf;

use anyhow::Context;
use rrstore_report::{junit, markdown, output, ReportError, Suite};

#[derive(clap::Args, Clone, Default)]
pub struct CiArgs {
    /// Also write the results as JUnit XML to FILE (one testcase per
    /// recording, per kernel for bisect), for GitLab, GitHub Actions, Jenkins.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write a Markdown summary table to FILE (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}

/// A report error with the library error `exit::code_for` maps in its chain.
pub fn into_anyhow(e: ReportError) -> anyhow::Error {
    match e {
        ReportError::Store(s) => anyhow::Error::new(s),
        ReportError::Diff { row, source } => crate::commands::image::regress_err(*source).context(
            format!("comparing the output of history row {row} with the recorded output"),
        ),
        other => anyhow::Error::new(other),
    }
}

impl CiArgs {
    pub fn wanted(&self) -> bool {
        self.junit.is_some() || self.markdown.is_some()
    }

    /// Write the files asked for.
    pub fn write(&self, suite: &Suite) -> anyhow::Result<()> {
        if let Some(p) = &self.junit {
            output::write_file(p, |w| junit::write(suite, w))
                .map_err(into_anyhow)
                .context("writing the --junit report (is its directory there and writable?)")?;
        }
        if let Some(p) = &self.markdown {
            output::write_file(p, |w| markdown::write(suite, w))
                .map_err(into_anyhow)
                .context("writing the --markdown summary (is its directory there and writable?)")?;
        }
        Ok(())
    }
}
