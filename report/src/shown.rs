//! Text that others wrote (kernel names, labels, tags, history `machine`
//! fields, file names inside recordings, what a kernel printed) as it is
//! shown to people: the one place that decides which characters may reach
//! a terminal or a report as they are.
//!
//! A recording pulled from someone else is untrusted, and so is every
//! string in it. Printed raw, an escape sequence clears the screen, moves
//! the cursor over rrstore's verdict or writes the clipboard (OSC 52), a
//! newline starts a fake `VERIFIED` line, and a bidirectional override
//! makes text read differently from what it is. So every human output
//! passes such strings through [`Shown`] (one line) or [`lines`] (a block
//! such as a kernel's output): C0 controls, DEL, C1 controls (U+0080 to
//! U+009F) and the bidirectional formatting characters are written as
//! visible escapes (`\x1b`, `\n`, `\u{202e}`). JSON output keeps the exact
//! strings (serde escapes what JSON needs).

use std::borrow::Cow;
use std::fmt::{self, Write};

/// Whether `c` must not reach a terminal as it is: a control character
/// (C0, DEL, C1) or a character that changes the direction text is shown
/// in (marks, embeddings, overrides, isolates; the line and paragraph
/// separators, which some viewers break lines at), or U+FFFE/U+FFFF,
/// which XML 1.0 does not allow (a JUnit report must stay parseable).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{fffe}'
                | '\u{ffff}'
        )
}

/// Write `c` as a visible escape.
fn escape(c: char, out: &mut impl Write) -> fmt::Result {
    match c {
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        c if (c as u32) < 0x80 => write!(out, "\\x{:02x}", c as u32),
        c => write!(out, "\\u{{{:x}}}", c as u32),
    }
}

/// `s` with every [`is_unsafe`] character escaped; borrowed when there is
/// none (the common case: no allocation).
pub fn shown(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            let _ = escape(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Multi-line text (a failure's detail in a report): [`shown`] but for
/// line feeds and tabs, which stay as they are.
pub fn block(s: &str) -> Cow<'_, str> {
    let keep = |c: char| c == '\n' || c == '\t';
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) && !keep(c) {
            let _ = escape(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Bytes (a name read from an index table) as [`shown`] text: invalid
/// UTF-8 becomes U+FFFD; borrowed when they are printable ASCII.
pub fn shown_bytes(b: &[u8]) -> Cow<'_, [u8]> {
    if b.iter().all(|&c| (0x20..0x7f).contains(&c)) {
        return Cow::Borrowed(b);
    }
    match String::from_utf8_lossy(b) {
        Cow::Borrowed(s) if !s.chars().any(is_unsafe) => Cow::Borrowed(b),
        s => Cow::Owned(shown(&s).into_owned().into_bytes()),
    }
}

/// One line of untrusted text for `{}`: [`shown`], with the width,
/// fill and alignment of the format spec applied to the escaped text
/// (`{:<20}` pads what is printed).
pub struct Shown<T: AsRef<str>>(pub T);

impl<T: AsRef<str>> fmt::Display for Shown<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&shown(self.0.as_ref()))
    }
}

/// A block of untrusted text: each of its lines (`\n` or `\r\n` ends one)
/// prefixed, `first` for the first and `rest` for the others, and
/// escaped but for tabs; every line ends with `\n`. So no line of it can
/// begin with anything but its prefix.
pub fn lines(text: &str, first: &str, rest: &str) -> String {
    let mut s = String::with_capacity(text.len() + 16);
    for (i, line) in text.lines().enumerate() {
        s.push_str(if i == 0 { first } else { rest });
        for c in line.chars() {
            if is_unsafe(c) && c != '\t' {
                let _ = escape(c, &mut s);
            } else {
                s.push(c);
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_are_escaped_and_the_rest_kept() {
        assert_eq!(shown("main_l13"), "main_l13");
        assert!(matches!(shown("step(float*)_l7 ü"), Cow::Borrowed(_)));
        assert_eq!(
            shown("a\x1b[2J\nVERIFIED\u{202e}x\u{85}\x7f\u{2066}"),
            "a\\x1b[2J\\nVERIFIED\\u{202e}x\\u{85}\\x7f\\u{2066}"
        );
        assert_eq!(shown("\x1b]52;c;aGk=\x07"), "\\x1b]52;c;aGk=\\x07");
        assert_eq!(format!("[{:<8}]", Shown("a\tb")), "[a\\tb    ]");
        assert_eq!(&*shown_bytes(b"plain"), b"plain");
        assert_eq!(&*shown_bytes(b"x\x1b"), b"x\\x1b");
        assert_eq!(&*shown_bytes("é".as_bytes()), "é".as_bytes());
        assert_eq!(block("a\tb\nc\x01\r\u{ffff}"), "a\tb\nc\\x01\\r\\u{ffff}");
    }

    #[test]
    fn blocks_prefix_every_line_and_keep_tabs() {
        let s = lines("VERIFIED\n\x1b[1A\rOK\tx\r\n\u{202e}", "  k| ", "  k| ");
        assert_eq!(s, "  k| VERIFIED\n  k| \\x1b[1A\\rOK\tx\n  k| \\u{202e}\n");
        assert_eq!(lines("a\nb", "error: ", "  "), "error: a\n  b\n");
    }
}
