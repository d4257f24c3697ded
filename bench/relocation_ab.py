#!/usr/bin/env python3
"""Recorded vs relocated placement of one recording, interleaved (issue 19).

    bench/relocation_ab.py RRSTORE_BIN STORE ID [ROUNDS]

Each round runs `replay ID --verify --json --repetitions 2` with
`--placement recorded` and with `--placement relocate` (alternating which
goes first). Prints medians (min-max) in ms of: fresh rehydration
(reserve + repetition 1: the arena's pages allocated while filled), warm
rehydration (repetition 2: decode, copy and scan only), the verify pass
(relocated: the back-translation included) and the wall time, and the
relocated/recorded ratio of the medians.
"""
import json
import statistics
import subprocess
import sys

rr, store, rid = sys.argv[1:4]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 20
modes = ["recorded", "relocate"]
keys = ["fresh", "warm", "verify", "wall"]
got = {m: {k: [] for k in keys} for m in modes}
print("load at start", " ".join(open("/proc/loadavg").read().split()[:3]))
for i in range(rounds):
    for m in (modes if i % 2 == 0 else modes[::-1]):
        out = subprocess.run(
            [rr, "--store", store, "replay", rid, "--verify", "--json",
             "--repetitions", "2", "--placement", m],
            capture_output=True, text=True, check=True).stdout
        r = json.loads(out)
        assert r["verdict"] == "verified", r
        assert r["placement"]["mode"] == ("recorded" if m == "recorded" else "relocated")
        t = r["timing"]
        got[m]["fresh"].append((t["reserve_ns"] + t["rehydrate_ns"][0]) / 1e6)
        got[m]["warm"].append(t["rehydrate_ns"][1] / 1e6)
        got[m]["verify"].append(t["verify_ns"] / 1e6)
        got[m]["wall"].append(t["wall_ns"] / 1e6)
        if m == "relocate":
            p = r["placement"]
            rebased = p["rebased_pointers"]
print(f"{rid}: {rounds} rounds, rehydrate path {t['rehydrate_path']}, "
      f"{t['rehydrate_bytes']} bytes, relocated: {rebased} stored pointers rebased")
for k in keys:
    med = {m: statistics.median(got[m][k]) for m in modes}
    cells = [f"{m} {med[m]:.2f} ({min(got[m][k]):.2f}-{max(got[m][k]):.2f})" for m in modes]
    print(f"  {k:6} " + "; ".join(cells) + f" ms; ratio {med['relocate'] / med['recorded']:.3f}")
print("load at end", " ".join(open("/proc/loadavg").read().split()[:3]))
