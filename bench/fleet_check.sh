#!/usr/bin/env bash
# `rrstore check` with --jobs 2 against --jobs 1 (issue 21, BENCHMARKS.md
# "Fleet: check --jobs"): one store holding the jacobi run (27 recordings,
# from the shared corpus) and the bundled LLVM 22 host fixtures (11) plus
# the two-kernel regression recording, checked ROUNDS times, the two
# settings interleaved (A B, B A, ...), wall time of each check printed,
# then the medians and the speed-up. Each check runs on a fresh copy of the
# imported store: no history, so no time comparison and no confirming
# replay (their number depends on the noise), one replay per recording.
#
# Usage: bench/fleet_check.sh [ROUNDS] [path/to/rrstore] [JACOBI_DIR]
#   defaults: 6, target/release/rrstore, /work/shared/corpus/llvm22-host/jacobi
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-6}
BIN=$(readlink -f "${2:-$ROOT/target/release/rrstore}")
JACOBI=${3:-/work/shared/corpus/llvm22-host/jacobi}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rr-fleet-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
S="$WORK/store"
F="$ROOT/tests/fixtures"
"$BIN" --store "$S" import -q "$JACOBI"/* --label jacobi >/dev/null
"$BIN" --store "$S" import -q "$F"/llvm22-host/{saxpy,reduction,globals} "$F"/llvm22-host/multi/* "$F"/images/recording --label fixtures >/dev/null
N=$("$BIN" --store "$S" ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
echo "store: $N recordings; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
# One warm-up (page cache).
cp -r "$S" "$WORK/warm" && "$BIN" --store "$WORK/warm" check --jobs 2 >/dev/null || true
one() { # jobs -> seconds
  local t0 t1 c="$WORK/copy"
  rm -rf "$c" && cp -r "$S" "$c"
  t0=$(date +%s.%N)
  "$BIN" --store "$c" check --jobs "$1" >/dev/null || true
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.3f}')"
}
A=(); B=()
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then a=$(one 1); b=$(one 2); else b=$(one 2); a=$(one 1); fi
  A+=("$a"); B+=("$b")
  echo "round $r: --jobs 1 ${a}s  --jobs 2 ${b}s  (load $(cut -d' ' -f1 /proc/loadavg))"
done
python3 - "${A[*]}" "${B[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"median --jobs 1 {ma:.3f}s, --jobs 2 {mb:.3f}s: {ma / mb:.2f}x; per-round ratios " +
      " ".join(f"{x / y:.2f}" for x, y in zip(a, b)))
PY
