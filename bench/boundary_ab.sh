#!/usr/bin/env bash
# bench/boundary_ab.sh OLD NEW CORPUS [ROUNDS]
#
# The cost of the trust boundary (issue 39): replay wall time of two rrstore
# builds on the same store, interleaved (bench/replay_ab.py), for a small
# recording (saxpy: start-up, runner and runtime load dominate) and the
# 64 MiB `large/01-patch1` (fill, launch and the verified read-back of the
# arena dominate). OLD forks its runner and lets it hash the arena; NEW
# executes it, stops it after the launch and hashes the arena itself.
# CORPUS is a directory made by ../shared/tools/make-recordings.sh.
set -euo pipefail
OLD=$1 NEW=$2 CORPUS=$3 ROUNDS=${4:-25}
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
export RRSTORE_CONFIG=/dev/null
"$NEW" --store "$S" import "$CORPUS/saxpy" "$CORPUS/large/01-patch1" >/dev/null
large=$("$NEW" --store "$S" ls --json | python3 -c '
import json,sys
rows=json.load(sys.stdin)
print(max(rows, key=lambda r: r.get("arena_size", 0))["id"][:12])')
small=$("$NEW" --store "$S" ls --json | python3 -c '
import json,sys
rows=json.load(sys.stdin)
print(min(rows, key=lambda r: r.get("arena_size", 0))["id"][:12])')
for id in "$small" "$large"; do
  echo "== replay $id"
  python3 "$(dirname "$0")/replay_ab.py" "$ROUNDS" \
    "old=$OLD --store $S replay $id" "new=$NEW --store $S replay $id"
done
