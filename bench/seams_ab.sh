#!/usr/bin/env bash
# bench/seams_ab.sh OLD NEW [CORPUS] [LARGE] [ROUNDS]
#
# A refactoring's replay benchmark, before and after (issue 40: "a replay
# benchmark before and after shows no slowdown beyond the noise"): the
# replay wall time of two rrstore builds on the same store, interleaved
# (bench/replay_ab.py: one warm-up round, then ROUNDS rounds in a rotating
# order, medians and the ratio NEW/OLD), for the standard corpora's
# recordings as issue 18's row measured them: saxpy, reduction and globals
# of CORPUS (start-up, runner and runtime load dominate) and the 64 MiB
# `01-patch1` of LARGE (fill, launch and the verified read-back dominate;
# left out when LARGE is absent), then one `check` of all of them.
#
#   CORPUS: ../shared/corpus/llvm22-host (default; tests/fixtures/llvm22-host
#           has the same three)
#   LARGE:  /work/data/corpus/large (default; made by
#           ../shared/tools/make-recordings.sh /work/data/corpus)
#   ROUNDS: 30 (default)
#   env OMP_NUM_THREADS: 2 (default; the recordings' float reductions are
#           bit-reproducible only with the thread count they were recorded
#           with, and replay_ab.py wants every run to exit 0)
#
# Both binaries must read the store NEW makes (same store schema). Use
# release builds of the two commits (e.g. main before the merge and after).
# Each row prints "old" and "new" medians; "ratio" of new is NEW/OLD.
set -euo pipefail
OLD=$1 NEW=$2
HERE=$(cd "$(dirname "$0")" && pwd)
CORPUS=${3:-$HERE/../../shared/corpus/llvm22-host}
LARGE=${4:-/work/data/corpus/large}
ROUNDS=${5:-30}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export RRSTORE_CONFIG=/dev/null
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT

# The ID of the recording imported from directory $1.
import_one() {
  "$NEW" --store "$S/store" import "$1" --json | python3 -c '
import json, sys
print(json.load(sys.stdin)["recordings"][0]["id"][:12])'
}

ids=()
for r in saxpy reduction globals; do
  ids+=("$r=$(import_one "$CORPUS/$r")")
done
if [ -d "$LARGE/01-patch1" ]; then
  ids+=("large/01-patch1=$(import_one "$LARGE/01-patch1")")
else
  echo "($LARGE/01-patch1 absent: the 64 MiB row is left out)"
fi
echo "old: $OLD ($("$OLD" --version))"
echo "new: $NEW ($("$NEW" --version))"
echo "host: $(nproc) CPUs; OMP_NUM_THREADS=$OMP_NUM_THREADS; rounds=$ROUNDS"
for entry in "${ids[@]}"; do
  name=${entry%%=*} id=${entry#*=}
  echo "== replay $name ($id)"
  python3 "$HERE/replay_ab.py" "$ROUNDS" \
    "old=$OLD --store $S/store replay $id" "new=$NEW --store $S/store replay $id"
done
echo "== check (every recording replayed, 5 launches each; outputs not kept)"
python3 "$HERE/replay_ab.py" "$(( (ROUNDS + 2) / 3 ))" \
  "old=$OLD --store $S/store check --no-keep-outputs" "new=$NEW --store $S/store check --no-keep-outputs"
