//! ELF headers that name a target: what image detection reads (class,
//! byte order, OS ABI version, machine, flags) and nothing more.

/// `e_machine` of an NVIDIA cubin.
pub const EM_CUDA: u16 = 190;
/// `e_machine` of an AMDGPU code object.
pub const EM_AMDGPU: u16 = 224;

/// A 64-byte little-endian ELF64 header for `machine` with `e_flags` =
/// `flags` and `EI_ABIVERSION` = `abi`.
pub fn elf_header(machine: u16, flags: u32, abi: u8) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[8] = abi;
    h[18..20].copy_from_slice(&machine.to_le_bytes());
    h[48..52].copy_from_slice(&flags.to_le_bytes());
    h
}

/// An ELF64 image for `machine`/`flags`/`abi` (as [`elf_header`]) whose
/// `.symtab` defines `symbols` (name, size): what the GPU backends read
/// from an image's symbol table (constructor pointers, the device
/// environment's size), with no code.
pub fn elf_with_symbols(machine: u16, flags: u32, abi: u8, symbols: &[(&str, u64)]) -> Vec<u8> {
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 24];
    for (name, size) in symbols {
        let mut sym = [0u8; 24];
        sym[..4].copy_from_slice(&(strtab.len() as u32).to_le_bytes());
        sym[6..8].copy_from_slice(&1u16.to_le_bytes()); // defined (st_shndx)
        sym[16..24].copy_from_slice(&size.to_le_bytes());
        symtab.extend_from_slice(&sym);
        strtab.extend_from_slice(name.as_bytes());
        strtab.push(0);
    }
    let mut image = elf_header(machine, flags, abi);
    let symoff = image.len() as u64;
    image.extend_from_slice(&symtab);
    let stroff = image.len() as u64;
    image.extend_from_slice(&strtab);
    let shoff = image.len() as u64;
    image[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    image[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    image[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
    // Section headers: null, .symtab (linked to 2), .strtab.
    let section = |kind: u32, off: u64, size: u64, link: u32, entsize: u64| {
        let mut h = [0u8; 64];
        h[4..8].copy_from_slice(&kind.to_le_bytes());
        h[0x18..0x20].copy_from_slice(&off.to_le_bytes());
        h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
        h[0x28..0x2c].copy_from_slice(&link.to_le_bytes());
        h[0x38..0x40].copy_from_slice(&entsize.to_le_bytes());
        h
    };
    image.extend_from_slice(&[0u8; 64]);
    image.extend_from_slice(&section(2, symoff, symtab.len() as u64, 2, 24));
    image.extend_from_slice(&section(3, stroff, strtab.len() as u64, 0, 0));
    image
}
