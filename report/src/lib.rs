//! `rrstore-report`: rrstore's results in the formats people and CI systems
//! already display.
//!
//! * [`suite`]: the results of `check`, `bisect` and `replay` as one test
//!   suite model (one case per recording, or per kernel for bisect).
//! * [`suite_tune`]: `tune`'s results in that model, one case per kernel.
//! * [`junit`]: that suite as JUnit XML (GitLab, GitHub Actions, Jenkins).
//! * [`markdown`]: that suite as a Markdown summary table
//!   (`$GITHUB_STEP_SUMMARY`).
//! * [`html`]: `rrstore report`, one self-contained HTML file with SVG
//!   charts of the store's history.
//! * [`names`]: kernel names as people read them (C++ demangled).
//! * [`output`]: writing a report file so that a failure leaves the old one.
//! * [`shown`]: untrusted text (names, labels, tags, kernel output) as it
//!   may reach a terminal: control and bidirectional characters escaped.

pub mod error;
pub mod html;
pub mod junit;
pub mod markdown;
pub mod names;
pub mod output;
pub mod shown;
pub mod suite;
pub mod suite_tune;
pub mod time;

pub use error::ReportError;
pub use suite::{Case, Outcome, Suite};
