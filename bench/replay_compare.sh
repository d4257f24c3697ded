#!/usr/bin/env bash
# bench/replay_compare.sh: native baseline vs two rrstore binaries (before,
# after), side by side in one run, on a few corpus recordings and the large
# corpus. One fresh store (imported with AFTER) serves both binaries.
#
#   bench/replay_compare.sh BEFORE_BIN AFTER_BIN [CORPUS_DIR] [LARGE_DIR]
#   env: RUNS (hyperfine runs, default 10), OMP_NUM_THREADS (default 2)
# Per recording: hyperfine -N (native, before, after in one invocation,
# medians; each command's runs are consecutive), then RUNS interleaved
# rounds (native, before, after in a rotating order, each round one run of
# each: slow phases of a shared machine hit all three alike; medians), the
# engine's phase timings (--json) of 5 interleaved replays per binary
# (medians) and one 5-repetition replay of AFTER (rehydration into a fresh
# arena = repetition 1, warm = best of 2-5).
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=$1 AFTER=$2
CORPUS=${3:-../shared/corpus/llvm22-host}
LARGE=${4:-/work/data/corpus/large}
RUNS=${RUNS:-10}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -o "$WORK/native-replay" bench/native-replay/native_replay.c -ldl
STORE=$WORK/store
"$AFTER" --store "$STORE" import "$CORPUS" >/dev/null
"$AFTER" --store "$STORE" import "$LARGE" >/dev/null
echo "host: $(nproc) CPUs; OMP_NUM_THREADS=$OMP_NUM_THREADS; runs=$RUNS; load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| recording | hyperfine native / before / after (ms) | interleaved native / before / after (ms) | before/native | after/native | reserve+rehydrate before / after (ms) | verify before / after (ms) | rehydrate fresh / warm, after (GB/s) | load |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for j in $(find "$LARGE" -name '*.json' | sort) "$CORPUS"/globals/*.json "$CORPUS"/saxpy/*.json "$CORPUS"/reduction/*.json; do
  rel=${j#"$CORPUS"/}; case $j in "$LARGE"/*) rel=large/${j#"$LARGE"/} ;; esac
  rel=${rel%%/__omp*}
  id=$("$AFTER" --store "$WORK/scratch" replay "$j" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["recording_id"])')
  "$AFTER" --store "$STORE" replay "$id" --verify >/dev/null
  hyperfine -N --warmup 2 --runs "$RUNS" --export-json "$WORK/h.json" \
    -n native "$WORK/native-replay $j" -n before "$BEFORE --store $STORE replay $id --verify" \
    -n after "$AFTER --store $STORE replay $id --verify" >/dev/null 2>&1
  python3 - "$WORK/h.json" "$BEFORE" "$AFTER" "$STORE" "$id" "$rel" "$WORK/native-replay" "$j" "$RUNS" <<'PY'
import json, os, statistics, subprocess, sys, time
h, before, after, store, rid, rel, native, desc, runs = sys.argv[1:]
hf = {x["command"]: x["median"] * 1e3 for x in json.load(open(h))["results"]}
cmds = [("native", [native, desc]),
        ("before", [before, "--store", store, "replay", rid, "--verify"]),
        ("after", [after, "--store", store, "replay", rid, "--verify"])]
wall = {n: [] for n, _ in cmds}
for i in range(int(runs)):
    for n, c in cmds[i % 3:] + cmds[:i % 3]:
        t0 = time.perf_counter()
        subprocess.run(c, stdout=subprocess.DEVNULL, check=True)
        wall[n].append((time.perf_counter() - t0) * 1e3)
r = {n: statistics.median(v) for n, v in wall.items()}
ph = {"before": [], "after": []}
for i in range(5):
    for name in (["before", "after"] if i % 2 == 0 else ["after", "before"]):
        b = before if name == "before" else after
        t = json.loads(subprocess.run([b, "--store", store, "replay", rid, "--verify", "--json"],
                                      capture_output=True, text=True).stdout)["timing"]
        ph[name].append(((t["reserve_ns"] + t["rehydrate_ns"][0]) / 1e6, t["verify_ns"] / 1e6))
med = {k: [statistics.median(c) for c in zip(*v)] for k, v in ph.items()}
v = json.loads(subprocess.run([after, "--store", store, "replay", rid, "--verify", "--repetitions", "5", "--json"],
                              capture_output=True, text=True).stdout)
t = v["timing"]; nb = t["rehydrate_bytes"]
fresh, warm = nb / t["rehydrate_ns"][0], nb / min(t["rehydrate_ns"][1:])
print(f"| {rel} | {hf['native']:.1f} / {hf['before']:.1f} / {hf['after']:.1f} | {r['native']:.1f} / {r['before']:.1f} / {r['after']:.1f} | {r['before']/r['native']:.2f}x | "
      f"**{r['after']/r['native']:.2f}x** | {med['before'][0]:.1f} / {med['after'][0]:.1f} | "
      f"{med['before'][1]:.1f} / {med['after'][1]:.1f} | {fresh:.2f} / {warm:.2f} | {os.getloadavg()[0]:.2f} |")
PY
done
echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
