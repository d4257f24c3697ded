#!/usr/bin/env python3
"""A 64 MiB-arena recording for the relocation benchmark (issue 19).

    bench/gen_relocation_recording.py OUT_DIR [MIB]

Copies tests/fixtures/llvm22-relocation/pointers/01-nested (its kernel
reaches its arrays through pointers stored in the arena) into OUT_DIR and
grows its arena by MIB MiB (default 64) of float data the kernel does not
touch, with one pointer into the arena every 4 KiB (16,384 more stored
pointers for 64 MiB): `.memory` and `.original.output` get the same bytes,
`DeviceMemorySize` the new size. Deterministic (a fixed-seed generator).
"""
import json
import os
import random
import shutil
import struct
import sys

out = sys.argv[1]
mib = int(sys.argv[2]) if len(sys.argv) > 2 else 64
src = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures",
                   "llvm22-relocation", "pointers", "01-nested")
os.makedirs(out, exist_ok=True)
stem = "__omp_offloading_fe00_9d0281_main_l26"
for ext in ("image", "globals"):
    shutil.copy(os.path.join(src, f"{stem}.{ext}"), os.path.join(out, f"{stem}.{ext}"))
desc = json.load(open(os.path.join(src, f"{stem}.json")))
base, size = desc["BumpAllocVAStart"], desc["DeviceMemorySize"]
extra = mib << 20
rng = random.Random(19)
pad = bytearray()
for block in range(extra // 4096):
    floats = [rng.uniform(-1e3, 1e3) for _ in range(1023)]
    words = struct.pack("<1023f", *floats) + b"\0\0\0\0"
    ptr = base + rng.randrange(0, size + extra, 16)
    pad += struct.pack("<Q", ptr) + words[: 4096 - 8]
for ext in ("memory", "original.output"):
    data = open(os.path.join(src, f"{stem}.{ext}"), "rb").read()
    with open(os.path.join(out, f"{stem}.{ext}"), "wb") as f:
        f.write(data)
        f.write(pad)
desc["DeviceMemorySize"] = size + extra
with open(os.path.join(out, f"{stem}.json"), "w") as f:
    json.dump(desc, f, separators=(",", ":"), sort_keys=True)
print(f"{out}/{stem}.json: arena {size + extra} bytes at {base:#x}")
