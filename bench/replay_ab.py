#!/usr/bin/env python3
"""bench/replay_ab.py: interleaved wall-time comparison of several commands.

    bench/replay_ab.py ROUNDS NAME=CMD [NAME=CMD ...]

Runs every command once per round, in a rotating order (so slow phases of a
shared machine hit all commands alike), after one warm-up round, and prints
median / mean / min wall time per command (ms) and the ratio of medians to
the first command. Exit status of each run must be 0. The load average is
printed before and after.
"""
import os, shlex, statistics, subprocess, sys, time

def main():
    rounds = int(sys.argv[1])
    cmds = [a.split("=", 1) for a in sys.argv[2:]]
    print("load before: %.2f %.2f %.2f" % os.getloadavg())
    times = {n: [] for n, _ in cmds}
    for r in range(rounds + 1):
        order = cmds[r % len(cmds):] + cmds[:r % len(cmds)]
        for name, cmd in order:
            t = time.perf_counter()
            p = subprocess.run(shlex.split(cmd), stdout=subprocess.DEVNULL)
            dt = (time.perf_counter() - t) * 1e3
            if p.returncode != 0:
                sys.exit(f"{name}: exit {p.returncode}")
            if r > 0:
                times[name].append(dt)
    print("load after: %.2f %.2f %.2f" % os.getloadavg())
    base = statistics.median(times[cmds[0][0]])
    for name, _ in cmds:
        v = times[name]
        m = statistics.median(v)
        print(f"{name:12s} median {m:8.1f}  mean {statistics.mean(v):8.1f}  min {min(v):8.1f}  ratio {m / base:5.2f}x  (n={len(v)})")

main()
