#!/usr/bin/env bash
# GPU check on real hardware (NVIDIA): records real CUDA kernels with the
# recorder in tests/gpu/ (hash-named LLVM layout, VMM arena at a fixed
# address, pointer + scalar arguments, __device__ globals, dynamic shared
# memory above 48 KiB and exactly 48 KiB next to static shared memory, a
# 2 MiB global, argument 0 all ones, 8 MiB used of a 4 GiB reservation the
# driver placed, data reached through pointers stored in a struct and in a
# __device__ pointer global, one 1 GiB snapshot), imports them into a fresh store and
# replays each with `rrstore replay --backend cuda --verify --repetitions 5`;
# a kernel that never ends must exit 13 under --timeout 2 and a wild store
# must end in an error, not a hang. Where clang can build OpenMP offload
# code for the GPU, real OpenMP kernels (tests/gpu/omp_kernels.c) are
# recorded with LIBOMPTARGET_RECORD=1 and replayed with --verify too. With
# more than one GPU (nvidia-smi -L) and an rrstore that has --device, saxpy
# is replayed on each of them. Prints one summary line per recording and the
# H2D rehydration bandwidth next to a plain pinned cuMemcpyHtoD of the same
# size. Last, `check --devices all` over every recording, with the lookahead
# (the next recording prepared while a kernel runs) and without
# (RRSTORE_LOOKAHEAD=0), against one device at a time: the same verdicts in
# the same order, each lane's lookahead counts, and the wall times side by
# side. With $OUT set (a directory), the check reports, their stderr and a
# summary are written there too.
#
# Usage: scripts/gpu-check.sh [path/to/rrstore]   (default target/release/rrstore)
# Needs: an NVIDIA GPU and driver, nvcc, python3. Nothing from the network.
# Exit status: 0 when every recording verified, 1 otherwise.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(readlink -f "${1:-$ROOT/target/release/rrstore}")
[ -x "$BIN" ] || { echo "gpu-check: no rrstore binary at $BIN (build: cargo build --release -p rrstore-cli)"; exit 2; }
NVCC=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
[ -n "$NVCC" ] || { echo "gpu-check: nvcc not found (install the CUDA toolkit)"; exit 2; }
command -v nvidia-smi >/dev/null || { echo "gpu-check: nvidia-smi not found: no NVIDIA driver"; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rrstore-gpu-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export RRSTORE_DIR="$WORK/store"
T0=$(date +%s)

CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
ARCH="sm_${CC}"
echo "== GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1); arch $ARCH; $("$NVCC" --version | tail -1)"
"$NVCC" -cubin -arch="$ARCH" -O3 -o "$WORK/kernels.cubin" "$ROOT/tests/gpu/kernels.cu" || exit 1
"$NVCC" -O2 -o "$WORK/recorder" "$ROOT/tests/gpu/recorder.cu" -lcuda || exit 1
python3 - "$WORK/kernels.cubin" <<'PY'
import sys
h = open(sys.argv[1], "rb").read(64)
print(f"== cubin ELF: abi_version={h[8]} e_machine={int.from_bytes(h[18:20],'little')} e_flags={int.from_bytes(h[48:52],'little'):#x}")
PY

echo "== rrstore devices"
"$BIN" devices

# Rename rec.* to <KernelHash>_<LaunchConfigHash>.* (xxh3_64, as LLVM 23+ names them).
rename_hashed() {
  python3 - "$1" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
desc = json.load(open(os.path.join(d, "rec.json")))
try:
    import xxhash
except ImportError:
    print("gpu-check: python xxhash missing: keeping the stem 'rec' (rrstore warns)")
    sys.exit(0)
name = desc["Name"]
if ".content." in name:
    name = name.split(".content.", 1)[1]
else:
    for m in (".llvm.", ".__uniq."):
        name = name.split(m, 1)[0]
k = xxhash.xxh3_64_intdigest(name.encode())
c = xxhash.xxh3_64_intdigest(struct.pack("<QQQ", desc["NumTeams"], desc["NumThreads"], desc["SharedMemorySize"]))
for f in os.listdir(d):
    if f.startswith("rec."):
        os.rename(os.path.join(d, f), os.path.join(d, f"{k}_{c}" + f[3:]))
PY
}

FAIL=0
BIG_BYTES=0
BIG_REHYDRATE=""
for CASE in saxpy smem big smem48 bigglobal sentinel sparse ptrstruct spin wild; do
  DIR="$WORK/rec/$CASE"
  mkdir -p "$DIR"
  "$WORK/recorder" "$WORK/kernels.cubin" "$DIR" "$CASE" || { echo "gpu-check: recorder failed on $CASE"; FAIL=1; continue; }
  rename_hashed "$DIR"
  ID=$("$BIN" import "$DIR" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["recordings"][0]["id"])') \
    || { echo "gpu-check: import failed on $CASE"; FAIL=1; continue; }
  EXPECT=$(cat "$DIR.expect" 2>/dev/null || echo verified)
  EXTRA=()
  [ "$EXPECT" = timeout ] && EXTRA=(--timeout 2)
  T_CASE=$(date +%s)
  RRSTORE_GPU_STATS=1 timeout 120 "$BIN" replay "$ID" --backend cuda --verify --repetitions 5 \
    "${EXTRA[@]}" --json >"$WORK/replay-$CASE.json" 2>"$WORK/replay-$CASE.err"
  RC=$?
  T_CASE=$(( $(date +%s) - T_CASE ))
  case "$EXPECT" in
    verified) [ "$RC" = 0 ] || FAIL=1 ;;
    # --timeout 2 on a kernel that never ends: exit 13, promptly.
    timeout) { [ "$RC" = 13 ] && [ "$T_CASE" -le 30 ]; } || { echo "gpu-check: $CASE: expected exit 13 within 30 s, got rc=$RC after $T_CASE s"; FAIL=1; } ;;
    # A wild store: exit 12 (the kernel faulted), not a hang (124 = killed by timeout 120).
    fault) [ "$RC" = 12 ] || { echo "gpu-check: $CASE: expected exit 12, got rc=$RC after $T_CASE s"; FAIL=1; } ;;
  esac
  echo "$CASE: expected $EXPECT, rc=$RC in $T_CASE s"
  if [ "$RC" != 0 ]; then "$BIN" history "$ID" 2>&1 | tail -2 | sed 's/^/       history: /'; fi
  python3 - "$CASE" "$RC" "$WORK/replay-$CASE.json" "$WORK/replay-$CASE.err" <<'PY'
