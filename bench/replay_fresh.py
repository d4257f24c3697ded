#!/usr/bin/env python3
"""Rehydration throughput of two rrstore binaries, interleaved.

    bench/replay_fresh.py STORE BEFORE_BIN AFTER_BIN ID[,ID...] [ROUNDS]

Each round runs `replay ID --verify --json --repetitions 2` once per binary
(alternating which goes first). "fresh" is repetition 1 (a normal replay:
the arena's pages are allocated while it is filled; reserve time included),
"warm" repetition 2 (the same arena again: decode and copy only). Prints
medians, min and max in GB/s (1e9 bytes per second).
"""
import json
import statistics
import subprocess
import sys

store, before, after, ids = sys.argv[1:5]
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 10
bins = {"before": before, "after": after}
print("load at start", " ".join(open("/proc/loadavg").read().split()[:3]))
for rid in ids.split(","):
    fresh = {b: [] for b in bins}
    warm = {b: [] for b in bins}
    for i in range(rounds):
        for b in (["before", "after"] if i % 2 == 0 else ["after", "before"]):
            out = subprocess.run(
                [bins[b], "--store", store, "replay", rid, "--verify", "--json", "--repetitions", "2"],
                capture_output=True, text=True, check=False).stdout
            t = json.loads(out)["timing"]
            n = t["rehydrate_bytes"]
            fresh[b].append(n / (t["reserve_ns"] + t["rehydrate_ns"][0]))
            warm[b].append(n / t["rehydrate_ns"][1])
    cells = [f"{b}: fresh {statistics.median(fresh[b]):.2f} ({min(fresh[b]):.2f}-{max(fresh[b]):.2f}), "
             f"warm {statistics.median(warm[b]):.2f}" for b in bins]
    print(f"{rid}  " + "; ".join(cells) + " GB/s")
print("load at end", " ".join(open("/proc/loadavg").read().split()[:3]))
