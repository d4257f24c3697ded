//! Errors on their way to an exit code: the errors the CLI raises itself
//! rather than a library, and the conversions that unwrap a library's
//! wrapping errors so that the error [`crate::exit`] maps (the backend,
//! format or store error itself) is in the anyhow chain. They live apart
//! from the commands so that the exit-code module depends on no command.

use rrstore_replay::regress::RegressError;
use rrstore_replay::ReplayError;
use rrstore_report::ReportError;

/// `rrstore record`: the program could not be run or wrote no recording
/// (exit code `RECORD`).
#[derive(Debug)]
pub struct RecordError(pub String);

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RecordError {}

/// A replay error with the library error `exit::code_for` maps in its
/// chain.
pub fn replay_error(e: ReplayError) -> anyhow::Error {
    match e {
        ReplayError::Backend(b) => anyhow::Error::new(b),
        ReplayError::Format(f) => anyhow::Error::new(f),
        ReplayError::Store(s) => anyhow::Error::new(s),
        other => anyhow::Error::new(other),
    }
}

/// A regression error (check, bisect, diff, images) likewise.
pub fn regress_error(e: RegressError) -> anyhow::Error {
    match e {
        RegressError::Replay(r) => replay_error(r),
        RegressError::Store(s) => anyhow::Error::new(s),
        other => anyhow::Error::new(other),
    }
}

/// A report error (JUnit, Markdown, HTML) likewise.
pub fn report_error(e: ReportError) -> anyhow::Error {
    match e {
        ReportError::Store(s) => anyhow::Error::new(s),
        ReportError::Diff { row, source } => regress_error(*source).context(format!(
            "comparing the output of history row {row} with the recorded output"
        )),
        other => anyhow::Error::new(other),
    }
}
