#!/usr/bin/env bash
# GPU check on a lent NVIDIA machine (issue 42): ~10 minutes including the
# machine's start-up, no network, no Rust toolchain, a carried stripped
# release binary. Build and carry (docs/gpu.md, "GPU check on real
# hardware"):
#   cargo build --release -p rrstore-cli && strip -o gpu-bin/rrstore target/release/rrstore
#   run: OUT=$OUT scripts/gpu-check.sh gpu-bin/rrstore      (carry gpu-bin)
# Cases, ordered so the first minute says the most: one small replay in the
# default mode (GPU child, sandbox, --timeout 600), with --sandbox off, with
# --timeout none (in process); then the sizes (4 KiB .. big 1 GiB),
# globals, pointers, relocation forced and auto, a hang (exit 13) and a wild
# store (exit 12), --device on each GPU, check --devices all (fleet lanes),
# the OpenMP kernels where a clang with offload is present, from their
# recorded images and from their IR compiled by rrstore, and the 1 GiB
# rehydration next to a plain pinned cuMemcpyHtoD (issue 43).
# Every step runs under `timeout`; the whole run stops starting steps after
# GPU_CHECK_BUDGET seconds (default 480). Outputs, and nothing else, under
# $OUT: summary.txt (one line per case), log.txt (everything printed),
# details.tar.gz (each step's output and JSON).
# Usage: scripts/gpu-check.sh [--dry-run] [path/to/rrstore]
#   --dry-run: no GPU, no nvcc: stub binaries prove that the script parses,
#   that a hanging step is killed by its timeout, and that the results are
#   packaged (replay/tests/gpu_check_dry_run.rs runs it).
# Exit status: 0 when every case passed, 1 otherwise, 2 when it cannot start.
set -uo pipefail

DRY=0
if [ "${1:-}" = --dry-run ]; then DRY=1; shift; fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT" || exit 2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rrstore-gpu-check.XXXXXX")
D="$WORK/details"
mkdir -p "$D"
SUMMARY="$OUT/summary.txt"
LOG="$OUT/log.txt"
: >"$SUMMARY"
: >"$LOG"
BUDGET=${GPU_CHECK_BUDGET:-480}
T0=$(date +%s)
FAIL=0
export RRSTORE_DIR="$WORK/store"

log() { echo "$*" | tee -a "$LOG"; }

finish() {
  local total=$(($(date +%s) - T0))
  log "== done in ${total} s; $(grep -c ' PASS' "$SUMMARY") passed, $(grep -c ' FAIL' "$SUMMARY") failed, $(grep -c ' SKIP' "$SUMMARY") skipped"
  echo "total ${total} s" >>"$SUMMARY"
  tar -czf "$OUT/details.tar.gz" -C "$WORK" details 2>>"$LOG"
  rm -rf "$WORK"
}
trap finish EXIT

# case NAME EXPECTED_RC LIMIT_S CMD...: run CMD under `timeout` (its output
# into details/NAME.txt), one summary line.
case_() {
  local name=$1 want=$2 limit=$3
  shift 3
  local now=$(($(date +%s) - T0))
  if [ "$now" -ge "$BUDGET" ]; then
    echo "$name SKIP (budget of ${BUDGET} s spent)" | tee -a "$SUMMARY" "$LOG"
    return 0
  fi
  local t=$(date +%s%N)
  timeout -k 5 "$limit" "$@" >"$D/$name.txt" 2>&1
  local rc=$?
  local ms=$((($(date +%s%N) - t) / 1000000))
  local verdict=PASS
  [ "$rc" = "$want" ] || { verdict=FAIL; FAIL=1; }
  local why=""
  [ "$rc" = 124 ] && why=" (killed by its ${limit} s timeout)"
  local last
  last=$(grep -E 'verified|VERIFIED|mismatch|MISMATCH|error|rrstore-gpu|gbps' "$D/$name.txt" | tail -1 | cut -c1-160)
  echo "$name $verdict rc=$rc want=$want ${ms} ms$why ${last}" | tee -a "$SUMMARY" "$LOG"
  cat "$D/$name.txt" >>"$LOG"
  return 0
}
skip() { echo "$1 SKIP ($2)" | tee -a "$SUMMARY" "$LOG"; }

