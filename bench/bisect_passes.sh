#!/usr/bin/env bash
# bench/bisect_passes.sh RRSTORE
#
# Issue 41's goals for `bisect --passes`: at most ceil(log2(passes)) + 2
# compiles, and at most 0.5x the wall time of the loop a compiler engineer
# would script by hand on the same kernel: compile the IR with
# -opt-bisect-limit=N for N = 0, 1, 2, ... (clang, as rrstore compiles it),
# replay each image with `rrstore replay --image`, and stop at the first N
# whose output differs from N = 0's. The kernel: a float sum compiled with
# -ffast-math whose JIT IR keeps clang's passes for later
# (-Xclang -disable-llvm-passes), as cli/tests/bisect_passes.rs.
set -euo pipefail
RR=$1
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export RRSTORE_CONFIG=/dev/null
LLVM=/usr/lib/llvm-22
cat > "$W/sum.cpp" <<'CPP'
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 1 << 16;
  float *x = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) x[i] = 1.0f / (1 + (i % 977)) + (i % 7) * 1e4f;
  float s = 0;
#pragma omp target map(to : x[0:n]) map(tofrom : s)
  { float acc = 0; for (int i = 0; i < n; i++) acc += x[i]; s = acc; }
  printf("%.9g\n", s); fflush(stdout); _Exit(0);
}
CPP
AOT_FLAGS=-ffast-math bash "$HERE/ir_build.sh" "$W/b" "$W/sum.cpp" -ffast-math -Xclang -disable-llvm-passes
REC=$(ls "$W"/b/rec/*.json)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# rrstore, from a store with the recording and an empty compile cache.
"$RR" --store "$W/s1" import "$W/b/rec" >/dev/null
ID=$("$RR" --store "$W/s1" ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"][:12])')
t0=$(date +%s%N)
"$RR" --store "$W/s1" bisect "$ID" --passes --image "$W/b/ir.bc" --json > "$W/bisect.json"
t1=$(date +%s%N)
python3 - "$W/bisect.json" $(( (t1 - t0) / 1000000 )) <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1])); ms = int(sys.argv[2])
p = r["passes"]; c = r["culprit"]
print(f"rrstore bisect --passes: {ms} ms, {r['compile_steps']} compiles (bound ceil(log2({p}))+2 = {math.ceil(math.log2(p)) + 2}), "
      f"{r['replays']} replays; culprit pass {c['number']} {c['name']}")
open("/tmp/rr-bisect-culprit", "w").write(str(c["number"]))
PY
# The hand-written loop.
"$RR" --store "$W/s2" import "$W/b/rec" >/dev/null
t0=$(date +%s%N)
ref="" n=0
while :; do
  "$LLVM/bin/clang" -O2 -fPIC -shared -mllvm -opt-bisect-limit=$n -x ir "$W/b/ir.bc" \
    -o "$W/img$n.so" -L"$LLVM/lib" -lomp 2>/dev/null
  out=$("$RR" --store "$W/s2" replay "$ID" --image "$W/img$n.so" --no-verify --json 2>/dev/null \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["output_blake3"])')
  if [ $n = 0 ]; then ref=$out; elif [ "$out" != "$ref" ]; then break; fi
  n=$((n + 1))
done
t1=$(date +%s%N)
echo "hand loop: $(( (t1 - t0) / 1000000 )) ms, $((n + 1)) compiles and replays; first differing limit $n (rrstore: $(cat /tmp/rr-bisect-culprit))"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