import json, sys
case, rc, jp, ep = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
err = open(ep).read()
try:
    r = json.load(open(jp))
except Exception:
    print(f"{case:6} rc={rc} no JSON report; stderr:\n{err}")
    sys.exit(0)
t = r.get("timing", {})
bps = r.get("rehydrate_bytes_per_s") or 0
kmin = (r.get("kernel_min_ns") or 0) / 1e6
kmed = (r.get("kernel_median_ns") or 0) / 1e6
print(f"{case:6} {r.get('verdict')!s:9} rc={rc} kernel={r.get('kernel')} snapshot={r.get('arena_size')} B "
      f"teams={r.get('num_teams')} threads={r.get('num_threads')} kernel min {kmin:.3f} ms median {kmed:.3f} ms "
      f"rehydrate best {bps/1e9:.2f} GB/s load_image {t.get('load_image_ns',0)/1e6:.1f} ms "
      f"verify {t.get('verify_ns',0)/1e6:.1f} ms wall {t.get('wall_ns',0)/1e6:.1f} ms")
if r.get("error") or r.get("mismatch") or rc != "0":
    print(f"       error: {r.get('error')} mismatch: {r.get('mismatch')}")
    print("       stderr: " + err.strip().replace("\n", "\n       "))
for line in err.splitlines():
    if line.startswith("rrstore-gpu:"):
        print("       " + line)
if case == "big":
    open(jp + ".bps", "w").write(f"{r.get('arena_size')} {bps}")
PY
  if [ -f "$WORK/replay-$CASE.json.bps" ]; then
    read -r BIG_BYTES BIG_REHYDRATE <"$WORK/replay-$CASE.json.bps"
  fi
done