if [ "$DRY" = 1 ]; then
  # Stubs: rrstore answers every command at once, except a replay asked to
  # hang (RRSTORE_STUB_HANG), which never ends; the recorder writes a file.
  BIN="$WORK/stub/rrstore"
  mkdir -p "$WORK/stub"
  cat >"$BIN" <<'STUB'
#!/usr/bin/env bash
case "$1" in
  import) echo '{"recordings":[{"id":"0123456789abcdef"}]}' ;;
  replay) [ -n "${RRSTORE_STUB_HANG:-}" ] && exec sleep 1000
          echo '{"verdict":"verified","timing":{"gpu_upload":{"bytes":4096,"elapsed_ns":1000,"busy_ns":500}}}'
          exit "${RRSTORE_STUB_RC:-0}" ;;
  *) echo "stub rrstore $*" ;;
esac
STUB
  chmod +x "$BIN"
  RECORDER="$WORK/stub/recorder"
  printf '#!/bin/sh\n[ "$1" = bandwidth ] && { echo "bytes=$2 gbps=25.0"; exit 0; }\nmkdir -p "$2" && echo stub >"$2/rec.json"\n' >"$RECORDER"
  chmod +x "$RECORDER"
  ARCH=sm_90
  NGPU=2
  log "== dry run: stub rrstore and recorder in $WORK/stub"
else
  BIN=$(readlink -f "${1:-$ROOT/target/release/rrstore}")
  [ -x "$BIN" ] || { log "gpu-check: no rrstore binary at $BIN (docs/gpu.md: build, strip, carry)"; exit 2; }
  command -v nvidia-smi >/dev/null || { log "gpu-check: nvidia-smi not found: no NVIDIA driver"; exit 2; }
  NVCC=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
  CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
  ARCH="sm_${CC}"
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  log "== GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1); $NGPU GPU(s); arch $ARCH"
  RECORDER="$WORK/recorder"
  if [ -z "$NVCC" ]; then
    skip build "no nvcc: the recordings cannot be made; only devices and the OpenMP part run"
  else
    case_ build 0 120 sh -c "'$NVCC' -cubin -arch=$ARCH -O3 -o '$WORK/kernels.cubin' '$ROOT/tests/gpu/kernels.cu' && '$NVCC' -O2 -o '$RECORDER' '$ROOT/tests/gpu/recorder.cu' -lcuda"
  fi
fi

case_ devices 0 60 "$BIN" devices

# Record CASE with the recorder and import it; its ID in $WORK/id-CASE.
record() {
  local c=$1 dir="$WORK/rec/$1"
  mkdir -p "$dir"
  [ -x "$RECORDER" ] || return 1
  timeout 60 "$RECORDER" "$WORK/kernels.cubin" "$dir" "$c" >>"$D/record.txt" 2>&1 || return 1
  timeout 60 "$BIN" import "$dir" --json 2>>"$D/record.txt" |
    sed -n 's/.*"id":"\{0,1\}[ ]*"\([0-9a-f]*\)".*/\1/p' | head -1 >"$WORK/id-$c"
  [ -s "$WORK/id-$c" ]
}
id() { cat "$WORK/id-$1"; }
# `replay ID ...`: a command `timeout` can run.
replay="$WORK/replay"
printf '#!/bin/sh\nID=$1; shift\nRRSTORE_GPU_STATS=1 exec "%s" replay "$ID" --backend cuda --verify --json "$@"\n' "$BIN" >"$replay"
chmod +x "$replay"

# The first minute: one small replay in each process mode.
if record saxpy; then
  S=$(id saxpy)
  case_ small-default 0 60 "$replay" "$S"
  case_ small-sandbox-off 0 60 "$replay" "$S" --sandbox off
  case_ small-in-process 0 60 "$replay" "$S" --timeout none
else
  skip small-default "no recording (recorder)"
fi

# Sizes (4 KiB, 1 MiB, 8 MiB saxpy, 16 MiB, 256 MiB, 8 MiB of a 4 GiB
# reservation, 1 GiB: issue 43's list), globals, pointers.
for c in size4k size1m size16m size256m bigglobal smem smem48 sentinel sparse ptrstruct big; do
  if record "$c"; then case_ "$c" 0 120 "$replay" "$(id "$c")" --repetitions 3; else skip "$c" "no recording"; fi
