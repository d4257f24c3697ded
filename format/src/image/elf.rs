//! Just enough ELF64 reading for the host backend: the exported dynamic
//! symbols of an image (`.dynsym`: name, type, size) and its `DT_NEEDED`
//! libraries. Used before anything is loaded to check that the kernel symbol
//! exists and that each recorded global is exported with the recorded size
//! (`dlsym` gives an address but no size), and to name a missing runtime
//! library. Every read is bounds-checked: the image is user input.

/// Symbol types we care about (`STT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymKind {
    Func,
    Object,
    Other(u8),
}

/// One defined, exported dynamic symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynSym {
    pub name: String,
    pub kind: SymKind,
    pub size: u64,
    /// `st_value`: its address relative to where the image is loaded (a
    /// shared object's), which places a recorded address in the image
    /// ([`super::global_refs`]).
    pub value: u64,
}

/// What the host backend needs to know about an image.
#[derive(Clone, Debug, Default)]
pub struct ElfInfo {
    pub symbols: Vec<DynSym>,
    pub needed: Vec<String>,
    /// It names directories of its own to find `needed` in (`DT_RPATH` or
    /// `DT_RUNPATH`).
    pub search_path: bool,
}

impl ElfInfo {
    /// The defined dynamic symbol `name`, if exported.
    pub fn symbol(&self, name: &str) -> Option<&DynSym> {
        self.symbols.iter().find(|s| s.name == name)
    }
}

const SHT_DYNAMIC: u32 = 6;
const SHT_DYNSYM: u32 = 11;
const DT_NEEDED: u64 = 1;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;
const SHN_UNDEF: u16 = 0;

fn u16_at(d: &[u8], off: u64) -> Option<u16> {
    let o = usize::try_from(off).ok()?;
    Some(u16::from_le_bytes(
        d.get(o..o.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(d: &[u8], off: u64) -> Option<u32> {
    let o = usize::try_from(off).ok()?;
    Some(u32::from_le_bytes(
        d.get(o..o.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(d: &[u8], off: u64) -> Option<u64> {
    let o = usize::try_from(off).ok()?;
    Some(u64::from_le_bytes(
        d.get(o..o.checked_add(8)?)?.try_into().ok()?,
    ))
}
fn cstr_at(d: &[u8], off: u64) -> Option<String> {
    let o = usize::try_from(off).ok()?;
    let rest = d.get(o..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

struct Section {
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

/// Parse a little-endian ELF64 image. Returns a description of what is
/// wrong when the bytes are not one.
pub fn parse(d: &[u8]) -> Result<ElfInfo, String> {
    if d.len() < 64 || d[..4] != *b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    if d[4] != 2 || d[5] != 1 {
        return Err("not a little-endian 64-bit ELF file".into());
    }
    let bad = || "truncated or malformed ELF section headers".to_string();
    let shoff = u64_at(d, 0x28).ok_or_else(bad)?;
    let shentsize = u64::from(u16_at(d, 0x3a).ok_or_else(bad)?);
    let shnum = u64::from(u16_at(d, 0x3c).ok_or_else(bad)?);
    let mut sections = Vec::new();
    for i in 0..shnum {
        let h = shoff
            .checked_add(i.checked_mul(shentsize).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        sections.push(Section {
            kind: u32_at(d, h + 4).ok_or_else(bad)?,
            offset: u64_at(d, h + 0x18).ok_or_else(bad)?,
            size: u64_at(d, h + 0x20).ok_or_else(bad)?,
            link: u32_at(d, h + 0x28).ok_or_else(bad)?,
            entsize: u64_at(d, h + 0x38).ok_or_else(bad)?,
        });
    }
    let strtab_of = |s: &Section| -> Result<(u64, u64), String> {
        let t = sections.get(s.link as usize).ok_or_else(bad)?;
        Ok((t.offset, t.size))
    };
    let mut info = ElfInfo::default();
    for s in &sections {
        match s.kind {
            SHT_DYNSYM => {
                let (str_off, str_size) = strtab_of(s)?;
                let ent = if s.entsize == 0 { 24 } else { s.entsize };
                for i in 0..s.size / ent {
                    let e = s.offset + i * ent;
                    let name_off = u64::from(u32_at(d, e).ok_or_else(bad)?);
                    let st_info = *d.get(e as usize + 4).ok_or_else(bad)?;
                    let shndx = u16_at(d, e + 6).ok_or_else(bad)?;
                    let value = u64_at(d, e + 8).ok_or_else(bad)?;
                    let size = u64_at(d, e + 16).ok_or_else(bad)?;
                    if shndx == SHN_UNDEF || name_off == 0 || name_off >= str_size {
                        continue;
                    }
                    let name = cstr_at(d, str_off + name_off).ok_or_else(bad)?;
                    let kind = match st_info & 0xf {
                        1 => SymKind::Object,
                        2 => SymKind::Func,
                        k => SymKind::Other(k),
                    };
                    info.symbols.push(DynSym {
                        name,
                        kind,
                        size,
                        value,
                    });
                }
            }
            SHT_DYNAMIC => {
                let (str_off, str_size) = strtab_of(s)?;
                for i in 0..s.size / 16 {
                    let e = s.offset + i * 16;
                    let tag = u64_at(d, e).ok_or_else(bad)?;
                    let val = u64_at(d, e + 8).ok_or_else(bad)?;
                    if tag == 0 {
                        break;
                    }
                    if tag == DT_NEEDED && val < str_size {
                        info.needed.push(cstr_at(d, str_off + val).ok_or_else(bad)?);
                    }
                    info.search_path |= tag == DT_RPATH || tag == DT_RUNPATH;
                }
            }
            _ => {}
        }
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> Vec<u8> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        std::fs::read(dir.join(rel)).unwrap()
    }

    #[test]
    fn reads_globals_kernel_and_needed_of_a_real_image() {
        let img = fixture("llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13.image");
        let info = parse(&img).unwrap();
        let k = info
            .symbol("__omp_offloading_fe00_9ae057_main_l13")
            .unwrap();
        assert_eq!(k.kind, SymKind::Func);
        assert_eq!(info.symbol("g_table").unwrap().size, 2048);
        assert_ne!(info.symbol("g_table").unwrap().value, 0);
        assert_eq!(info.symbol("g_counter").unwrap().size, 4);
        assert_eq!(info.symbol("g_scale").unwrap().kind, SymKind::Object);
        assert!(
            info.symbol("printf").is_none(),
            "undefined symbols are skipped"
        );
        assert!(info.needed.iter().any(|n| n == "libomp.so.5"));
        assert!(info.needed.iter().any(|n| n == "libomptarget.so.22.1"));
        assert!(!info.search_path);
    }

    #[test]
    fn rejects_garbage_and_truncation_without_panicking() {
        assert!(parse(b"hello").is_err());
        let img = fixture("llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13.image");
        for cut in [64, 200, 4096, img.len() - 100] {
            let _ = parse(&img[..cut]);
        }
    }
}
