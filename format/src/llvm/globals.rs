//! The two encodings of the globals table (pre-launch values of the image's
//! device globals).
//!
//! * kernel-named (LLVM 18-22): repeated `name`, `\0`, `u32 LE size`,
//!   `size` data bytes; no header; an empty file means no globals.
//! * native (LLVM 23+): `u32 LE count`, then per entry `u32 LE name length
//!   including the NUL`, `u64 LE size`, name bytes, `\0`, data bytes.
//!
//! Parsers stream (they never hold a global's data) and check every length
//! against the bytes left before skipping, so an absurd size (2^62) is
//! rejected without allocating. The table must parse exactly to its end.
//! Encoders write only entry headers; callers stream the data after them.

use std::io::{self, Read};

use crate::model::Global;

/// Longest global name accepted (symbol names are far shorter).
pub const MAX_NAME: usize = 64 * 1024;

/// A globals table that does not parse, with the byte offset of the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("globals table at byte {offset}: {message}")]
pub struct GlobalsError {
    pub offset: u64,
    pub message: String,
}

fn err(offset: u64, message: impl Into<String>) -> GlobalsError {
    GlobalsError {
        offset,
        message: message.into(),
    }
}

/// Reader that counts bytes consumed and maps I/O errors to offsets.
struct Cursor<R> {
    r: R,
    pos: u64,
    len: u64,
}

impl<R: Read> Cursor<R> {
    fn left(&self) -> u64 {
        self.len - self.pos
    }

    fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), GlobalsError> {
        if (buf.len() as u64) > self.left() {
            return Err(err(
                self.pos,
                format!(
                    "{what} needs {} bytes but only {} are left",
                    buf.len(),
                    self.left()
                ),
            ));
        }
        self.r
            .read_exact(buf)
            .map_err(|e| err(self.pos, format!("cannot read {what}: {e}")))?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn u32(&mut self, what: &str) -> Result<u32, GlobalsError> {
        let mut b = [0u8; 4];
        self.exact(&mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self, what: &str) -> Result<u64, GlobalsError> {
        let mut b = [0u8; 8];
        self.exact(&mut b, what)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Skip `n` data bytes after checking they exist.
    fn skip(&mut self, n: u64, name: &str) -> Result<(), GlobalsError> {
        if n > self.left() {
            return Err(err(
                self.pos,
                format!(
                    "global `{name}` claims {n} data bytes but only {} are left",
                    self.left()
                ),
            ));
        }
        let copied = io::copy(&mut (&mut self.r).take(n), &mut io::sink())
            .map_err(|e| err(self.pos, format!("cannot read global `{name}`: {e}")))?;
        if copied != n {
            return Err(err(self.pos + copied, "the table ends early"));
        }
        self.pos += n;
        Ok(())
    }
}

fn utf8_name(bytes: Vec<u8>, offset: u64) -> Result<String, GlobalsError> {
    String::from_utf8(bytes).map_err(|_| err(offset, "global name is not valid UTF-8"))
}

/// Parse an LLVM 18-22 table of `len` bytes.
pub fn parse_kernel_named<R: Read>(r: R, len: u64) -> Result<Vec<Global>, GlobalsError> {
    let mut c = Cursor { r, pos: 0, len };
    let mut out = Vec::new();
    while c.left() > 0 {
        let start = c.pos;
        let mut name = Vec::new();
        loop {
            let mut b = [0u8; 1];
            c.exact(&mut b, "a NUL-terminated global name")?;
            if b[0] == 0 {
                break;
            }
            if name.len() >= MAX_NAME {
                return Err(err(
                    start,
                    format!("global name longer than {MAX_NAME} bytes"),
                ));
            }
            name.push(b[0]);
        }
        if name.is_empty() {
            return Err(err(start, "empty global name"));
        }
        let name = utf8_name(name, start)?;
        let size = u64::from(c.u32("the u32 size of a global")?);
        let data_offset = c.pos;
        c.skip(size, &name)?;
        out.push(Global {
            name,
            size,
            data_offset,
        });
    }
    Ok(out)
}

/// Parse a native (LLVM 23+) table of `len` bytes.
pub fn parse_native<R: Read>(r: R, len: u64) -> Result<Vec<Global>, GlobalsError> {
    let mut c = Cursor { r, pos: 0, len };
    let count = c.u32("the u32 entry count")?;
    // Each entry takes at least 4 + 8 + 1 bytes: reject impossible counts
    // before looping.
    if u64::from(count) * 13 > c.left() {
        return Err(err(
            0,
            format!(
                "entry count {count} needs at least {} bytes but the table has {} after the count",
                u64::from(count) * 13,
                c.left()
            ),
        ));
    }
    let mut out = Vec::new();
    for i in 0..count {
        let start = c.pos;
        let name_len = c.u32("the u32 name length")? as usize;
        if name_len == 0 || name_len > MAX_NAME + 1 {
            return Err(err(
                start,
                format!(
                    "entry {i}: name length {name_len} is not in 1..={}",
                    MAX_NAME + 1
                ),
            ));
        }
        let size = c.u64("the u64 size of a global")?;
        let name_at = c.pos;
        let mut name = vec![0u8; name_len];
        c.exact(&mut name, "a global name")?;
        if name.pop() != Some(0) {
            return Err(err(
                name_at,
                format!("entry {i}: name is not NUL-terminated"),
            ));
        }
        if name.contains(&0) {
            return Err(err(name_at, format!("entry {i}: name contains a NUL byte")));
        }
        let name = utf8_name(name, name_at)?;
        let data_offset = c.pos;
        c.skip(size, &name)?;
        out.push(Global {
            name,
            size,
            data_offset,
        });
    }
    if c.left() != 0 {
        return Err(err(
            c.pos,
            format!("{} bytes after the last of the {count} entries", c.left()),
        ));
    }
    Ok(out)
}

/// Entry header in the LLVM 18-22 encoding (`name\0`, u32 size).
pub fn kernel_named_header(name: &str, size: u64) -> Result<Vec<u8>, String> {
    let size = u32::try_from(size).map_err(|_| {
        format!(
            "global `{name}` has {size} bytes; the kernel-named globals table stores sizes as u32"
        )
    })?;
    if name.is_empty() || name.as_bytes().contains(&0) {
        return Err(format!("global name {name:?} cannot be NUL-terminated"));
    }
    let mut h = Vec::with_capacity(name.len() + 5);
    h.extend_from_slice(name.as_bytes());
    h.push(0);
    h.extend_from_slice(&size.to_le_bytes());
    Ok(h)
}

/// Entry header in the native encoding (u32 name length incl. NUL, u64
/// size, name, NUL).
pub fn native_header(name: &str, size: u64) -> Result<Vec<u8>, String> {
    let len = u32::try_from(name.len() + 1)
        .map_err(|_| format!("global name of {} bytes is too long", name.len()))?;
    if name.as_bytes().contains(&0) {
        return Err(format!("global name {name:?} contains a NUL byte"));
    }
    let mut h = Vec::with_capacity(name.len() + 13);
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&size.to_le_bytes());
    h.extend_from_slice(name.as_bytes());
    h.push(0);
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kn(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut v = Vec::new();
        for (n, d) in entries {
            v.extend(kernel_named_header(n, d.len() as u64).unwrap());
            v.extend_from_slice(d);
        }
        v
    }

    fn nat(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut v = (entries.len() as u32).to_le_bytes().to_vec();
        for (n, d) in entries {
            v.extend(native_header(n, d.len() as u64).unwrap());
            v.extend_from_slice(d);
        }
        v
    }

    #[test]
    fn both_encodings_parse_to_the_same_globals_at_their_offsets() {
        let e: &[(&str, &[u8])] = &[("g_counter", &[1, 2, 3, 4]), ("g_scale", &[9; 8])];
        let a = kn(e);
        let g = parse_kernel_named(&a[..], a.len() as u64).unwrap();
        assert_eq!(g[0].name, "g_counter");
        assert_eq!((g[0].size, g[0].data_offset), (4, 14));
        assert_eq!((g[1].size, g[1].data_offset), (8, 14 + 4 + 12));
        let b = nat(e);
        let h = parse_native(&b[..], b.len() as u64).unwrap();
        assert_eq!((h[0].size, h[0].data_offset), (4, 4 + 12 + 10));
        assert_eq!(h.len(), 2);
        assert!(parse_kernel_named(&[][..], 0).unwrap().is_empty());
        assert!(parse_native(&[0u8; 4][..], 4).unwrap().is_empty());
    }

    #[test]
    fn overruns_absurd_sizes_and_trailing_bytes_are_errors_with_offsets() {
        let mut a = kn(&[("g", &[1, 2, 3, 4])]);
        a.pop();
        let e = parse_kernel_named(&a[..], a.len() as u64).unwrap_err();
        assert_eq!(e.offset, 6);
        let mut b = 1u32.to_le_bytes().to_vec();
        b.extend(native_header("g", 1 << 62).unwrap());
        let e = parse_native(&b[..], b.len() as u64).unwrap_err();
        assert!(e.message.contains("4611686018427387904"), "{e}");
        let mut c = nat(&[("g", &[1])]);
        c.push(0);
        assert_eq!(parse_native(&c[..], c.len() as u64).unwrap_err().offset, 19);
        let d = u32::MAX.to_le_bytes();
        assert_eq!(parse_native(&d[..], 4).unwrap_err().offset, 0);
        assert!(kernel_named_header("g", 1 << 32).is_err());
    }
}
