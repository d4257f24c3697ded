//! A [`Suite`] as a Markdown summary (GitHub-flavoured table), for CI job
//! summaries such as `$GITHUB_STEP_SUMMARY`: a heading with the counts,
//! one row per case, then each failure's diff summary.
//!
//! Names and messages come from recordings others made, so nothing in them
//! may become Markdown: control and bidirectional characters are escaped
//! ([`crate::shown`]); a name and a message go in a code span whose
//! backtick fence is longer than any backtick run in it (CommonMark: no
//! link, autolink, emphasis or raw HTML inside), other text has Markdown's
//! inline characters backslash-escaped, and a failure's detail goes in a
//! fenced block whose fence is longer than any backtick run in it.

use std::io::Write;

use crate::shown::shown;
use crate::suite::{Outcome, Suite};

/// Text in a table cell or heading: escaped (line breaks included), and
/// the characters that start inline Markdown (emphasis, code, links,
/// images, raw HTML, entities, strikethrough, math) or end a GFM table
/// cell backslash-escaped.
fn cell(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    for c in shown(s).chars() {
        if "\\`*_[]<>&|~$!".contains(c) {
            o.push('\\');
        }
        o.push(c);
    }
    o
}

/// The longest run of backticks in `s`.
fn longest_backticks(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// `s` as a code span in a table cell: a fence one backtick longer than
/// any run in it, spaces inside so that a leading or trailing backtick
/// cannot join the fence, and `|` escaped (GFM splits the row into cells
/// first, also inside code spans, and gives `\|` back as `|`).
fn code_cell(s: &str) -> String {
    let s = shown(s);
    let fence = "`".repeat(longest_backticks(&s) + 1);
    format!("{fence} {} {fence}", s.replace('|', "\\|"))
}

fn time(t: f64) -> String {
    if t >= 1.0 {
        format!("{t:.3} s")
    } else {
        format!("{:.3} ms", t * 1e3)
    }
}

/// Write `suite` as Markdown to `w`.
pub fn write(suite: &Suite, w: &mut dyn Write) -> std::io::Result<()> {
    let (failures, errors, skipped) = (suite.failures(), suite.errors(), suite.skipped());
    let passed = suite.cases.len() - failures - errors - skipped;
    writeln!(
        w,
        "### {}: {} {}",
        cell(&suite.name),
        if failures + errors == 0 { "✅" } else { "❌" },
        format_args!(
            "{passed} passed, {failures} failed, {errors} errors{} ({} cases)",
            if skipped > 0 {
                format!(", {skipped} skipped (nondeterministic or known differences)")
            } else {
                String::new()
            },
            suite.cases.len()
        )
    )?;
    writeln!(w)?;
    writeln!(w, "| | kernel | verdict | time | details |")?;
    writeln!(w, "| --- | --- | --- | ---: | --- |")?;
    for c in &suite.cases {
        let (mark, detail) = match &c.outcome {
            Outcome::Passed { .. } => ("✅", String::new()),
            Outcome::Failed { message, .. } => ("❌", message.clone()),
            Outcome::Error { message, .. } => ("⚠️", message.clone()),
            Outcome::Skipped { message, .. } => ("➖", message.clone()),
        };
        writeln!(
            w,
            "| {mark} | {} | {} | {} | {} |",
            code_cell(&c.name),
            cell(c.outcome.verdict()),
            time(c.time_s),
            if detail.is_empty() {
                String::new()
            } else {
                code_cell(&detail)
            }
        )?;
    }
    for c in &suite.cases {
        if let Outcome::Failed { detail, .. }
        | Outcome::Error { detail, .. }
        | Outcome::Skipped { detail, .. } = &c.outcome
        {
            if !detail.is_empty() {
                // Each line escaped; the fence longer than any backtick
                // run, so no line of the detail can close the block.
                let detail = crate::shown::lines(detail, "", "");
                let fence = "`".repeat(longest_backticks(&detail).max(2) + 1);
                writeln!(w)?;
                writeln!(w, "<details><summary>{}</summary>", html_escape(&c.name))?;
                writeln!(w)?;
                writeln!(w, "{fence}")?;
                write!(w, "{detail}")?;
                writeln!(w, "{fence}")?;
                writeln!(w)?;
                writeln!(w, "</details>")?;
            }
        }
    }
    Ok(())
}

/// Text inside the `<summary>` element (an HTML block: no Markdown there).
fn html_escape(s: &str) -> String {
    shown(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::{cell, code_cell};

    #[test]
    fn names_stay_in_their_code_span_and_text_stays_text() {
        assert_eq!(code_cell("main_l13"), "` main_l13 `");
        assert_eq!(code_cell("a``b|c"), "``` a``b\\|c ```");
        assert_eq!(code_cell("x\ny"), "` x\\ny `");
        assert_eq!(cell("<b>[x](y)|"), "\\<b\\>\\[x\\](y)\\|");
        assert_eq!(cell("within-tolerance"), "within-tolerance");
    }
}
