//! LLVM bitcode images: what rrstore reads from an IR image before it hands
//! it to a compiler (spec/COMPILE.md, "Reading bitcode").
//!
//! Only three facts, read with the `llvm-bitcode` bitstream reader while
//! every other block is skipped by its length: the producer string of the
//! identification block (`LLVM22.1.8`: a toolchain older than the producer
//! cannot read the bitcode), the module's target triple, and the symbol
//! string table (`STRTAB`), so that IR without the recording's kernel is
//! refused before any compiler runs. Bitcode is untrusted input: a reader
//! error is an error with the byte offset it stopped at, never a panic.

use llvm_bitcode::bitcode::Record;
use llvm_bitcode::visitor::BitStreamVisitor;
use llvm_bitcode::Bitcode;

/// Raw bitcode magic: `BC` 0xC0DE.
const MAGIC: [u8; 4] = [0x42, 0x43, 0xC0, 0xDE];
/// The bitcode wrapper's magic (little-endian 0x0B17C0DE).
const WRAPPER: [u8; 4] = [0xDE, 0xC0, 0x17, 0x0B];

const IDENTIFICATION_BLOCK: u32 = 13;
const MODULE_BLOCK: u32 = 8;
const STRTAB_BLOCK: u32 = 23;
const IDENTIFICATION_CODE_STRING: u64 = 1;
const MODULE_CODE_TRIPLE: u64 = 2;
const STRTAB_BLOB: u64 = 1;

/// Whether `head` starts like LLVM bitcode (raw or wrapped).
pub fn is_bitcode(head: &[u8]) -> bool {
    head.len() >= 4 && (head[..4] == MAGIC || head[..4] == WRAPPER)
}

/// What rrstore knows of a bitcode image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BitcodeInfo {
    /// The identification block's producer (`LLVM22.1.8`), if present.
    pub producer: Option<String>,
    /// The module's target triple (`x86_64-pc-linux-gnu`, `nvptx64-nvidia-cuda`).
    pub triple: Option<String>,
    /// The symbol string table (names of the module's symbols, concatenated).
    strtab: Vec<u8>,
}

impl BitcodeInfo {
    /// The producer's LLVM major version (22 for `LLVM22.1.8`).
    pub fn producer_major(&self) -> Option<u32> {
        let p = self.producer.as_deref()?;
        let digits: String = p
            .trim_start_matches("LLVM")
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }

    /// The producer's version as written (`22.1.8`).
    pub fn producer_version(&self) -> Option<&str> {
        self.producer
            .as_deref()
            .map(|p| p.trim_start_matches("LLVM"))
    }

    /// Whether the module names the symbol `name` (its string table holds
    /// it; the compiler and the loader check that it is a function).
    pub fn names_symbol(&self, name: &str) -> bool {
        !name.is_empty()
            && self
                .strtab
                .windows(name.len())
                .any(|w| w == name.as_bytes())
    }

    /// The architecture part of the triple (`x86_64`, `nvptx64`, `amdgcn`).
    pub fn arch(&self) -> Option<&str> {
        self.triple.as_deref().and_then(|t| t.split('-').next())
    }
}

/// Why bitcode could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BitcodeError {
    #[error("it is not LLVM bitcode (no `BC\\xC0\\xDE` or wrapper magic at byte 0)")]
    NotBitcode,
    #[error("its bitstream is malformed or truncated: {0}")]
    Malformed(String),
    #[error("it has no module block (byte length {len}): not a compiled module")]
    NoModule { len: usize },
}

/// Read the producer, triple and symbol table of `bytes`.
pub fn parse(bytes: &[u8]) -> Result<BitcodeInfo, BitcodeError> {
    if !is_bitcode(bytes) {
        return Err(BitcodeError::NotBitcode);
    }
    let mut v = Facts::default();
    Bitcode::read(bytes, &mut v).map_err(|e| BitcodeError::Malformed(e.to_string()))?;
    if !v.saw_module {
        return Err(BitcodeError::NoModule { len: bytes.len() });
    }
    Ok(BitcodeInfo {
        producer: v.producer,
        triple: v.triple,
        strtab: v.strtab,
    })
}

/// Collects the three facts; enters only the blocks that hold them.
#[derive(Default)]
struct Facts {
    depth: u32,
    saw_module: bool,
    producer: Option<String>,
    triple: Option<String>,
    strtab: Vec<u8>,
}

impl BitStreamVisitor for Facts {
    fn should_enter_block(&mut self, id: u32) -> bool {
        // Top-level blocks only: the module's sub-blocks (types,
        // functions, metadata) are skipped by their recorded length.
        let enter =
            self.depth == 0 && matches!(id, IDENTIFICATION_BLOCK | MODULE_BLOCK | STRTAB_BLOCK);
        if enter {
            self.depth += 1;
            if id == MODULE_BLOCK {
                self.saw_module = true;
            }
        }
        enter
    }

    fn did_exit_block(&mut self, _id: u32) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn visit(&mut self, block: u32, mut record: Record) {
        match (block, record.id) {
            (IDENTIFICATION_BLOCK, IDENTIFICATION_CODE_STRING) if self.producer.is_none() => {
                self.producer = text(&mut record);
            }
            (MODULE_BLOCK, MODULE_CODE_TRIPLE) if self.triple.is_none() => {
                self.triple = text(&mut record);
            }
            (STRTAB_BLOCK, STRTAB_BLOB) => {
                if let Some(llvm_bitcode::bitcode::Payload::Blob(b)) = record.take_payload() {
                    self.strtab.extend_from_slice(&b);
                }
            }
            _ => {}
        }
    }
}

/// A record holding a string: a char6 or an array payload, or its fields
/// (an unabbreviated record carries one character per field).
fn text(record: &mut Record) -> Option<String> {
    use llvm_bitcode::bitcode::Payload;
    let chars: Vec<u64> = match record.take_payload() {
        Some(Payload::Char6String(s)) => return Some(s),
        Some(Payload::Array(a)) => a,
        Some(Payload::Blob(b)) => return Some(String::from_utf8_lossy(&b).into_owned()),
        None => record.fields().to_vec(),
    };
    let bytes: Vec<u8> = chars.iter().filter_map(|&c| u8::try_from(c).ok()).collect();
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_bitcode_and_truncated_bitcode_are_errors_not_panics() {
        assert!(matches!(parse(b"\x7fELF"), Err(BitcodeError::NotBitcode)));
        assert!(parse(&MAGIC).is_err());
        let mut noise = MAGIC.to_vec();
        let mut x = 0x9e37_79b9_u32;
        for len in 0..2000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            noise.push(x as u8);
            let _ = parse(&noise[..len.min(noise.len())]);
        }
        let mut wrapper = WRAPPER.to_vec();
        wrapper.extend_from_slice(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        wrapper.extend_from_slice(&[0; 8]);
        assert!(parse(&wrapper).is_err());
    }
}