echo "== relocation (issue 19): the pointer-chasing and plain recordings relocated on the GPU"
for CASE in ptrstruct saxpy sparse; do
  [ -d "$WORK/rec/$CASE" ] || continue
  RID=$("$BIN" import "$WORK/rec/$CASE" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["recordings"][0]["id"])') || continue
  timeout 120 "$BIN" replay "$RID" --backend cuda --verify --placement relocate --json >"$WORK/reloc-$CASE.json" 2>"$WORK/reloc-$CASE.err"
  RC=$?
  echo "$CASE relocated: rc=$RC $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); p=r.get("placement") or {}; print(r.get("verdict"), p.get("mode"), hex(p.get("address") or 0), "rebased", p.get("rebased_pointers"), "args", p.get("rebased_args"), "globals", p.get("rebased_globals"))' "$WORK/reloc-$CASE.json" 2>/dev/null || head -2 "$WORK/reloc-$CASE.err")"
  [ "$RC" = 0 ] || FAIL=1
done

echo "== auto backend and target checks"
SAXPY_ID=$("$BIN" import "$WORK/rec/saxpy" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["recordings"][0]["id"])')
"$BIN" replay "$SAXPY_ID" --backend auto >"$WORK/auto.txt" 2>&1; RC=$?
echo "auto backend on the saxpy recording: rc=$RC ($(grep -E 'backend|VERIFIED|MISMATCH|error' "$WORK/auto.txt" | head -2 | tr '\n' ' '))"
[ "$RC" = 0 ] || FAIL=1
"$BIN" replay "$SAXPY_ID" --backend host >"$WORK/host.txt" 2>&1; RC=$?
echo "cubin on the host backend: rc=$RC (expected 9): $(head -1 "$WORK/host.txt")"
[ "$RC" = 9 ] || FAIL=1

# Every GPU of the machine, when it has more than one and rrstore has --device.
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${NGPU:-0}" -gt 1 ]; then
  if "$BIN" replay --help 2>&1 | grep -q -- '--device'; then
    echo "== --device over the $NGPU GPUs (saxpy)"
    for ((D = 0; D < NGPU; D++)); do
      timeout 120 "$BIN" replay "$SAXPY_ID" --backend cuda --device "$D" --verify >"$WORK/device-$D.txt" 2>&1
      RC=$?
      echo "device $D: rc=$RC $(grep -E 'VERIFIED|MISMATCH|error' "$WORK/device-$D.txt" | head -1)"
      [ "$RC" = 0 ] || FAIL=1
    done
  else
    echo "== --device: skipped ($NGPU GPUs, but this rrstore has no --device flag)"
  fi
fi

if [ "$BIG_BYTES" != 0 ]; then
  echo "== H2D bandwidth for the 1 GiB snapshot"
  PLAIN=$("$WORK/recorder" bandwidth "$BIG_BYTES")
  echo "$PLAIN"
  python3 - "$BIG_BYTES" "$BIG_REHYDRATE" "$PLAIN" <<'PY'
import sys
n, reh, plain = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
p = float(plain.split("gbps=")[1].split()[0]) * 1e9
print(f"rehydration (store -> device, best of 5) {reh/1e9:.2f} GB/s vs plain pinned cuMemcpyHtoD {p/1e9:.2f} GB/s: {100*reh/p:.0f}% (goal >= 80%)")
PY
  # The backend's staging path alone (no store), when the example is built:
  # cargo build --release --example gpu_upload -p rrstore-replay
  UPLOAD="$(dirname "$BIN")/gpu_upload"
  [ -x "$UPLOAD" ] || UPLOAD="$ROOT/target/release/examples/gpu_upload"
  if [ -x "$UPLOAD" ]; then
    "$UPLOAD" "$BIG_BYTES" 7d0000000000 || FAIL=1
  fi
