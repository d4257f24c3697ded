//! A [`Suite`] as a Markdown summary (GitHub-flavoured table), for CI job
//! summaries such as `$GITHUB_STEP_SUMMARY`: a heading with the counts,
//! one row per case, then each failure's diff summary.

use std::io::Write;

use crate::suite::{Outcome, Suite};

/// Table cells cannot hold `|` or line breaks.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
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
    let (failures, errors) = (suite.failures(), suite.errors());
    let passed = suite.cases.len() - failures - errors;
    writeln!(
        w,
        "### {}: {} {}",
        suite.name,
        if failures + errors == 0 { "✅" } else { "❌" },
        format_args!(
            "{passed} passed, {failures} failed, {errors} errors ({} cases)",
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
        };
        writeln!(
            w,
            "| {mark} | `{}` | {} | {} | {} |",
            cell(&c.name).replace('`', "'"),
            cell(c.outcome.verdict()),
            time(c.time_s),
            cell(&detail)
        )?;
    }
    for c in &suite.cases {
        if let Outcome::Failed { detail, .. } | Outcome::Error { detail, .. } = &c.outcome {
            if !detail.is_empty() {
                writeln!(w)?;
                writeln!(w, "<details><summary>{}</summary>", html_escape(&c.name))?;
                writeln!(w)?;
                writeln!(w, "```")?;
                writeln!(w, "{}", detail.replace("```", "'''"))?;
                writeln!(w, "```")?;
                writeln!(w)?;
                writeln!(w, "</details>")?;
            }
        }
    }
    Ok(())
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
