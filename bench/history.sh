#!/usr/bin/env bash
# Shared history costs (spec/REMOTE.md, "Shared history"): requests and
# bytes of `push` and `pull` as a file:// remote's history grows, counted
# by rrstore itself (JSON `requests`, `bytes`), so the figures do not
# depend on the machine's load. For each round: machine A replays saxpy
# once more and pushes (one new row, one new batch); machine B pulls (one
# new batch) and pulls again (nothing new). Then a prune compacts the
# batches into one and the same pushes and pulls are counted again.
#
#   bench/history.sh [ROUNDS]        (default 20; release build)
#
# Expected: push = the no-history push + 1 LIST history/ + 1 PUT; pull =
# no-history pull + 1 LIST + 1 GET of the new batch; the pull again = +1
# LIST, whatever the number of batches (a LIST costs one request per
# 1,000 keys).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
cargo build --release -p rrstore-cli -q
rr=$PWD/${CARGO_TARGET_DIR:-target}/release/rrstore
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fx=tests/fixtures/llvm22-host/saxpy
a=$t/a b=$t/b
"$rr" --store "$a" import "$fx" >/dev/null
id=$("$rr" --store "$a" ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
for s in "$a" "$b"; do "$rr" --store "$s" remote add r "file://$t/r" >/dev/null; done
"$rr" --store "$a" push r --all >/dev/null
"$rr" --store "$b" pull r --all >/dev/null
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d['requests'], d['bytes'], d['history_rows'], d['history_batches'])"; }
echo "round batches | push: requests bytes rows batches | pull: requests bytes rows batches | pull again: requests"
for i in $(seq 1 "$rounds"); do
  RRSTORE_MACHINE=node-a "$rr" --store "$a" replay "${id:0:12}" >/dev/null
  p=$(RRSTORE_MACHINE=node-a "$rr" --store "$a" push r --all --json | field)
  q=$("$rr" --store "$b" pull r --all --json | field)
  g=$("$rr" --store "$b" pull r --all --json | field | cut -d' ' -f1)
  n=$(find "$t/r/history" -type f | wc -l)
  echo "$i $n | $p | $q | $g"
done
"$rr" --store "$a" remote prune r --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("prune:", {k: v for k, v in d.items() if k.startswith("history")})'
RRSTORE_MACHINE=node-a "$rr" --store "$a" replay "${id:0:12}" >/dev/null
p=$(RRSTORE_MACHINE=node-a "$rr" --store "$a" push r --all --json | field)
q=$("$rr" --store "$b" pull r --all --json | field)
echo "after prune: $(find "$t/r/history" -type f | wc -l) batch(es) | push: $p | pull: $q"