fi
# Real LLVM OpenMP kernels, where this machine can build and record them:
# clang with OpenMP offload for this GPU and LLVM's offload runtime.
OMP_CC=$(command -v clang || for C in /usr/lib/llvm-*/bin/clang; do [ -x "$C" ] && echo "$C"; done | sort -V | tail -1)
if [ -n "$OMP_CC" ] && "$OMP_CC" -fopenmp --offload-arch="$ARCH" -O2 -o "$WORK/omp_kernels" \
     "$ROOT/tests/gpu/omp_kernels.c" >"$WORK/omp-build.log" 2>&1; then
  echo "== real OpenMP kernels ($("$OMP_CC" --version | head -1))"
  mkdir -p "$WORK/omp-rec"
  ( cd "$WORK/omp-rec" && LIBOMPTARGET_RECORD=1 LIBOMPTARGET_RR_SAVE_OUTPUT=1 "$WORK/omp_kernels" ) \
    || { echo "gpu-check: the OpenMP program failed under LIBOMPTARGET_RECORD=1"; FAIL=1; }
  "$BIN" import "$WORK/omp-rec" --json >"$WORK/omp-import.json" || FAIL=1
  for OID in $(python3 -c 'import json,sys; [print(r["id"]) for r in json.load(open(sys.argv[1]))["recordings"]]' "$WORK/omp-import.json" 2>/dev/null); do
    timeout 120 "$BIN" replay "$OID" --backend cuda --verify --repetitions 5 >"$WORK/omp-$OID.txt" 2>&1
    RC=$?
    echo "omp $OID: rc=$RC $(grep -E 'kernel|VERIFIED|MISMATCH|error' "$WORK/omp-$OID.txt" | head -2 | tr '\n' ' ')"
    [ "$RC" = 0 ] || FAIL=1
  done
else
  echo "== real OpenMP kernels: skipped (no clang with OpenMP offload for $ARCH here; see $WORK/omp-build.log)"
fi

# Fleet (docs/fleet.md): every recording checked over every GPU gives the
# verdicts of one at a time, in the same order (the timeout and fault cases
# regress either way: the exit status is 1 for both).
# --timeout puts every CUDA replay in a child process, so the lookahead
# also prestarts the next child (with one device; several lanes are threads).
echo "== fleet: check --devices all (lookahead on and off) against one device at a time"
ms() { python3 -c 'import time; print(int(time.time()*1000))'; }
RRSTORE_LOOKAHEAD=0 "$BIN" check --timeout 5 --json >"$WORK/check-one.json" 2>"$WORK/check-one.err"
for MODE in off on off on; do
  LA=gpu; [ "$MODE" = off ] && LA=0
  T=$(ms)
  RRSTORE_LOOKAHEAD=$LA RRSTORE_GPU_STATS=1 "$BIN" check --timeout 5 --devices all --json \
    >"$WORK/check-all-$MODE.json" 2>"$WORK/check-all-$MODE.err"
  echo "check --devices all, lookahead $MODE: $(( $(ms) - T )) ms wall"
  grep 'lookahead:' "$WORK/check-all-$MODE.err" | sed 's/^/       /'
done
python3 - "$WORK/check-one.json" "$WORK/check-all-on.json" "$WORK/check-all-off.json" <<'PY' || FAIL=1
import json, sys
one, on, off = (json.load(open(p)) for p in sys.argv[1:4])
v = lambda r: [(x["recording"], x["run"]["verdict"], x["regressed"]) for x in r["rows"]]
print(f"fleet: {len(one['rows'])} recording(s), {one['regressed']} regressed with one device, "
      f"{on['regressed']} over all with the lookahead, {off['regressed']} without")
sys.exit(0 if v(one) == v(on) == v(off) else 1)
PY
"$BIN" history --json >"$WORK/history.json" 2>/dev/null && python3 - "$WORK/history.json" <<'PY' || FAIL=1
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r.get("backend") == "cuda" and r.get("device")]
uu = sorted({r.get("device_uuid") or "" for r in rows})
print(f"history: {len(rows)} CUDA row(s), device UUIDs {uu}")
sys.exit(0 if rows and "" not in uu else 1)
PY
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/gpu-check"
  cp "$WORK"/check-*.json "$WORK"/check-*.err "$WORK/history.json" "$OUT/gpu-check/" 2>/dev/null
  cp "$WORK"/replay-*.json "$WORK"/replay-*.err "$OUT/gpu-check/" 2>/dev/null
fi

SUMMARY="== done in $(( $(date +%s) - T0 )) s; $([ $FAIL = 0 ] && echo 'all recordings verified' || echo 'FAILURES above')"
echo "$SUMMARY"
[ -n "${OUT:-}" ] && echo "$SUMMARY" >"$OUT/gpu-check/summary.txt"
exit $FAIL
