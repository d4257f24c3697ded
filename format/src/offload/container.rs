//! Where offload binaries live in a file: the `SHT_LLVM_OFFLOADING`
//! sections (`.llvm.offloading`) of a little-endian ELF64 executable,
//! shared library or object (clang keeps the section in linked programs;
//! it is `SHF_EXCLUDE` in objects, which does not matter to a reader), or
//! the whole file when it is itself an offload binary (what
//! `clang-offload-packager` / `llvm-offload-binary` write).

use super::{bad, parse_section, Entry, OffloadError, MAGIC};

/// `SHT_LLVM_OFFLOADING`.
pub const SHT_LLVM_OFFLOADING: u32 = 0x6fff_4c0b;

/// How the file holds its offload binaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// ELF sections (how many).
    Elf { sections: usize },
    /// The file is an offload binary (or several concatenated).
    Raw,
}

/// The offload entries of a file and where they were found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offload {
    pub container: Container,
    pub entries: Vec<Entry>,
}

/// The offload entries of `file`: `Ok(None)` when it has none (not an ELF
/// with an offloading section, not an offload binary); an error when it
/// has some but they do not parse.
pub fn find(file: &[u8]) -> Result<Option<Offload>, OffloadError> {
    if file.starts_with(&MAGIC) {
        return Ok(Some(Offload {
            container: Container::Raw,
            entries: parse_section(file, 0)?,
        }));
    }
    let sections = offloading_sections(file)?;
    if sections.is_empty() {
        return Ok(None);
    }
    let mut entries = Vec::new();
    for (start, end) in &sections {
        entries.extend(parse_section(
            &file[*start as usize..*end as usize],
            *start,
        )?);
    }
    Ok(Some(Offload {
        container: Container::Elf {
            sections: sections.len(),
        },
        entries,
    }))
}

/// File ranges of the offloading sections of a little-endian ELF64 file;
/// empty when it is not one or its section header table is not inside it
/// (then it is no offload container: callers treat it as before).
fn offloading_sections(d: &[u8]) -> Result<Vec<(u64, u64)>, OffloadError> {
    let (u16_at, u32_at, u64_at) = (super::u16_at, super::u32_at, super::u64_at);
    if d.len() < 64 || d[..4] != *b"\x7fELF" || d[4] != 2 || d[5] != 1 {
        return Ok(Vec::new());
    }
    let (Some(shoff), Some(shentsize), Some(shnum)) =
        (u64_at(d, 0x28), u16_at(d, 0x3a), u16_at(d, 0x3c))
    else {
        return Ok(Vec::new());
    };
    let (shentsize, shnum) = (u64::from(shentsize), u64::from(shnum));
    let table_fits = shentsize >= 64
        && shnum
            .checked_mul(shentsize)
            .and_then(|n| n.checked_add(shoff))
            .is_some_and(|end| end <= d.len() as u64);
    if !table_fits {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for i in 0..shnum {
        let h = shoff + i * shentsize;
        if u32_at(d, h + 4) != Some(SHT_LLVM_OFFLOADING) {
            continue;
        }
        let offset = u64_at(d, h + 0x18).unwrap_or(u64::MAX);
        let size = u64_at(d, h + 0x20).unwrap_or(u64::MAX);
        let end = offset
            .checked_add(size)
            .filter(|&e| e <= d.len() as u64)
            .ok_or_else(|| {
                bad(
                    h + 0x18,
                    format!("section header {i}: the offloading section's {size} bytes at file offset {offset} run past the file's end ({} bytes)", d.len()),
                )
            })?;
        out.push((offset, end));
    }
    Ok(out)
}
