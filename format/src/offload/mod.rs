//! LLVM offload binaries (the `.llvm.offloading` format that
//! `clang-offload-packager` / `llvm-offload-binary` write and clang embeds in
//! every offload application): the device images an executable, shared
//! library or object carries, each with its image kind, producer, triple and
//! arch (spec/OFFLOAD.md).
//!
//! * [`parse_section`]: the bytes of one `.llvm.offloading` section (or one
//!   stand-alone offload binary file), which may hold several concatenated
//!   offload binaries, each starting 8-aligned.
//! * [`container`]: find that section in an ELF file, or take a file that
//!   is itself an offload binary.
//! * [`target`]: which recordings an entry can run (its triple and arch as
//!   an [`crate::image::ImageTarget`]).
//!
//! The input is hostile: every size, offset and count is checked against
//! the bytes actually present before it is used, nothing is allocated by a
//! size the input states (only by counts already bounded by its length),
//! and an error names the byte offset (from the start of the file) where
//! the problem is.

pub mod container;
pub mod target;

use std::ops::Range;

/// The magic bytes that start an offload binary (0x10FF10AD).
pub const MAGIC: [u8; 4] = [0x10, 0xff, 0x10, 0xad];
/// Offload binaries start 8-aligned within their section.
pub const ALIGN: u64 = 8;
/// Versions read: 1 (LLVM 15-22: NUL-terminated strings), 2 (strings with
/// a length), 3 (a header field for compression, which rrstore refuses).
pub const MAX_VERSION: u32 = 3;

const HEADER_V1: u64 = 32;
const HEADER_V3: u64 = 40;
const ENTRY: u64 = 40;
const STRING_V1: u64 = 16;
const STRING_V2: u64 = 24;
/// `OIF_Metadata`: an entry that carries strings but no image.
const FLAG_METADATA: u32 = 1;

/// What an offload binary is wrong about; `offset` is from the start of the
/// file the section was read from.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OffloadError {
    #[error("offload binary data at byte {offset}: {what}")]
    Malformed { offset: u64, what: String },
    #[error("offload binary at byte {offset} has version {version}; this rrstore reads versions 1 to {MAX_VERSION}")]
    Version { offset: u64, version: u32 },
    #[error("offload binary at byte {offset} is compressed; rrstore reads uncompressed offload binaries only (link without `--offload-compress`)")]
    Compressed { offset: u64 },
}

fn bad(offset: u64, what: impl Into<String>) -> OffloadError {
    OffloadError::Malformed {
        offset,
        what: what.into(),
    }
}

/// The kind of image an entry holds (LLVM's `ImageKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageKind {
    None,
    /// An ELF (or other) object: LLVM's `IMG_Object`.
    Object,
    /// LLVM IR bitcode (`-fopenmp-target-jit`, `-foffload-lto` objects).
    Bitcode,
    Cubin,
    Fatbinary,
    Ptx,
    Spirv,
    Other(u16),
}

impl ImageKind {
    fn from_raw(v: u16) -> ImageKind {
        match v {
            0 => ImageKind::None,
            1 => ImageKind::Object,
            2 => ImageKind::Bitcode,
            3 => ImageKind::Cubin,
            4 => ImageKind::Fatbinary,
            5 => ImageKind::Ptx,
            6 => ImageKind::Spirv,
            o => ImageKind::Other(o),
        }
    }

    /// The name `llvm-objdump --offloading` prints (`elf`, `llvm ir`, ...).
    pub fn name(&self) -> String {
        match self {
            ImageKind::None => "none".into(),
            ImageKind::Object => "elf".into(),
            ImageKind::Bitcode => "llvm ir".into(),
            ImageKind::Cubin => "cubin".into(),
            ImageKind::Fatbinary => "fatbinary".into(),
            ImageKind::Ptx => "ptx".into(),
            ImageKind::Spirv => "spir-v".into(),
            ImageKind::Other(v) => format!("<unknown {v}>"),
        }
    }
}

/// The producer of an entry (LLVM's `OffloadKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffloadKind(pub u16);

impl OffloadKind {
    /// The name `llvm-objdump --offloading` prints (`openmp`, `cuda`, ...).
    pub fn name(&self) -> String {
        match self.0 {
            0 => "none".into(),
            1 => "openmp".into(),
            2 => "cuda".into(),
            4 => "hip".into(),
            8 => "sycl".into(),
            v => format!("<unknown {v}>"),
        }
    }
}

