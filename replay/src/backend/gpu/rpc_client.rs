//! Whether an image's code can reach LLVM's host RPC client.
//!
//! Since LLVM 20 the OpenMP device runtime defines `__llvm_rpc_client` in
//! every image; the optimizer removes it when nothing uses it, but only at
//! -O1 and above, so every -O0 image holds one. LLVM's plugin starts its RPC
//! server for any image that defines it; rrstore serves no RPC, so it
//! refuses only an image whose code can actually reach the client (a kernel
//! that calls the host would wait forever), and replays one whose client is
//! merely defined. The evidence, read from the image's own bytes:
//!
//! * a relocation against the client symbol (any `SHT_REL`/`SHT_RELA`
//!   section: code of a relocatable image, the constant bank through which
//!   cubin code loads global addresses, dynamic relocations);
//! * AMDGPU code that computes the client's address PC-relatively, as LLVM
//!   emits it (`s_getpc_b64`, then `s_add_u32` / `s_addc_u32` with the low
//!   and high halves of `sym - pc` as literals: resolved by the linker, so a
//!   linked code object keeps no relocation for it);
//! * PTX: the name anywhere but in its own declaration.
//!
//! An image that is none of these (a fatbin, an ELF without a symbol table)
//! cannot be read, and is refused as before, saying so.

use super::elf_read::{u32_at, u64_at, Elf, EM_AMDGPU, SHF_EXECINSTR, SHT_REL, SHT_RELA};

/// What an image does with the RPC client symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientUse {
    /// Defined (or declared), never referenced: the image replays.
    Unused,
    /// Referenced by the image's code: the evidence, as a phrase.
    Used(String),
    /// The image cannot be read for references: why, as a phrase.
    Unknown(String),
}

/// How `image`'s code uses the symbol `name` (the driver found it defined).
pub fn client_use(image: &[u8], name: &str) -> ClientUse {
    if image.starts_with(b"\x7fELF") {
        return match Elf::parse(image) {
            Some(elf) => elf.uses(name),
            None => ClientUse::Unknown("its ELF headers cannot be read".into()),
        };
    }
    if let Ok(text) = std::str::from_utf8(image) {
        if text.contains(".target") || text.contains(".version") {
            return ptx_uses(text, name);
        }
    }
    ClientUse::Unknown(
        "it is not an ELF image or PTX (a fatbin?) whose references can be read".into(),
    )
}

/// PTX: a use is the name on any line but a directive declaring it (a
/// directive mentioning it after `=` initializes another global with it).
fn ptx_uses(text: &str, name: &str) -> ClientUse {
    for (n, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(i) = line[from..].find(name) {
            let at = from + i;
            let end = at + name.len();
            let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
            let whole = !line[..at].ends_with(ident) && !line[end..].starts_with(ident);
            let declares = line.trim_start().starts_with('.') && !line[..at].contains('=');
            if whole && !declares {
                return ClientUse::Used(format!("PTX line {} refers to it", n + 1));
            }
            from = end;
        }
    }
    ClientUse::Unused
}

/// The client's uses, read from an [`Elf`] image.
trait Uses {
    fn uses(&self, name: &str) -> ClientUse;
    fn pc_relative_reference(&self, value: u64, size: u64) -> Option<u64>;
}

