//! What a finished `rrstore` process said, as tests read it: both streams
//! as one text (for assertion messages), and its stdout as JSON.

use std::process::Output;

/// stdout then stderr, lossily decoded.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// stdout parsed as JSON; a panic naming both streams when it is not.
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}
