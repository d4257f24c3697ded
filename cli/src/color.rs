//! Colour in human output: `--color auto|always|never`. `auto` (the
//! default) colours only when standard output is a terminal, `TERM` is not
//! `dumb` and `NO_COLOR` is unset or empty (https://no-color.org);
//! `always` colours even then, as an explicit flag overrides the
//! environment. JSON, JUnit and Markdown output are never coloured.

use std::io::IsTerminal;
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

static ENABLED: OnceLock<bool> = OnceLock::new();

/// Decide once, at start-up.
pub fn init(choice: ColorChoice) {
    let env_allows = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    let on = match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => env_allows && std::io::stdout().is_terminal(),
    };
    let _ = ENABLED.set(on);
}

/// What a piece of text says.
#[derive(Clone, Copy, Debug)]
pub enum Tone {
    /// Verified, good, same.
    Good,
    /// Mismatch, regressed, bad.
    Bad,
    /// Crashed, timed out, error.
    Warn,
}

/// `text` in its tone's colour when colour is on (bold green / red / yellow).
pub fn paint(tone: Tone, text: &str) -> String {
    if !ENABLED.get().copied().unwrap_or(false) {
        return text.to_string();
    }
    let code = match tone {
        Tone::Good => "1;32",
        Tone::Bad => "1;31",
        Tone::Warn => "1;33",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}
