#!/usr/bin/env python3
"""Rehydration of a 64 MiB recording into fresh arenas, consecutive replays
(issue 24): per replay the reported GB/s and what the kernel did meanwhile.

    bench/rehydrate_consecutive.py AFTER_BIN [BEFORE_BIN] [options]

      --recording PATH   an LLVM recording's .json (default: the first of
                         /work/data/corpus/large, a 64 MiB arena)
      --replays N        consecutive replays per block (default 10)
      --rounds R         blocks per binary (default 2; with two binaries
                         the blocks run before, after, after, before, ...)
      --pause S          seconds between replays (default 0: back to back)
      --pool PAGES       one binary, two ways: blocks "no-pool" run with
                         vm.nr_hugepages=0, blocks "pool" with PAGES huge
                         pages reserved (as root; the arena's interior then
                         comes from the pool, docs/replay.md), alternating
                         as two binaries do; after the pool is reserved,
                         one replay that is not counted touches it first
      --cache SIZE       one binary, two ways, as --pool: blocks "fresh" run
                         without an arena cache, blocks "cache" with
                         `arena_cache = SIZE` (a configuration file named by
                         RRSTORE_CONFIG; slots in a private directory on
                         /dev/shm, RRSTORE_ARENA_CACHE_DIR; docs/replay.md),
                         after one replay that is not counted made its slot
      --preload-ab       one binary, two ways: blocks "preload" run as
                         rrstore does by default, blocks "no-preload" with
                         RRSTORE_HOST_PRELOAD=off (the runner loads the
                         runtime after the fill instead of during it);
                         with --cache, both with the arena cache

Each replay is `BIN --store S replay ID --verify --json` (one repetition:
the arena is fresh), started as soon as the previous one returned, and
recorded with:
  * GB/s: `rehydrate_bytes_per_s` of the replay's JSON (the runner's fill,
    from its first fill thread's start); the summary adds the reservation's
    and the whole replay's wall time (`timing.reserve_ns`, `wall_ns`: a
    held arena builds its page tables in the reservation) and which memory
    the arena was (`timing.arena_memory`);
  * the runner's own figures when the binary has the fill trace
    (`RRSTORE_FILL_TRACE`, replay/src/backend/host/fill_trace.rs): CPU time
    of the fill threads (summed), their time waiting for a CPU, the latest
    thread start after the fill request, their page faults, how much of the
    arena got huge pages, whether the runtime preload was still running;
  * /proc/vmstat deltas around the replay (system-wide: other processes
    count too): thp_fault_alloc, thp_fault_fallback, compact_stall,
    compact_fail, thp_collapse_alloc, pgfault, pgmajfault, and file pages
    read back in (workingset_refault_file);
  * `perf stat` software counters of the replay process tree when perf
    works (task-clock, page-faults, context switches);
  * the previous runner: whether it still existed, and its anonymous
    resident memory, right after its replay returned (a runner frees its
    arena as it tears down).
CPU time and fault counts do not depend on the machine's load; wall time
and GB/s do. Prints each block's per-replay rows and figures, then per
binary: all figures, median, min, and how many fell below 1.5 GB/s.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

VMSTAT = ["thp_fault_alloc", "thp_fault_fallback", "compact_stall", "compact_fail",
          "thp_collapse_alloc", "pgfault", "pgmajfault", "workingset_refault_file"]
PERF_EVENTS = "task-clock,page-faults,major-faults,context-switches,cpu-migrations"


def vmstat():
    out = {}
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            out[k] = int(v)
    return out


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def perf_works():
    if not shutil.which("perf"):
        return False
    r = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock", "true"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "task-clock" in r.stderr


def runner_left(pid):
    """What is left of runner `pid`: None (gone) or its RssAnon in kB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            st = dict(l.split(":", 1) for l in f if ":" in l)
    except OSError:
        return None
    anon = st.get("RssAnon", "0 kB").split()[0]
    return int(anon) if anon.isdigit() else 0