done
# Failure paths: a hang ends with exit 13 within its timeout, a wild store with 12.
[ "$DRY" = 1 ] && export RRSTORE_STUB_RC=13
if record spin; then case_ spin 13 40 "$replay" "$(id spin)" --timeout 2; else skip spin "no recording"; fi
[ "$DRY" = 1 ] && export RRSTORE_STUB_RC=12
if record wild; then case_ wild 12 60 "$replay" "$(id wild)"; else skip wild "no recording"; fi
unset RRSTORE_STUB_RC
if [ "$DRY" = 1 ]; then
  # Proves the step timeout: a replay that never ends is killed (rc 124).
  RRSTORE_STUB_HANG=1 case_ hang-killed 124 2 "$replay" "$(id saxpy)"
fi

# Relocation, forced and auto (auto: the recorded address when free).
for c in ptrstruct saxpy; do
  [ -s "$WORK/id-$c" ] || continue
  case_ "relocate-$c" 0 60 "$replay" "$(id "$c")" --placement relocate
  case_ "auto-$c" 0 60 "$replay" "$(id "$c")" --placement auto
done

# Each GPU, then the fleet lanes over all of them.
if [ -s "$WORK/id-saxpy" ]; then
  for ((g = 0; g < ${NGPU:-0}; g++)); do
    case_ "device-$g" 0 60 "$replay" "$(id saxpy)" --device "$g"
  done
  case_ check-devices-all 0 120 "$BIN" check --timeout 5 --devices all --json
fi

# OpenMP kernels recorded on the GPU (a clang with offload for $ARCH).
OMP_CC=$(command -v clang || for C in /usr/lib/llvm-*/bin/clang; do [ -x "$C" ] && echo "$C"; done | sort -V | tail -1)
if [ "$DRY" = 0 ] && [ -n "$OMP_CC" ] &&
  timeout 120 "$OMP_CC" -fopenmp --offload-arch="$ARCH" -O2 -o "$WORK/omp_kernels" "$ROOT/tests/gpu/omp_kernels.c" >"$D/omp-build.txt" 2>&1; then
  mkdir -p "$WORK/omp-rec"
  case_ omp-record 0 120 sh -c "cd '$WORK/omp-rec' && LIBOMPTARGET_RECORD=1 LIBOMPTARGET_RR_SAVE_OUTPUT=1 '$WORK/omp_kernels'"
  "$BIN" import "$WORK/omp-rec" --json >"$D/omp-import.json" 2>&1
  OMP_IDS=$(grep -o '"id": *"[0-9a-f]*"' "$D/omp-import.json" | grep -o '[0-9a-f]\{8,\}')
  for o in $OMP_IDS; do
    case_ "omp-$o" 0 60 "$replay" "$o" --repetitions 3
  done
  # Issue 41: the same kernels from their LLVM IR (the same source file, so
  # the same kernel names), compiled by rrstore for $ARCH (PTX for the
  # driver's JIT, or a cubin where ptxas is found) and replayed.
  if timeout 120 "$OMP_CC" -fopenmp --offload-arch="$ARCH" -O2 --offload-device-only -emit-llvm -c \
    -o "$WORK/omp_kernels.bc" "$ROOT/tests/gpu/omp_kernels.c" >"$D/omp-ir-build.txt" 2>&1; then
    for o in $OMP_IDS; do
      case_ "omp-ir-$o" 0 120 "$replay" "$o" --image "$WORK/omp_kernels.bc" --toolchain "$OMP_CC"
    done
  else
    skip omp-ir "the device IR did not build (details/omp-ir-build.txt)"
  fi
else
  skip omp "no clang with OpenMP offload for $ARCH"
fi

# Issue 43: the 1 GiB rehydration next to a plain pinned cuMemcpyHtoD.
if [ -s "$WORK/id-big" ] || [ "$DRY" = 1 ]; then
  case_ htod-pinned-1GiB 0 60 "$RECORDER" bandwidth $((1 << 30))
  grep -h 'gpu_upload\|rrstore-gpu' "$D/big.txt" 2>/dev/null | tail -2 | tee -a "$LOG"
fi

exit "$FAIL"