impl Uses for Elf<'_> {
    fn uses(&self, name: &str) -> ClientUse {
        // (symbol table section, symbol index, value, size, defined).
        let syms: Vec<(usize, u64, u64, u64, bool)> = self
            .symbols()
            .into_iter()
            .filter(|s| s.name == name.as_bytes())
            .map(|s| (s.table, s.index, s.value, s.size, s.shndx != 0))
            .collect();
        if syms.is_empty() {
            return ClientUse::Unknown("its symbol table does not list it".into());
        }
        for r in &self.sections {
            if r.kind != SHT_REL && r.kind != SHT_RELA {
                continue;
            }
            let Some(data) = self.data(r) else { continue };
            let ent = r.entsize.max(if r.kind == SHT_RELA { 24 } else { 16 });
            for i in 0..data.len() / ent {
                let Some(info) = u64_at(data, i * ent + 8) else {
                    break;
                };
                let sym = info >> 32;
                if syms
                    .iter()
                    .any(|&(t, s, ..)| t == r.link as usize && s == sym)
                {
                    return ClientUse::Used(format!(
                        "{} relocates a reference to it",
                        self.section_name(r)
                    ));
                }
            }
        }
        if self.machine == EM_AMDGPU {
            for &(_, _, value, size, defined) in &syms {
                if defined {
                    if let Some(at) = self.pc_relative_reference(value, size.max(1)) {
                        return ClientUse::Used(format!(
                            "the code at {at:#x} computes its address"
                        ));
                    }
                }
            }
        }
        ClientUse::Unused
    }

    /// The address of an AMDGPU `s_add_u32` literal whose `s_getpc_b64`
    /// base plus the 64-bit offset it and the following `s_addc_u32`
    /// literal hold lands in `[value, value + size)`: LLVM's
    /// `sym@rel32@lo+4` / `sym@rel32@hi+12` pair, which makes both halves
    /// of `sym - pc`, where `pc` is the `s_add_u32` right after the
    /// `s_getpc_b64`.
    fn pc_relative_reference(&self, value: u64, size: u64) -> Option<u64> {
        for s in &self.sections {
            if s.flags & SHF_EXECINSTR == 0 {
                continue;
            }
            let Some(code) = self.data(s) else { continue };
            let mut i = 4;
            while i + 12 <= code.len() {
                let lo = u64::from(u32_at(code, i)?);
                let hi = u64::from(u32_at(code, i + 8)?);
                // The literal follows the 4-byte s_add_u32 the pc points at.
                let pc = s.addr.wrapping_add(i as u64).wrapping_sub(4);
                let target = pc.wrapping_add(hi << 32 | lo);
                if target.wrapping_sub(value) < size {
                    return Some(pc);
                }
                i += 4;
            }
        }
        None
    }
}

/// ELF64 images with sections, symbols and relocations, built byte by byte
/// for the tests of the reference search (here and in the GPU sequence's).
#[cfg(test)]
pub(crate) mod build {
    /// A section of [`elf`]: name, type, flags, address, bytes, link (a
    /// section index), entry size.
    pub struct Sec {
        pub name: &'static str,
        pub kind: u32,
        pub flags: u64,
        pub addr: u64,
        pub bytes: Vec<u8>,
        pub link: u32,
        pub entsize: u64,
    }

