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
