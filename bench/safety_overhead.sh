#!/usr/bin/env bash
# What the data-safety work of issue 16 costs (not a test): two rrstore
# binaries, interleaved round by round on the same inputs, each into a fresh
# store or output directory:
#   import-fixtures  the bundled 11 recordings (fixed costs: index commit,
#                    store marker, recovery metadata files)
#   import-gpu       one GPU-like recording (bench/gen_gpu_recording.py,
#                    SIZE MiB snapshot + output)
#   export-gpu       that recording back as LLVM files (temporary files,
#                    fsync, rename; before: written in place, no fsync)
# Prints the median wall seconds of each command per binary and new/old.
#
#   bash bench/safety_overhead.sh OLD_RRSTORE NEW_RRSTORE [ROUNDS] [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2 ROUNDS=${3:-7} SIZE=${4:-256}
W=$(mktemp -d "${WORK:-/tmp}/bench-safety.XXXXXX")
trap 'rm -rf "$W"' EXIT
python3 bench/gen_gpu_recording.py "$W/gpu" "$SIZE" --output >/dev/null
FIX=tests/fixtures/llvm22-host

now() { date +%s.%N; }
# t BIN ARGS...: wall seconds of one run (output discarded, must succeed)
t() { local s e; s=$(now); "$@" >/dev/null 2>&1; e=$(now); echo "$e - $s" | bc; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  # Alternate which binary goes first, so neither always meets a cold cache.
  if [ $((r % 2)) = 0 ]; then order="old new"; else order="new old"; fi
  for which in $order; do
    bin=$OLD; [ "$which" = new ] && bin=$NEW
    s="$W/s-$which-$r"
    echo "$which import-fixtures $(t "$bin" --store "$s-a" import "$FIX")" >>"$W/times"
    echo "$which import-gpu $(t "$bin" --store "$s-b" import "$W/gpu")" >>"$W/times"
    id=$("$bin" --store "$s-b" ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"][:12])')
    sync
    echo "$which export-gpu $(t "$bin" --store "$s-b" export "$id" -o "$W/out-$which-$r")" >>"$W/times"
    rm -rf "$s-a" "$s-b" "$W/out-$which-$r"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-16s %9s %9s %9s\n' command old_s new_s new/old
for c in import-fixtures import-gpu export-gpu; do
  o=$(awk -v c="$c" '$1=="old" && $2==c {print $3}' "$W/times" | median)
  n=$(awk -v c="$c" '$1=="new" && $2==c {print $3}' "$W/times" | median)
  printf '%-16s %9.3f %9.3f %8.2fx\n' "$c" "$o" "$n" "$(echo "$n / $o" | bc -l)"
done
