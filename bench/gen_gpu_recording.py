#!/usr/bin/env python3
"""Write a synthetic LLVM 22 (kernel-named) recording whose arena looks like
GPU memory: runs of zeros, float32 arrays and random bytes (1-16 MiB each,
in a fixed pseudo-random order).

usage: gen_gpu_recording.py DIR SIZE_MIB [--output]
  --output  also write <Name>.original.output: the arena after a kernel that
            rewrote about 1/8 of it (the rest shares chunks with the input).
Deterministic: the same arguments give the same bytes.
"""
import array
import json
import math
import os
import random
import sys

NAME = "__omp_offloading_fe00_bench_main_l1"
BASE = 0x7F0000000000
MIB = 1 << 20


def float_block(rng, n_floats):
    a = rng.random() * 100.0
    f = rng.random() * 0.01 + 0.0001
    return array.array("f", (a * math.sin(i * f) for i in range(n_floats))).tobytes()


def write_arena(path, size, seed, rewrite=None):
    rng = random.Random(seed)
    noise = random.Random(seed + 1)
    written = 0
    with open(path, "wb", buffering=8 * MIB) as out:
        while written < size:
            kind = rng.choice(("zeros", "floats", "floats", "random"))
            run = min(rng.randint(1, 16) * MIB, size - written)
            done = 0
            while done < run:
                n = min(MIB, run - done)
                if kind == "zeros":
                    block = bytes(n)
                elif kind == "floats":
                    block = float_block(rng, n // 4)
                    block += bytes(n - len(block))
                else:
                    block = noise.randbytes(n)
                if rewrite is not None and rewrite.random() < 0.125:
                    block = bytes((b + 1) & 0xFF for b in block[:4096]) + block[4096:]
                out.write(block)
                done += n
            written += run


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out_dir, size = sys.argv[1], int(sys.argv[2]) * MIB
    os.makedirs(out_dir, exist_ok=True)
    p = os.path.join(out_dir, NAME)
    write_arena(p + ".memory", size, 42)
    if "--output" in sys.argv[3:]:
        write_arena(p + ".original.output", size, 42, rewrite=random.Random(7))
    open(p + ".globals", "wb").close()
    here = os.path.dirname(os.path.abspath(__file__))
    fixture = os.path.join(here, "..", "tests", "fixtures", "llvm22-host", "saxpy")
    image = [f for f in os.listdir(fixture) if f.endswith(".image")][0]
    with open(os.path.join(fixture, image), "rb") as f:
        img = f.read()
    with open(p + ".image", "wb") as f:
        f.write(img)
    desc = {
        "ArgOffsets": [0, 0, 0],
        "ArgPtrs": [-1, BASE, BASE + size // 2],
        "BumpAllocVAStart": BASE,
        "DeviceId": 0,
        "DeviceMemorySize": size,
        "LoopTripCount": size // 8,
        "Name": NAME,
        "NumArgs": 3,
        "NumTeamsClause": 1,
        "ThreadLimitClause": 1,
    }
    with open(p + ".json", "w") as f:
        f.write(json.dumps(desc, separators=(",", ":")))


if __name__ == "__main__":
    main()