    /// An ELF64 little-endian image of `machine` with a null section, the
    /// given ones, then `.shstrtab`.
    pub fn elf(machine: u16, e_flags: u32, abi: u8, secs: &[Sec]) -> Vec<u8> {
        let mut shstr = vec![0u8];
        let mut names = Vec::new();
        for s in secs.iter().map(|s| s.name).chain([".shstrtab"]) {
            names.push(shstr.len() as u32);
            shstr.extend_from_slice(s.as_bytes());
            shstr.push(0);
        }
        let mut out = vec![0u8; 64];
        let mut offsets = Vec::new();
        for s in secs {
            while !out.len().is_multiple_of(8) {
                out.push(0);
            }
            offsets.push(out.len() as u64);
            out.extend_from_slice(&s.bytes);
        }
        offsets.push(out.len() as u64);
        out.extend_from_slice(&shstr);
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let shoff = out.len() as u64;
        out.extend_from_slice(&[0u8; 64]);
        let mut header = |name: u32,
                          kind: u32,
                          flags: u64,
                          addr: u64,
                          off: u64,
                          size: u64,
                          link: u32,
                          ent: u64| {
            for v in [name, kind] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            for v in [flags, addr, off, size] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&link.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&8u64.to_le_bytes());
            out.extend_from_slice(&ent.to_le_bytes());
        };
        for (i, s) in secs.iter().enumerate() {
            let len = s.bytes.len() as u64;
            header(
                names[i], s.kind, s.flags, s.addr, offsets[i], len, s.link, s.entsize,
            );
        }
        header(
            names[secs.len()],
            3,
            0,
            0,
            offsets[secs.len()],
            shstr.len() as u64,
            0,
            0,
        );
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = 2;
        out[5] = 1;
        out[6] = 1;
        out[7] = 64; // ELFOSABI_AMDGPU_HSA / CUDA: any value
        out[8] = abi;
        out[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        out[18..20].copy_from_slice(&machine.to_le_bytes());
        out[20..24].copy_from_slice(&1u32.to_le_bytes());
        out[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        out[0x30..0x34].copy_from_slice(&e_flags.to_le_bytes());
        out[0x34..0x36].copy_from_slice(&64u16.to_le_bytes());
        out[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        let shnum = secs.len() as u16 + 2;
        out[0x3c..0x3e].copy_from_slice(&shnum.to_le_bytes());
        out[0x3e..0x40].copy_from_slice(&(shnum - 1).to_le_bytes());
        out
    }

    /// `.strtab` bytes and each name's offset.
    pub fn strtab(names: &[&str]) -> (Vec<u8>, Vec<u32>) {
        let mut b = vec![0u8];
        let mut offs = Vec::new();
        for n in names {
            offs.push(b.len() as u32);
            b.extend_from_slice(n.as_bytes());
            b.push(0);
        }
        (b, offs)
    }

    /// One ELF64 symbol: name offset, defined in section `shndx` (0:
    /// undefined), value, size (an object).
    pub fn symbol(name: u32, shndx: u16, value: u64, size: u64) -> Vec<u8> {
        let mut b = name.to_le_bytes().to_vec();
        b.push(0x11); // STB_GLOBAL, STT_OBJECT
        b.push(3); // STV_PROTECTED
        b.extend_from_slice(&shndx.to_le_bytes());
        b.extend_from_slice(&value.to_le_bytes());
        b.extend_from_slice(&size.to_le_bytes());
        b
    }

    /// One `Elf64_Rela` against symbol `sym`.
    pub fn rela(offset: u64, sym: u64, kind: u32) -> Vec<u8> {
        let mut b = offset.to_le_bytes().to_vec();
        b.extend_from_slice(&(sym << 32 | u64::from(kind)).to_le_bytes());
        b.extend_from_slice(&0i64.to_le_bytes());
        b
    }

    /// An image of `machine` whose symbol table defines `client` (16 bytes
    /// at 0x3000 in `.bss`) and a kernel, with `text` as its code at 0x1000,
    /// and, with `reloc`, a `.rela.text` against the client.
    pub fn image_with_client(machine: u16, client: &str, text: Vec<u8>, reloc: bool) -> Vec<u8> {
        // Sections: 1 .text, 2 .bss, 3 .symtab, 4 .strtab, [5 .rela.text].
        let (strs, offs) = strtab(&["", client, "k"]);
        let mut syms = vec![0u8; 24];
        syms.extend(symbol(offs[1], 2, 0x3000, 16));
        syms.extend(symbol(offs[2], 1, 0x1000, 16));
        let mut secs = vec![
            Sec {
                name: ".text",
                kind: 1,
                flags: 6,
                addr: 0x1000,
                bytes: text,
                link: 0,
                entsize: 0,
            },
            Sec {
                name: ".bss",
                kind: 8,
                flags: 3,
                addr: 0x3000,
                bytes: Vec::new(),
                link: 0,
                entsize: 0,
            },
            Sec {
                name: ".symtab",
                kind: 2,
                flags: 0,
                addr: 0,
                bytes: syms,
                link: 4,
                entsize: 24,
            },
            Sec {
                name: ".strtab",
                kind: 3,
                flags: 0,
                addr: 0,
                bytes: strs,
                link: 0,
                entsize: 0,
            },
        ];
        if reloc {
            secs.push(Sec {
                name: ".rela.text",
                kind: 4,
                flags: 0,
                addr: 0,
                bytes: rela(0x1008, 1, 1),
                link: 3,
                entsize: 24,
            });
        }
        // The targets of the GPU tests' fakes: sm_90, gfx90a.
        let (flags, abi) = if machine == 190 {
            (90 << 8, 8)
        } else {
            (0x3f, 2)
        };
        elf(machine, flags, abi, &secs)
    }

    /// AMDGPU code at 0x1000 that computes the address `target` as LLVM
    /// emits it: s_getpc_b64 s[0:1]; s_add_u32 s0, s0, lo; s_addc_u32 s1, s1, hi.
    pub fn getpc_code(target: u64) -> Vec<u8> {
        let mut c = Vec::new();
        c.extend_from_slice(&0xbf80_0000u32.to_le_bytes()); // s_nop
        c.extend_from_slice(&0xbe80_1c00u32.to_le_bytes()); // s_getpc_b64 s[0:1]
        let pc = 0x1008u64; // the s_add_u32 below
        let d = target.wrapping_sub(pc);
        c.extend_from_slice(&0x8000_ff00u32.to_le_bytes()); // s_add_u32 s0, s0, lit
        c.extend_from_slice(&(d as u32).to_le_bytes());
        c.extend_from_slice(&0x8201_ff01u32.to_le_bytes()); // s_addc_u32 s1, s1, lit
        c.extend_from_slice(&((d >> 32) as u32).to_le_bytes());
        c.extend_from_slice(&0xbf81_0000u32.to_le_bytes()); // s_endpgm
        c
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    const CLIENT: &str = "__llvm_rpc_client";
    const EM_CUDA: u16 = 190;

    #[test]
    fn a_defined_but_unused_client_is_unused() {
        // What every LLVM 20+ -O0 image holds: the symbol, no reference.
        let nops = vec![0u8; 64];
        for m in [EM_AMDGPU, EM_CUDA] {
            let img = image_with_client(m, CLIENT, nops.clone(), false);
            assert_eq!(client_use(&img, CLIENT), ClientUse::Unused);
        }
        // Code computing another address is no reference either.
        let img = image_with_client(EM_AMDGPU, CLIENT, getpc_code(0x3100), false);
        assert_eq!(client_use(&img, CLIENT), ClientUse::Unused);
    }

    #[test]
    fn a_relocation_or_pc_relative_address_is_a_use() {
        let img = image_with_client(EM_CUDA, CLIENT, vec![0u8; 64], true);
        match client_use(&img, CLIENT) {
            ClientUse::Used(how) => assert!(how.contains(".rela.text"), "{how}"),
            other => panic!("{other:?}"),
        }
        // Linked AMDGPU code keeps no relocation: the address computation.
        for target in [0x3000, 0x3008] {
            let img = image_with_client(EM_AMDGPU, CLIENT, getpc_code(target), false);
            match client_use(&img, CLIENT) {
                ClientUse::Used(how) => assert!(how.contains("0x1008"), "{how}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn ptx_uses_are_lines_other_than_the_declaration() {
        let decl =
            ".version 8.0\n.target sm_90\n.visible .global .align 8 .b8 __llvm_rpc_client[32];\n";
        assert_eq!(client_use(decl.as_bytes(), CLIENT), ClientUse::Unused);
        let used = format!("{decl}\tmov.u64 %rd1, __llvm_rpc_client;\n");
        assert!(matches!(
            client_use(used.as_bytes(), CLIENT),
            ClientUse::Used(_)
        ));
        let init = format!("{decl}.global .u64 p[1] = {{generic(__llvm_rpc_client)}};\n");
        assert!(matches!(
            client_use(init.as_bytes(), CLIENT),
            ClientUse::Used(_)
        ));
        // A longer name is not the client.
        let other = format!("{decl}\tmov.u64 %rd1, __llvm_rpc_client_x;\n");
        assert_eq!(client_use(other.as_bytes(), CLIENT), ClientUse::Unused);
    }

    #[test]
    fn unreadable_images_are_unknown() {
        assert!(matches!(
            client_use(b"\x50\xed\x55\xba", CLIENT),
            ClientUse::Unknown(_)
        ));
        assert!(matches!(
            client_use(b"\x7fELF\x02\x01", CLIENT),
            ClientUse::Unknown(_)
        ));
        let hdr = rrstore_tests::elf_header(EM_AMDGPU, 0x3f, 2);
        assert!(matches!(client_use(&hdr, CLIENT), ClientUse::Unknown(_)));
    }
}