def replay(binary, store, rid, trace, perf, tmp, extra_env=None):
    env = dict(os.environ, RRSTORE_FILL_TRACE=trace, **(extra_env or {}))
    cmd = [binary, "--store", store, "replay", rid, "--verify", "--json"]
    pfile = os.path.join(tmp, "perf.csv")
    if perf:
        cmd = ["perf", "stat", "-x,", "-e", PERF_EVENTS, "-o", pfile, "--"] + cmd
    before_lines = len(open(trace).readlines()) if os.path.exists(trace) else 0
    v0 = vmstat()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    v1 = vmstat()
    lines = open(trace).readlines() if os.path.exists(trace) else []
    fill = json.loads(lines[-1]) if len(lines) > before_lines else None
    left = runner_left(fill["pid"]) if fill else None
    try:
        rep = json.loads(out.stdout)
    except json.JSONDecodeError:
        sys.exit(f"{binary}: replay failed (exit {out.returncode}): {out.stderr.strip()[:500]}")
    counters = {}
    if perf and os.path.exists(pfile):
        for line in open(pfile):
            f = line.strip().split(",")
            if len(f) > 2 and f[0] and f[0][0].isdigit():
                counters[f[2]] = float(f[0])
    return {
        "gbs": (rep.get("rehydrate_bytes_per_s") or 0) / 1e9,
        "path": rep["timing"].get("rehydrate_path"),
        "fill_ms": rep["timing"]["rehydrate_ns"][0] / 1e6 if rep["timing"]["rehydrate_ns"] else 0,
        "verdict": rep.get("verdict"),
        "reserve_ms": rep["timing"]["reserve_ns"] / 1e6,
        "wall_ms": rep["timing"]["wall_ns"] / 1e6,
        "memory": rep["timing"].get("arena_memory"),
        "vm": {k: v1.get(k, 0) - v0.get(k, 0) for k in VMSTAT},
        "perf": counters,
        "fill": fill,
        "left": left,
    }


def row(i, r):
    f = r["fill"]
    cells = [f"{i:>2}", f"{r['gbs']:5.2f}", f"{r['fill_ms']:6.1f}"]
    if f:
        th = f["threads"]
        cells += [f"{sum(t['cpu_ns'] for t in th) / 1e6:6.1f}",
                  f"{sum(t['runq_ns'] for t in th) / 1e6:6.1f}",
                  f"{max(t['start_ns'] for t in th) / 1e6:5.1f}",
                  f"{sum(t['minflt'] for t in th):6d}",
                  f"{(f['anon_huge_bytes'] + f.get('pool_bytes', 0)) >> 20:4d}/{f['arena_bytes'] >> 20}",
                  "yes" if f["preloading"] else "no "]
    else:
        cells += ["     -", "     -", "    -", "     -", "    -", "  -"]
    vm = r["vm"]
    cells += [f"{vm['thp_fault_alloc']:4d}", f"{vm['thp_fault_fallback']:3d}",
              f"{vm['compact_stall']:3d}/{vm['compact_fail']}", f"{vm['pgfault']:7d}",
              f"{vm['pgmajfault']:3d}", f"{vm['workingset_refault_file']:5d}"]
    p = r["perf"]
    cells += [f"{p['task-clock']:6.1f}" if "task-clock" in p else "     -",
              f"{int(p['page-faults']):6d}" if "page-faults" in p else "     -"]
    cells.append("-" if r["prev_left"] is ... else
                 ("gone" if r["prev_left"] is None else f"{r['prev_left']} kB"))
    return "  ".join(cells)


HEADER = ("rep  GB/s  fill   fillcpu  runq  start  minflt  huge   pre   "
          "thp  fb  stall  pgfault  maj  refault  task   faults  prev runner\n"
          "           ms     ms      ms    ms            MiB         "
          "                                         ms")


