#!/usr/bin/env python3
"""Wall time of one recording's replay: native baseline vs two rrstore
binaries, many rounds, medians; for the small recordings whose ratio is
within the noise of a short run.

  bench/replay_rounds.py STORE ID DESCRIPTOR.json BEFORE AFTER [ROUNDS]
  bench/replay_rounds.py --back-to-back STORE ID DESCRIPTOR.json AFTER [ROUNDS]
  bench/replay_rounds.py --blocks STORE ID DESCRIPTOR.json BEFORE AFTER [ROUNDS] [RUNS]

Interleaved (default): each round runs native, before and after once, in a
rotating order, so slow phases of a shared machine hit all three alike.
--back-to-back: ROUNDS replays of AFTER in a row, then ROUNDS native in a
row, then both again with a 20 ms pause after each process.
--blocks: ROUNDS rounds (default 12); each runs native, before and after
RUNS times in a row each (default 10), in a rotating order, and only the
last RUNS - 2 runs of each block count. Consecutive runs of one binary are
its steady state (each pays for what the previous one left behind, such
as a killed runner's teardown, which interleaving hands to the next,
other, command), and the rotation spreads the machine's slow phases over
all three, as interleaving does. Needs the
native replayer built from bench/native-replay/native_replay.c (cc -O2 -o
/tmp/native-replay ... -ldl) or NATIVE=path. OMP_NUM_THREADS defaults to 2.
"""
import os
import statistics
import subprocess
import sys
import time

env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
native_bin = os.environ.get("NATIVE", "/tmp/native-replay")


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t0) * 1e3


def replay(binary, store, rid):
    return [binary, "--store", store, "replay", rid, "--verify"]


args = sys.argv[1:]
if args and args[0] == "--back-to-back":
    store, rid, desc, after = args[1:5]
    rounds = int(args[5]) if len(args) > 5 else 30
    for pause in (0.0, 0.02):
        med = {}
        for name, cmd in (("native", [native_bin, desc]), ("after", replay(after, store, rid))):
            times = []
            for _ in range(rounds):
                times.append(wall(cmd))
                time.sleep(pause)
            med[name] = statistics.median(times)
        print(f"pause {pause * 1e3:.0f} ms: native {med['native']:.2f} ms, after {med['after']:.2f} ms, "
              f"after/native {med['after'] / med['native']:.3f}")
elif args and args[0] == "--blocks":
    store, rid, desc, before, after = args[1:6]
    rounds = int(args[6]) if len(args) > 6 else 12
    runs = int(args[7]) if len(args) > 7 else 10
    cmds = [("native", [native_bin, desc]), ("before", replay(before, store, rid)),
            ("after", replay(after, store, rid))]
    times = {n: [] for n, _ in cmds}
    blocks = {n: [] for n, _ in cmds}
    for i in range(rounds):
        for n, c in cmds[i % 3:] + cmds[:i % 3]:
            block = [wall(c) for _ in range(runs)][2:]
            times[n] += block
            blocks[n].append(statistics.median(block))
    med = {n: statistics.median(v) for n, v in times.items()}
    per_round = [a / b for a, b in zip(blocks["after"], blocks["native"])]
    print(f"load {os.getloadavg()[0]:.2f}; {rounds} rounds of {runs} runs in a row: medians native "
          f"{med['native']:.2f} ms, before {med['before']:.2f} ms, after {med['after']:.2f} ms; "
          f"before/native {med['before'] / med['native']:.3f}, after/native "
          f"{med['after'] / med['native']:.3f}; after/native per round "
          f"{min(per_round):.3f}-{max(per_round):.3f}")
else:
    store, rid, desc, before, after = args[:5]
    rounds = int(args[5]) if len(args) > 5 else 40
    cmds = [("native", [native_bin, desc]), ("before", replay(before, store, rid)),
            ("after", replay(after, store, rid))]
    times = {n: [] for n, _ in cmds}
    for i in range(rounds):
        for n, c in cmds[i % 3:] + cmds[:i % 3]:
            times[n].append(wall(c))
    med = {n: statistics.median(v) for n, v in times.items()}
    print(f"load {os.getloadavg()[0]:.2f}; medians of {rounds} rounds: native {med['native']:.2f} ms, "
          f"before {med['before']:.2f} ms, after {med['after']:.2f} ms; before/native "
          f"{med['before'] / med['native']:.3f}, after/native {med['after'] / med['native']:.3f}")
