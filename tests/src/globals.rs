//! Kernel-named globals tables (`<stem>.globals`: per global its name, a
//! NUL, a little-endian u32 size and the bytes), read and rewritten by tests
//! that make a recording's globals disagree with its image.

use std::path::Path;

/// The (name, bytes) entries of a globals table.
pub fn parse_globals(b: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let end = i + b[i..]
            .iter()
            .position(|&c| c == 0)
            .expect("a NUL-ended name");
        let name = String::from_utf8_lossy(&b[i..end]).into_owned();
        let n = u32::from_le_bytes(b[end + 1..end + 5].try_into().expect("a size")) as usize;
        out.push((name, b[end + 5..end + 5 + n].to_vec()));
        i = end + 5 + n;
    }
    out
}

/// A globals table of `entries`.
pub fn encode_globals(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in entries {
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    out
}

/// Cut the global `name` in the table file `path` to its first `len` bytes.
pub fn shrink_global(path: &Path, name: &str, len: usize) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut entries = parse_globals(&bytes);
    let (_, data) = entries
        .iter_mut()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no global {name} in {}", path.display()));
    data.truncate(len);
    std::fs::write(path, encode_globals(&entries))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
