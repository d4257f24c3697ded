#!/usr/bin/env bash
# bench/ir_replay.sh RRSTORE [ROUNDS]
#
# Issue 41's goal: "a cached compiled image adds at most 5 ms to a replay
# against the same replay with an ahead-of-time image". One saxpy-like
# kernel (4096 floats) built ahead of time (recorded) and with
# -fopenmp-target-jit; the recording replayed with `--image` of its own
# ahead-of-time image and of the JIT build's IR, whose compiled image is in
# the store's cache after a warm-up run, and of that compiled image itself
# given as a native image (`compiled-as-aot`: the same image, no IR step),
# which isolates what the IR step costs; the recorded image also loads
# libomptarget and libLLVM (its NEEDED entries), which the compiled one
# does not. Interleaved (bench/replay_ab.py).
set -euo pipefail
RR=$1 ROUNDS=${2:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export RRSTORE_CONFIG=/dev/null
cat > "$W/saxpy.cpp" <<'CPP'
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 4096;
  float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) { x[i] = i * 0.25f; y[i] = 1.0f / (i + 1); }
#pragma omp target teams distribute parallel for map(to : x[0:n]) map(tofrom : y[0:n])
  for (int i = 0; i < n; i++) y[i] = 2.5f * x[i] + y[i];
  printf("%f\n", y[7]); fflush(stdout); _Exit(0);
}
CPP
bash "$HERE/ir_build.sh" "$W/b" "$W/saxpy.cpp"
REC=$(ls "$W"/b/rec/*.json)
S="$W/store"
"$RR" --store "$S" image add "$W/b/aot.image" --label aot >/dev/null
"$RR" --store "$S" image add "$W/b/ir.bc" --label ir >/dev/null
# Warm-up: compiles the IR once (the cache entry every later run hits).
"$RR" --store "$S" replay "$REC" --image ir | grep -E "compiled|VERIFIED"
COMPILED=$(ls "$S"/compiled/*/image | head -1)
cp "$COMPILED" "$W/compiled.so"
"$RR" --store "$S" image add "$W/compiled.so" --label compiled-as-aot >/dev/null
python3 "$HERE/replay_ab.py" "$ROUNDS" \
  "compiled-as-aot=$RR --store $S replay $REC --image compiled-as-aot" \
  "ir-cached=$RR --store $S replay $REC --image ir" \
  "aot=$RR --store $S replay $REC --image aot"
