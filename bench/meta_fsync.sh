#!/usr/bin/env bash
# Cost of making the recovery metadata (meta/) durable (spec/STORE.md,
# "Recovery metadata"): `rrstore import` of the bundled fixtures into a
# fresh store, binary A (before) against binary B (after), interleaved
# rounds: median wall time of each, and the fsync/fdatasync calls and
# renames of one traced import of each (load-independent).
#
#   A=/path/to/main/rrstore B=/path/to/hyg/rrstore bash bench/meta_fsync.sh
#   (defaults: A=../main/target/release/rrstore, B=target/release/rrstore;
#    ROUNDS=7 SRC=tests/fixtures/llvm22-host WORK=$TMPDIR)
set -euo pipefail
cd "$(dirname "$0")/.."
A=${A:-../main/target/release/rrstore}
B=${B:-target/release/rrstore}
SRC=${SRC:-tests/fixtures/llvm22-host}
ROUNDS=${ROUNDS:-7}
W=$(mktemp -d "${WORK:-${TMPDIR:-/tmp}}/bench-meta.XXXXXX")
trap 'rm -rf "$W"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
find "$SRC" -type f -exec cat {} + >/dev/null
one() { # one BIN: wall seconds of one import into a fresh store
  rm -rf "$W/s"
  local s e
  s=$(date +%s.%N)
  "$1" --store "$W/s" import "$SRC" -q >/dev/null
  e=$(date +%s.%N)
  echo "$e - $s" | bc
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >"$W/a"; : >"$W/b"
for _ in $(seq "$ROUNDS"); do
  one "$A" >>"$W/a"
  one "$B" >>"$W/b"
done
echo "import of $SRC, median of $ROUNDS interleaved rounds:"
echo "  A $(median <"$W/a") s   ($A)"
echo "  B $(median <"$W/b") s   ($B)"
if command -v strace >/dev/null; then
  for side in A B; do
    bin=${!side}
    rm -rf "$W/s"
    strace -f -c -o "$W/trace" -e trace=fsync,fdatasync,rename,renameat,renameat2 \
      "$bin" --store "$W/s" import "$SRC" -q >/dev/null
    echo "  $side calls: $(awk '$NF ~ /^(fsync|fdatasync|rename|renameat|renameat2)$/ {printf "%s=%s ", $NF, $4}' "$W/trace")"
  done
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
