#!/usr/bin/env bash
# `rrstore tune`'s search against the full grid (issue 41 item 5): does
# successive halving find the grid's best verified variant with at most
# half of the grid's kernel launches?
#
# A real offload program (a float kernel, per-element work, whose output
# does not depend on the thread count or the optimization level) is built
# ahead of time and with -fopenmp-target-jit from one source file, the
# first recorded with one host thread (patched libomptarget, as the tests
# do), the second's device IR extracted. The grid: --threads 1,2 x four
# compile variants of the IR (-O0, -O1, -O2, -O3) = 8 variants (the
# frontend already optimized the IR, so -O1..-O3 may compile to one image:
# a pick of another variant with the same image and launch is the same
# answer). Each pair
# runs `tune --full-grid` (every variant with R repetitions) and `tune`
# (halving), in alternating order, and prints for each: the variant
# chosen, kernel launches, replays and wall time; then whether halving
# chose the grid's best and, when not, how much slower the chosen variant
# was in the grid's own measurement (a tie within the grid's noise, or a
# miss), and whether this grid's best is the previous pair's grid's best
# (the grid against itself: how often the reference itself moves).
#
#   bench/tune_search.sh [PAIRS] [R]      (default 5 pairs, R = 16)
#   RR=path/to/rrstore bench/tune_search.sh ...   (default: a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-5}
reps=${2:-16}
if [ -z "${RR:-}" ]; then
  cargo build --release -p rrstore-cli -q
  RR=$PWD/${CARGO_TARGET_DIR:-target}/release/rrstore
fi
llvm=/usr/lib/llvm-22
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cat >"$t/fm.cpp" <<'EOF'
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 1 << 16;
  float *y = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) y[i] = i * 1e-3f;
#pragma omp target teams distribute parallel for map(tofrom : y[0:n])
  for (int i = 0; i < n; i++) {
    float x = y[i], acc = 0.0f;
    for (int k = 0; k < 600; k++) acc += x / (k + 1.5f);
    y[i] = acc;
  }
  printf("y[7]=%.9g\n", y[7]);
  fflush(stdout);
  _Exit(0);
}
EOF
flags=(-O2 -fopenmp -fopenmp-targets=x86_64-pc-linux-gnu)
"$llvm/bin/clang++" "${flags[@]}" "$t/fm.cpp" -o "$t/fm"
"$llvm/bin/clang++" "${flags[@]}" -fopenmp-target-jit -fuse-ld=lld \
  -Xlinker --device-compiler=-fuse-ld=lld "$t/fm.cpp" -o "$t/fm-jit"
mkdir -p "$t/rr"
python3 tests/fixtures/images/patch_rr.py "$llvm/lib/libomptarget.so.22.1" \
  "$t/rr/libomptarget.so.22.1" $((64 << 20)) >/dev/null
"$llvm/bin/llvm-objcopy" --dump-section=.llvm.offloading="$t/fm.offloading" "$t/fm-jit" /dev/null
"$llvm/bin/llvm-offload-binary" "$t/fm.offloading" --image=file="$t/fm.bc",triple=x86_64-pc-linux-gnu
s=$t/store
export RRSTORE_CONFIG=/dev/null
(cd "$t" && LD_LIBRARY_PATH="$t/rr:$llvm/lib" OMP_NUM_THREADS=1 "$RR" --store "$s" record -- ./fm >/dev/null)
id=$("$RR" --store "$s" ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"][:12])')
grid=("$id" --threads 1,2 --image "$t/fm.bc" --variant-cflags=-O0 --variant-cflags=-O1
  --variant-cflags=-O2 --variant-cflags=-O3 --json)
args=("${grid[@]}" --repetitions "$reps")
# Compile every variant once, outside the measurements (cached by content).
"$RR" --store "$s" tune "${grid[@]}" --repetitions 1 --full-grid >/dev/null
run() { # run OUT [--full-grid]: the JSON, and the wall time in OUT.wall
  local out=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  "$RR" --store "$s" tune "${args[@]}" "$@" >"$out"
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.2f\n", $2 - $1}' >"$out.wall"
}
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); R=$reps; $("$RR" --version | head -1)"
for p in $(seq 1 "$pairs"); do
  if [ $((p % 2)) = 1 ]; then
    run "$t/grid.json" --full-grid
    run "$t/halving.json"
  else
    run "$t/halving.json"
    run "$t/grid.json" --full-grid
  fi
  python3 - "$t/grid.json" "$t/halving.json" "$p" <<'EOF'
import json, sys
g, h = (json.load(open(f))["recordings"][0] for f in sys.argv[1:3])
wall = [open(f + ".wall").read().strip() for f in sys.argv[1:3]]
med = {t["variant"]: t["spread"]["median_ns"] for t in g["trials"] if t["verified"] and t["spread"]}
# Variants whose flags compile to the same image at the same launch are one.
same = {t["variant"]: (t["run"]["image"], t["run"]["launch"]) for t in g["trials"]}
name = lambda v: f'threads={g["variants"][v]["threads"]} [{g["variants"][v]["compile"]}]'
gb, hb = g["best"], h["best"]
if gb is None or hb is None:
    print(f"pair {sys.argv[3]}: no verified variant (grid {gb}, halving {hb})")
    sys.exit(0)
gv, hv = gb["variant"], hb["variant"]
if hv == gv:
    verdict = "SAME"
elif same.get(hv) == same.get(gv):
    verdict = "SAME image and launch"
else:
    verdict = f"other: {med[hv] / med[gv]:.3f}x the grid best's median in the grid"
# The grid against itself: the previous pair's grid best (same image and
# launch?), the noise floor of "finds the grid's best".
import os
prev = sys.argv[1] + ".prev"
if os.path.exists(prev):
    p = json.load(open(prev))
    verdict += " | grid vs previous grid: " + ("SAME" if p == list(same[gv]) else "other")
json.dump(list(same[gv]), open(prev, "w"))
print(f"pair {sys.argv[3]}: grid best {name(gv)} {med[gv]/1e6:.2f} ms, {g['launches']} launches, "
      f"{g['replays']} replays, {wall[0]} s | halving {name(hv)}, {h['launches']} launches, "
      f"{h['replays']} replays, {wall[1]} s | {verdict}")
EOF
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
