#!/usr/bin/env bash
# bench/ir_build.sh DIR SOURCE.cpp [JIT_EXTRA_FLAGS...]
#
# Shared by the IR benchmarks: builds SOURCE (copied into DIR/src, kept in
# place so both builds name the same kernels) ahead of time and with
# -fopenmp-target-jit, records the ahead-of-time build with a patched copy
# of LLVM 22's libomptarget (tests/fixtures/images/patch_rr.py), and
# extracts the JIT build's host IR. Leaves DIR/rec/*.json, DIR/aot.image
# (the recorded image) and DIR/ir.bc.
set -euo pipefail
DIR=$1 SRC=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
LLVM=/usr/lib/llvm-22
mkdir -p "$DIR/src" "$DIR/lib" "$DIR/rec"
cp "$SRC" "$DIR/src/k.cpp"
python3 "$HERE/../tests/fixtures/images/patch_rr.py" "$LLVM/lib/libomptarget.so.22.1" \
  "$DIR/lib/libomptarget.so.22.1" $((64 << 20)) >/dev/null
"$LLVM/bin/clang++" -O2 -fopenmp -fopenmp-targets=x86_64-pc-linux-gnu ${AOT_FLAGS:-} \
  "$DIR/src/k.cpp" -o "$DIR/aot"
"$LLVM/bin/clang++" -O2 -fopenmp -fopenmp-targets=x86_64-pc-linux-gnu "$@" \
  -fopenmp-target-jit -fuse-ld=lld -Xlinker --device-compiler=-fuse-ld=lld \
  "$DIR/src/k.cpp" -o "$DIR/jit"
(cd "$DIR/rec" && LD_LIBRARY_PATH="$DIR/lib:$LLVM/lib" LIBOMPTARGET_RECORD=1 \
  LIBOMPTARGET_RR_SAVE_OUTPUT=1 "$DIR/aot" >/dev/null)
cp "$DIR"/rec/*.image "$DIR/aot.image"
"$LLVM/bin/llvm-objcopy" --dump-section=.llvm.offloading="$DIR/jit.off" "$DIR/jit" /dev/null
"$LLVM/bin/llvm-offload-binary" "$DIR/jit.off" --image=file="$DIR/ir.bc",triple=x86_64-pc-linux-gnu
