#!/usr/bin/env python3
"""Keep only the symbol and string tables of an ELF64 little-endian object.

Usage: shrink-elf.py IN OUT

Every other section keeps its header (so symbol section indices stay valid)
but loses its contents (size 0, type NOBITS). Used to commit the symbol
table of a real GPU device runtime as a small test fixture:

  clang-19 --target=amdgcn-amd-amdhsa -mcpu=gfx90a -nogpulib -O2 -c \
      /usr/lib/llvm-19/lib/libomptarget-amdgpu-gfx90a.bc -o rtl.o
  tests/gpu/shrink-elf.py rtl.o tests/fixtures/gpu/llvm19-devicertl-gfx90a.o
"""
import struct
import sys

data = open(sys.argv[1], "rb").read()
assert data[:6] == b"\x7fELF\x02\x01", "not ELF64 little-endian"
shoff, = struct.unpack_from("<Q", data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
headers = [bytearray(data[shoff + i * shentsize: shoff + (i + 1) * shentsize]) for i in range(shnum)]
keep = set()
for i, h in enumerate(headers):
    kind, = struct.unpack_from("<I", h, 4)
    if kind in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
        keep.add(i)
        keep.add(struct.unpack_from("<I", h, 0x28)[0])
keep.add(shstrndx)
out = bytearray(data[:64])
for i, h in enumerate(headers):
    if i == 0:
        continue
    if i in keep:
        off, size = struct.unpack_from("<QQ", h, 0x18)
        while len(out) % 8:
            out.append(0)
        struct.pack_into("<Q", h, 0x18, len(out))
        out += data[off:off + size]
    else:
        struct.pack_into("<I", h, 4, 8)  # SHT_NOBITS
        struct.pack_into("<QQ", h, 0x18, 0, 0)
while len(out) % 8:
    out.append(0)
struct.pack_into("<Q", out, 0x28, len(out))
for h in headers:
    out += h
open(sys.argv[2], "wb").write(out)
