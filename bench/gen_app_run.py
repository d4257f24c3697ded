#!/usr/bin/env python3
"""Write a GPU-like application run: N LLVM 22 (kernel-named) recordings of
one kernel called N times, each with its arena before (.memory) and after
(.original.output) the launch. The arena is laid out like device memory of
a simulation: runs of zeros (unused allocations, padding), smooth float32
fields (sines of varying frequency, the state a solver updates) and random
32-bit words (hash tables, RNG state, packed indices).

From one recording to the next only a little changes, as in a time loop:
each launch rewrites some float ranges (the fields it updates, a few
percent of the arena: new values, same smoothness) and some random words;
the host then patches a few 16 KiB slices before the next launch, so the
next recording's .memory is the previous .original.output with small
differences.

usage: gen_app_run.py DIR [--recordings N] [--arena-mib M] [--change F] [--seed S]
  defaults: 5 recordings, 48 MiB arenas (5 x 2 x 48 MiB = 480 MiB of files),
  F=0.04 (fraction of the arena a launch rewrites), seed 1.
Writes DIR/00-step00/ ... one recording directory per launch.
Deterministic: the same arguments give the same bytes. Pure Python (no
numpy); about 10 s for the default size.
"""
import argparse
import array
import json
import math
import os
import random

NAME = "__omp_offloading_fe00_app_main_l7"
BASE = 0x7F0000000000
MIB = 1 << 20
SLICE = 16 << 10


def smooth_floats(rng, nbytes, phase=0.0):
    """`nbytes` of float32: a sum of two sines, the kind of field a PDE
    solver holds (neighbouring values close, low mantissa bits noisy)."""
    a, b = rng.uniform(1, 100), rng.uniform(0, 10)
    f, g = rng.uniform(1e-4, 1e-2), rng.uniform(1e-3, 5e-2)
    n = nbytes // 4
    sin = math.sin
    vals = array.array(
        "f", [a * sin(i * f + phase) + b * sin(i * g - phase) for i in range(n)]
    )
    return vals.tobytes() + bytes(nbytes - 4 * n)


def layout(rng, size):
    """(kind, start, length) regions covering the arena."""
    regions, at = [], 0
    kinds = ("zeros", "floats", "floats", "words")
    while at < size:
        kind = rng.choice(kinds)
        n = min(rng.randint(1, 8) * MIB, size - at)
        regions.append((kind, at, n))
        at += n
    return regions


def initial(rng, regions, size):
    arena = bytearray(size)
    for kind, start, n in regions:
        if kind == "floats":
            arena[start : start + n] = smooth_floats(rng, n)
        elif kind == "words":
            arena[start : start + n] = rng.randbytes(n)
    return arena


def launch(rng, arena, regions, change, step):
    """The kernel: rewrite about `change` of the arena, mostly float
    ranges (64 KiB .. 1 MiB each) and a few random-word ranges."""
    budget = int(len(arena) * change)
    writable = [r for r in regions if r[0] != "zeros"]
    while budget > 0 and writable:
        kind, start, n = rng.choice(writable)
        ln = min(rng.randint(1, 16) * 64 * 1024, n, budget)
        off = start + rng.randrange(0, n - ln + 1) // 4 * 4
        if kind == "floats":
            arena[off : off + ln] = smooth_floats(rng, ln, phase=0.1 * step)
        else:
            arena[off : off + ln] = rng.randbytes(ln)
        budget -= ln


def host_patch(rng, arena):
    """The host between launches: a few 16 KiB slices change."""
    for _ in range(rng.randint(1, 4)):
        off = rng.randrange(0, len(arena) - SLICE) // 4 * 4
        arena[off : off + SLICE] = rng.randbytes(SLICE)


def descriptor(size):
    return {
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--recordings", type=int, default=5)
    ap.add_argument("--arena-mib", type=int, default=48)
    ap.add_argument("--change", type=float, default=0.04)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    size = args.arena_mib * MIB
    rng = random.Random(args.seed)
    regions = layout(rng, size)
    arena = initial(rng, regions, size)
    here = os.path.dirname(os.path.abspath(__file__))
    fixture = os.path.join(here, "..", "tests", "fixtures", "llvm22-host", "saxpy")
    image_name = [f for f in os.listdir(fixture) if f.endswith(".image")][0]
    with open(os.path.join(fixture, image_name), "rb") as f:
        image = f.read()
    for step in range(args.recordings):
        d = os.path.join(args.dir, f"{step:02d}-step{step:02d}")
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, NAME)
        if step > 0:
            host_patch(rng, arena)
        with open(p + ".memory", "wb") as f:
            f.write(arena)
        launch(rng, arena, regions, args.change, step)
        with open(p + ".original.output", "wb") as f:
            f.write(arena)
        open(p + ".globals", "wb").close()
        with open(p + ".image", "wb") as f:
            f.write(image)
        with open(p + ".json", "w") as f:
            f.write(json.dumps(descriptor(size), separators=(",", ":")))


if __name__ == "__main__":
    main()
