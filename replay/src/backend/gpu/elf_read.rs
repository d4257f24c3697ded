//! A reader for the parts of an ELF64 little-endian GPU image (cubin,
//! AMDGPU code object) the GPU backends look at themselves: sections,
//! symbols, relocations. Bounds-checked throughout: a malformed image gives
//! `None`, never a panic.

pub(crate) const SHT_SYMTAB: u32 = 2;
pub(crate) const SHT_RELA: u32 = 4;
pub(crate) const SHT_REL: u32 = 9;
pub(crate) const SHT_DYNSYM: u32 = 11;
pub(crate) const SHF_EXECINSTR: u64 = 4;
pub(crate) const EM_AMDGPU: u16 = 224;

pub(crate) const SHF_WRITE: u64 = 1;
pub(crate) const SHF_ALLOC: u64 = 2;

#[derive(Clone, Copy)]
pub(crate) struct Section {
    pub name: u32,
    pub kind: u32,
    pub flags: u64,
    pub addr: u64,
    pub offset: usize,
    pub size: usize,
    pub link: u32,
    pub entsize: usize,
}

/// The parts of an ELF64 little-endian image the reference search reads.
pub(crate) struct Elf<'a> {
    pub bytes: &'a [u8],
    pub machine: u16,
    pub sections: Vec<Section>,
    pub shstrndx: usize,
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}
pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

impl<'a> Elf<'a> {
    pub fn parse(b: &'a [u8]) -> Option<Self> {
        // ELFCLASS64, little-endian.
        if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
            return None;
        }
        let machine = u16_at(b, 18)?;
        let shoff = usize::try_from(u64_at(b, 0x28)?).ok()?;
        let shentsize = usize::from(u16_at(b, 0x3a)?).max(64);
        let shnum = usize::from(u16_at(b, 0x3c)?);
        let shstrndx = usize::from(u16_at(b, 0x3e)?);
        let mut sections = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
            sections.push(Section {
                name: u32_at(b, h)?,
                kind: u32_at(b, h + 4)?,
                flags: u64_at(b, h + 8)?,
                addr: u64_at(b, h + 0x10)?,
                offset: usize::try_from(u64_at(b, h + 0x18)?).ok()?,
                size: usize::try_from(u64_at(b, h + 0x20)?).ok()?,
                link: u32_at(b, h + 0x28)?,
                entsize: usize::try_from(u64_at(b, h + 0x38)?).ok()?,
            });
        }
        Some(Elf {
            bytes: b,
            machine,
            sections,
            shstrndx,
        })
    }

    pub fn data(&self, s: &Section) -> Option<&'a [u8]> {
        self.bytes.get(s.offset..s.offset.checked_add(s.size)?)
    }

    /// The NUL-terminated string at `off` of string table `table`.
    pub fn string(&self, table: usize, off: u32) -> Option<&'a [u8]> {
        let t = self.data(self.sections.get(table)?)?;
        let s = t.get(usize::try_from(off).ok()?..)?;
        Some(&s[..s.iter().position(|&c| c == 0)?])
    }

    pub fn section_name(&self, s: &Section) -> String {
        self.string(self.shstrndx, s.name)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_else(|| "a relocation section".into())
    }

    /// Every entry of every symbol table (`.symtab`, `.dynsym`).
    pub fn symbols(&self) -> Vec<Symbol<'a>> {
        let mut out = Vec::new();
        for (table, t) in self.sections.iter().enumerate() {
            if t.kind != SHT_SYMTAB && t.kind != SHT_DYNSYM {
                continue;
            }
            let Some(data) = self.data(t) else { continue };
            let ent = t.entsize.max(24);
            for i in 0..data.len() / ent {
                let e = i * ent;
                let (Some(n), Some(shndx), Some(value), Some(size)) = (
                    u32_at(data, e),
                    u16_at(data, e + 6),
                    u64_at(data, e + 8),
                    u64_at(data, e + 16),
                ) else {
                    break;
                };
                out.push(Symbol {
                    table,
                    index: i as u64,
                    name: self.string(t.link as usize, n).unwrap_or_default(),
                    info: data[e + 4],
                    shndx,
                    value,
                    size,
                });
            }
        }
        out
    }
}

/// One symbol table entry.
pub(crate) struct Symbol<'a> {
    /// The symbol table's section index, and the entry's index in it.
    pub table: usize,
    pub index: u64,
    pub name: &'a [u8],
    /// `st_info`: binding (high 4 bits) and type (low 4).
    pub info: u8,
    /// The section it is defined in (0: undefined).
    pub shndx: u16,
    pub value: u64,
    pub size: u64,
}
