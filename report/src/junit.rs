//! A [`Suite`] as JUnit XML, the dialect GitLab, GitHub Actions test
//! reporters and Jenkins read: `<testsuites>` holding one `<testsuite>`,
//! one `<testcase>` per case with `time` in seconds, `<properties>`, and a
//! `<failure>` or `<error>` whose `message` is the verdict line and whose
//! text is the diff summary; a case that is neither a pass nor a
//! regression (nondeterministic, a known difference) is `<skipped>`, with
//! its reason as `message` (Surefire's, Jenkins' and GitLab's reading).
//!
//! Every string goes through [`crate::shown::block`] first: names and
//! messages come from recordings others made, and XML 1.0 forbids most
//! control characters even as character references, so one in a name would
//! make the whole file unreadable to CI (every test case lost); they are
//! written as visible escapes (`\x1b`) instead.

use std::io::Write;

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

use crate::shown::block;
use crate::suite::{Outcome, Suite};
use crate::time::iso_datetime;

fn io(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

struct Xml<W: Write>(Writer<W>);

impl<W: Write> Xml<W> {
    fn event(&mut self, e: Event<'_>) -> std::io::Result<()> {
        self.0.write_event(e).map_err(io)
    }

    fn start(&mut self, name: &str, attrs: &[(&str, &str)]) -> std::io::Result<()> {
        let mut s = BytesStart::new(name);
        let safe: Vec<_> = attrs.iter().map(|&(k, v)| (k, block(v))).collect();
        s.extend_attributes(safe.iter().map(|(k, v)| (*k, v.as_ref())));
        self.event(Event::Start(s))
    }

    fn empty(&mut self, name: &str, attrs: &[(&str, &str)]) -> std::io::Result<()> {
        let mut s = BytesStart::new(name);
        let safe: Vec<_> = attrs.iter().map(|&(k, v)| (k, block(v))).collect();
        s.extend_attributes(safe.iter().map(|(k, v)| (*k, v.as_ref())));
        self.event(Event::Empty(s))
    }

    fn end(&mut self, name: &str) -> std::io::Result<()> {
        self.event(Event::End(BytesEnd::new(name)))
    }

    fn text(&mut self, t: &str) -> std::io::Result<()> {
        self.event(Event::Text(BytesText::new(&block(t))))
    }
}

fn secs(t: f64) -> String {
    format!("{t:.6}")
}

/// `s` with the characters XML 1.0 cannot hold (control characters other
/// than tab, newline and carriage return: a kernel may print anything) as
/// `?`, so that the report stays well-formed.
fn xml_chars(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if c.is_control() || c == '\u{fffe}' || c == '\u{ffff}' => '?',
            c => c,
        })
        .collect()
}

/// Write `suite` as JUnit XML to `w`.
pub fn write(suite: &Suite, w: &mut dyn Write) -> std::io::Result<()> {
    let mut x = Xml(Writer::new_with_indent(w, b' ', 2));
    x.event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let (tests, failures, errors, skipped, time) = (
        suite.cases.len().to_string(),
        suite.failures().to_string(),
        suite.errors().to_string(),
        suite.skipped().to_string(),
        secs(suite.time_s()),
    );
    let counts = [
        ("tests", tests.as_str()),
        ("failures", failures.as_str()),
        ("errors", errors.as_str()),
        ("skipped", skipped.as_str()),
        ("time", time.as_str()),
    ];
    let mut top = vec![("name", suite.name.as_str())];
    top.extend(counts);
    x.start("testsuites", &top)?;
    let stamp = iso_datetime(suite.timestamp);
    let mut attrs = vec![("name", suite.name.as_str())];
    attrs.extend(counts);
    attrs.push(("timestamp", stamp.as_str()));
    x.start("testsuite", &attrs)?;
    for c in &suite.cases {
        let time = secs(c.time_s);
        x.start(
            "testcase",
            &[
                ("name", c.name.as_str()),
                ("classname", c.classname.as_str()),
                ("time", time.as_str()),
            ],
        )?;
        x.start("properties", &[])?;
        x.empty(
            "property",
            &[("name", "verdict"), ("value", c.outcome.verdict())],
        )?;
        for (k, v) in &c.properties {
            x.empty("property", &[("name", k.as_str()), ("value", v.as_str())])?;
        }
        x.end("properties")?;
        match &c.outcome {
            Outcome::Passed { .. } => {}
            Outcome::Skipped {
                message, detail, ..
            } => {
                x.start("skipped", &[("message", message.as_str())])?;
                x.text(detail)?;
                x.end("skipped")?;
            }
            Outcome::Failed {
                verdict,
                message,
                detail,
            }
            | Outcome::Error {
                verdict,
                message,
                detail,
            } => {
                let tag = if matches!(c.outcome, Outcome::Failed { .. }) {
                    "failure"
                } else {
                    "error"
                };
                x.start(
                    tag,
                    &[("message", message.as_str()), ("type", verdict.as_str())],
                )?;
                x.text(detail)?;
                x.end(tag)?;
            }
        }
        if !c.output.is_empty() {
            x.start("system-out", &[])?;
            x.text(&xml_chars(&c.output))?;
            x.end("system-out")?;
        }
        x.end("testcase")?;
    }
    x.end("testsuite")?;
    x.end("testsuites")?;
    let w = x.0.into_inner();
    w.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use crate::suite::{Case, Outcome, Suite};

    /// Names, messages and diff text with XML's special characters are
    /// escaped (a C++ kernel name has `<`, `>` and `&`).
    #[test]
    fn special_characters_are_escaped() {
        let suite = Suite {
            name: "rrstore check".into(),
            timestamp: 0,
            cases: vec![Case {
                name: "f<int>(a&b) \"q\"".into(),
                classname: "rrstore.check.x".into(),
                time_s: 0.5,
                outcome: Outcome::Failed {
                    verdict: "mismatch".into(),
                    message: "a < b & c".into(),
                    detail: "x <y> & z".into(),
                },
                properties: vec![],
                output: "K1 <line> & \x1b[2J\x07done\n".into(),
            }],
        };
        let mut out = Vec::new();
        super::write(&suite, &mut out).unwrap();
        let xml = String::from_utf8(out).unwrap();
        assert!(
            xml.contains(r#"name="f&lt;int&gt;(a&amp;b) &quot;q&quot;""#),
            "{xml}"
        );
        assert!(xml.contains(r#"message="a &lt; b &amp; c""#), "{xml}");
        assert!(xml.contains(">x &lt;y&gt; &amp; z</failure>"), "{xml}");
        // The runner's lines, escaped, without what XML cannot hold.
        assert!(
            xml.contains("<system-out>K1 &lt;line&gt; &amp; ?[2J?done\n</system-out>"),
            "{xml}"
        );
        assert!(xml.contains(r#"tests="1" failures="1" errors="0" skipped="0" time="0.500000""#));
    }
}