def set_pool(pages):
    """Reserve `pages` huge pages (vm.nr_hugepages), as root."""
    with open("/proc/sys/vm/nr_hugepages", "w") as f:
        f.write(str(pages))
    with open("/proc/sys/vm/nr_hugepages") as f:
        got = int(f.read())
    if got != pages:
        sys.exit(f"vm.nr_hugepages is {got}, not {pages}: not enough free memory?")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("after")
    ap.add_argument("before", nargs="?")
    ap.add_argument("--recording")
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--pause", type=float, default=0.0)
    ap.add_argument("--pool", type=int)
    ap.add_argument("--cache")
    ap.add_argument("--preload-ab", action="store_true")
    a = ap.parse_args()
    rec = a.recording or sorted(glob.glob("/work/data/corpus/large/*/*.json"))[0]
    bins = {"after": os.path.abspath(a.after)}
    if a.before:
        bins = {"before": os.path.abspath(a.before), **bins}
    if a.pool:
        bins = {"no-pool": bins["after"], "pool": bins["after"]}
    if a.cache and not a.preload_ab:
        bins = {"fresh": bins["after"], "cache": bins["after"]}
    if a.preload_ab:
        bins = {"preload": bins["after"], "no-preload": bins["after"]}
    perf = perf_works()
    tmp = tempfile.mkdtemp(prefix="rehydrate-bench-")
    envs = {b: {"RRSTORE_CONFIG": os.path.join(tmp, "no-config.toml")} for b in bins}
    if a.cache:
        cache_dir = tempfile.mkdtemp(prefix="rehydrate-bench-", dir="/dev/shm")
        conf = os.path.join(tmp, "cache.toml")
        with open(conf, "w") as f:
            f.write(f'arena_cache = "{a.cache}"\n')
        cached = {"RRSTORE_CONFIG": conf, "RRSTORE_ARENA_CACHE_DIR": cache_dir}
        for b in (bins if a.preload_ab else ["cache"]):
            envs[b] = dict(cached)
    if a.preload_ab:
        envs["no-preload"]["RRSTORE_HOST_PRELOAD"] = "off"
    try:
        store = os.path.join(tmp, "store")
        first = next(iter(bins.values()))
        subprocess.run([first, "--store", store, "import", os.path.dirname(rec)],
                       check=True, stdout=subprocess.DEVNULL)
        rid = json.loads(subprocess.run([first, "--store", store, "replay", rec, "--json"],
                                        capture_output=True, text=True).stdout)["recording_id"]
        print(f"recording {rec} (id {rid}); {os.cpu_count()} CPUs; perf: {'yes' if perf else 'no'}")
        for k in ("enabled", "defrag"):
            p = f"/sys/kernel/mm/transparent_hugepage/{k}"
            if os.path.exists(p):
                print(f"THP {k}: {open(p).read().strip()}")
        order = list(bins)
        blocks = []
        for r in range(a.rounds):
            blocks += order if r % 2 == 0 else order[::-1]
        results = {b: [] for b in bins}
        for b in bins:  # page cache warm (and the cache's slot made), not counted
            replay(bins[b], store, rid, os.path.join(tmp, f"{b}.trace"), False, tmp, envs[b])
        for n, b in enumerate(blocks):
            trace = os.path.join(tmp, f"{b}.trace")
            if a.pool:
                set_pool(a.pool if b == "pool" else 0)
                if b == "pool":  # the pool's first touch, not counted
                    replay(bins[b], store, rid, trace, False, tmp, envs[b])
            print(f"\n== block {n + 1}: {b} ({bins[b]}), load {load()}")
            print(HEADER)
            prev_left = ...
            rows = []
            for i in range(a.replays):
                r = replay(bins[b], store, rid, trace, perf, tmp, envs[b])
                r["prev_left"] = prev_left
                prev_left = r["left"]
                rows.append(r)
                print(row(i + 1, r), flush=True)
                if a.pause:
                    time.sleep(a.pause)
            g = [r["gbs"] for r in rows]
            print(f"   {b}: " + " ".join(f"{x:.2f}" for x in g)
                  + f"  median {statistics.median(g):.2f} min {min(g):.2f} GB/s; load {load()}")
            results[b] += rows
        print("\n== summary (GB/s of every replay, in order)")
        for b, rows in results.items():
            g = [r["gbs"] for r in rows]
            cpu = [sum(t["cpu_ns"] for t in r["fill"]["threads"]) / 1e6 for r in rows if r["fill"]]
            line = (f"{b:>6}: median {statistics.median(g):.2f}  min {min(g):.2f}  "
                    f"below 1.5: {sum(x < 1.5 for x in g)} of {len(g)}")
            if cpu:
                line += f"; fill CPU ms median {statistics.median(cpu):.1f} max {max(cpu):.1f}"
            line += (f"; reserve ms median {statistics.median(r['reserve_ms'] for r in rows):.1f}"
                     f", replay wall ms median {statistics.median(r['wall_ms'] for r in rows):.1f}"
                     f"; arena memory {sorted(set(str(r['memory']) for r in rows))}")
            print(line)
            print("        " + " ".join(f"{x:.2f}" for x in g))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if a.cache:
            shutil.rmtree(cache_dir, ignore_errors=True)
        if a.pool:
            set_pool(a.pool)


if __name__ == "__main__":
    main()