/// One entry of an offload binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// File offset of the offload binary it belongs to.
    pub binary_offset: u64,
    /// Its position in that binary.
    pub index_in_binary: u64,
    pub version: u32,
    pub image_kind: ImageKind,
    pub offload_kind: OffloadKind,
    pub flags: u32,
    /// The string map in order, duplicate keys kept as LLVM keeps them
    /// (the last value wins in [`Entry::string`]).
    pub strings: Vec<(String, String)>,
    /// Where its image lies in the file (empty for a metadata-only entry).
    pub image: Range<u64>,
}

impl Entry {
    /// The value of string `key` (the last one when repeated), or "".
    pub fn string(&self, key: &str) -> &str {
        self.strings
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }
    pub fn triple(&self) -> &str {
        self.string("triple")
    }
    pub fn arch(&self) -> &str {
        self.string("arch")
    }
    /// It carries metadata only, no image (`OIF_Metadata`).
    pub fn metadata_only(&self) -> bool {
        self.flags & FLAG_METADATA != 0
    }
    /// Its image bytes within `file` (the bytes the offsets refer to).
    pub fn image_bytes<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        let r = usize::try_from(self.image.start).unwrap_or(usize::MAX)
            ..usize::try_from(self.image.end).unwrap_or(usize::MAX);
        file.get(r).unwrap_or(&[])
    }
}

fn u16_at(d: &[u8], at: u64) -> Option<u16> {
    let o = usize::try_from(at).ok()?;
    Some(u16::from_le_bytes(
        d.get(o..o.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(d: &[u8], at: u64) -> Option<u32> {
    let o = usize::try_from(at).ok()?;
    Some(u32::from_le_bytes(
        d.get(o..o.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(d: &[u8], at: u64) -> Option<u64> {
    let o = usize::try_from(at).ok()?;
    Some(u64::from_le_bytes(
        d.get(o..o.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Parse the offload binaries of one section: `sec` is its bytes, `base`
/// the file offset they start at (for positions and error messages).
/// Concatenated binaries each start at the next 8-aligned offset after the
/// previous one's size; zero padding after the last one is accepted.
pub fn parse_section(sec: &[u8], base: u64) -> Result<Vec<Entry>, OffloadError> {
    let mut entries = Vec::new();
    let len = sec.len() as u64;
    let mut at = 0u64;
    while at < len {
        let rest = &sec[at as usize..];
        if !rest.starts_with(&MAGIC) && rest.iter().all(|&b| b == 0) {
            break;
        }
        let size = parse_binary(rest, base + at, &mut entries)?;
        // size >= HEADER_V1 and <= rest.len(): no overflow, progress made.
        at += size.div_ceil(ALIGN) * ALIGN;
    }
    if entries.is_empty() {
        return Err(bad(base, "the section holds no offload binary"));
    }
    Ok(entries)
}

/// Parse one offload binary at the start of `d` (file offset `base`),
/// appending its entries; returns its size.
fn parse_binary(d: &[u8], base: u64, out: &mut Vec<Entry>) -> Result<u64, OffloadError> {
    let len = d.len() as u64;
    if len < HEADER_V1 {
        return Err(bad(
            base,
            format!("{len} bytes left, fewer than an offload binary header ({HEADER_V1})"),
        ));
    }
    if d[..4] != MAGIC {
        return Err(bad(base, "not an offload binary (no 0x10FF10AD magic)"));
    }
    let field = |o: u64| u64_at(d, o).unwrap_or(0);
    let version = u32_at(d, 4).unwrap_or(0);
    if version == 0 || version > MAX_VERSION {
        return Err(OffloadError::Version {
            offset: base,
            version,
        });
    }
    let header = if version >= 3 { HEADER_V3 } else { HEADER_V1 };
    if len < header {
        return Err(bad(
            base,
            format!("truncated header: {len} bytes of {header}"),
        ));
    }
    let size = field(8);
    if size < header || size > len {
        return Err(bad(
            base + 8,
            format!(
                "its size {size} is outside {header}..={len} (the header up to the bytes present)"
            ),
        ));
    }
    if version >= 3 && field(32) != 0 {
        return Err(OffloadError::Compressed { offset: base });
    }
    let entries_at = field(16);
    let count = if version == 1 { 1 } else { field(24) };
    // Bounds the count by the size before anything is read or reserved.
    let table_end = count
        .checked_mul(ENTRY)
        .and_then(|n| n.checked_add(entries_at))
        .filter(|&end| entries_at >= header && end <= size)
        .ok_or_else(|| {
            bad(
                base + 16,
                format!("{count} entries of {ENTRY} bytes at offset {entries_at} do not fit between its header ({header} bytes) and its size {size}"),
            )
        })?;
    let d = &d[..size as usize];
    let string_size = if version == 1 { STRING_V1 } else { STRING_V2 };
    for i in 0..count {
        let e = entries_at + i * ENTRY;
        let at = |o: u64| base + e + o;
        let kind = u16_at(d, e).unwrap_or(0);
        let producer = u16_at(d, e + 2).unwrap_or(0);
        let flags = u32_at(d, e + 4).unwrap_or(0);
        let str_at = u64_at(d, e + 8).unwrap_or(0);
        let nstr = u64_at(d, e + 16).unwrap_or(0);
        let img_at = u64_at(d, e + 24).unwrap_or(0);
        let img_len = u64_at(d, e + 32).unwrap_or(0);
        let img_end = img_at
            .checked_add(img_len)
            .filter(|&end| end <= size)
            .ok_or_else(|| {
                bad(
                    at(24),
                    format!("entry {i}: image of {img_len} bytes at offset {img_at} runs past the binary's size {size}"),
                )
            })?;
        let overlaps = |a: u64, b: u64| img_at < b && a < img_end;
        if img_len > 0 && (overlaps(0, header) || overlaps(entries_at, table_end)) {
            return Err(bad(
                at(24),
                format!("entry {i}: image at {img_at}..{img_end} overlaps the header (0..{header}) or the entry table ({entries_at}..{table_end})"),
            ));
        }
        nstr.checked_mul(string_size)
            .and_then(|n| n.checked_add(str_at))
            .filter(|&end| str_at >= header && end <= size)
            .ok_or_else(|| {
                bad(
                    at(8),
                    format!("entry {i}: {nstr} strings of {string_size} bytes at offset {str_at} do not fit in the binary's size {size}"),
                )
            })?;
        let mut strings = Vec::new();
        for s in 0..nstr {
            let se = str_at + s * string_size;
            let key = c_string(d, u64_at(d, se).unwrap_or(u64::MAX), base + se, i)?;
            let value_at = u64_at(d, se + 8).unwrap_or(u64::MAX);
            let value = if version == 1 {
                c_string(d, value_at, base + se + 8, i)?
            } else {
                let vlen = u64_at(d, se + 16).unwrap_or(u64::MAX);
                let r = value_at
                    .checked_add(vlen)
                    .filter(|&end| end <= size)
                    .map(|end| value_at as usize..end as usize)
                    .ok_or_else(|| {
                        bad(
                            base + se + 8,
                            format!("entry {i}: a string value of {vlen} bytes at offset {value_at} runs past the binary's size {size}"),
                        )
                    })?;
                String::from_utf8_lossy(&d[r]).into_owned()
            };
            strings.push((key, value));
        }
        let metadata = flags & FLAG_METADATA != 0;
        out.push(Entry {
            binary_offset: base,
            index_in_binary: i,
            version,
            image_kind: ImageKind::from_raw(kind),
            offload_kind: OffloadKind(producer),
            flags,
            strings,
            image: if metadata {
                base..base
            } else {
                base + img_at..base + img_end
            },
        });
    }
    Ok(size)
}

/// The NUL-terminated string at `off` of binary `d`, which must end inside
/// it; `field_at` (file offset of the field that names it) for errors.
fn c_string(d: &[u8], off: u64, field_at: u64, entry: u64) -> Result<String, OffloadError> {
    let rest = usize::try_from(off)
        .ok()
        .and_then(|o| d.get(o..))
        .ok_or_else(|| {
            bad(
                field_at,
                format!(
                    "entry {entry}: string offset {off} is past the binary's size {}",
                    d.len()
                ),
            )
        })?;
    let end = rest.iter().position(|&b| b == 0).ok_or_else(|| {
        bad(
            field_at,
            format!("entry {entry}: the string at offset {off} has no terminating NUL inside the binary"),
        )
    })?;
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}
