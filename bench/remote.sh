#!/usr/bin/env bash
# Remote push/pull benchmark (layout 3) against a loopback moto S3 server,
# side by side with restic backing up the same files to the same server,
# plus a push to a file:// remote holding a million (fake) chunks. Counts
# requests at the server (moto's request log) and at the client (the
# `requests` of rrstore's JSON report), and the server's CPU time (to see
# whether moto is the bottleneck). Needs: rrstore (RR=..., default
# target/release/rrstore), the fake_index example (cargo build -p
# rrstore-store --features remote --example fake_index), moto_server
# (python3 -m pip install 'moto[server]') and restic (apt-get install
# restic).
#
#   bench/remote.sh [CORPUS_DIR]    (default /work/data/corpus/large)
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-/work/data/corpus/large}
RR=${RR:-$PWD/target/release/rrstore}
FAKE=${FAKE:-$PWD/target/debug/examples/fake_index}
W=$(mktemp -d "${TMPDIR:-/tmp}/rr-remote-bench.XXXX")
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
EP=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
export RESTIC_PASSWORD=bench
moto_server -H 127.0.0.1 -p "$PORT" >"$W/moto.log" 2>&1 &
MOTO=$!
trap 'kill $MOTO 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do curl -s "$EP" >/dev/null && break; sleep 0.1; done
curl -s -X PUT "$EP/bench" >/dev/null

now() { date +%s.%N; }
# Server requests so far (one log line per request) and server CPU seconds.
reqs() { grep -c '" [0-9][0-9][0-9] ' "$W/moto.log" || true; }
cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$MOTO/stat"; }
field() { python3 -c "import json,sys; print(json.load(open('$1'))['$2'])"; }
mbps() { echo "scale=1; $1 / 1000000 / $2" | bc; }
# run LABEL LOGICAL_BYTES CMD...: wall time, server requests and CPU.
run() {
  local label=$1 lg=$2; shift 2
  local r0 c0 s e r1 c1
  r0=$(reqs); c0=$(cpu); s=$(now)
  "$@" >"$W/out" 2>"$W/err" || { cat "$W/err"; return 1; }
  e=$(now); r1=$(reqs); c1=$(cpu)
  local t; t=$(echo "$e - $s" | bc)
  echo "$label: ${t}s, $(mbps "$lg" "$t") MB/s of files, $((r1 - r0)) requests at the server, server CPU $(echo "$c1 - $c0" | bc)s"
}

LOGICAL=$(du -sb "$CORPUS" | cut -f1)
echo "== load: $(uptime)"
echo "== corpus: $CORPUS ($LOGICAL bytes of files)"
$RR --store "$W/full" import "$CORPUS" >/dev/null

echo "== rrstore, layout 3, S3 (moto)"
$RR --store "$W/full" remote add lab s3://bench/rr --endpoint "$EP" --allow-http >/dev/null
run "rrstore push --all" "$LOGICAL" $RR --store "$W/full" push lab --all --json
cp "$W/out" "$W/push.json"
echo "  sent $(field "$W/push.json" bytes) bytes in $(field "$W/push.json" packs) packs; client requests $(field "$W/push.json" requests)"
$RR --store "$W/pulled" remote add lab s3://bench/rr --endpoint "$EP" --allow-http >/dev/null
run "rrstore pull --all (empty store)" "$LOGICAL" $RR --store "$W/pulled" pull lab --all --json
echo "  received $(field "$W/out" bytes) bytes; client requests $(field "$W/out" requests)"
$RR --store "$W/pulled" verify --full | tail -1
rm -rf "$W/pulled"
for one in $(ls "$CORPUS"); do
  d="$W/one-$one"
  $RR --store "$d" import "$CORPUS/$one" >/dev/null
  $RR --store "$d" remote add lab s3://bench/rr --endpoint "$EP" --allow-http >/dev/null
  $RR --store "$d" pull lab --all --json >"$W/one.json"
  b=$(field "$W/one.json" bytes); m=$(field "$W/one.json" missing_stored_bytes)
  echo "  pull into a store holding $one: received $b bytes for $m missing (stored): $(echo "scale=4; $b / $m" | bc)x, $(field "$W/one.json" requests) requests"
  rm -rf "$d"
done

echo "== restic $(restic version | cut -d' ' -f2), same files, same server"
restic -q -r "s3:$EP/bench/restic" init >/dev/null
run "restic backup" "$LOGICAL" restic -q -r "s3:$EP/bench/restic" backup "$CORPUS"
run "restic restore" "$LOGICAL" restic -q -r "s3:$EP/bench/restic" restore latest --target "$W/restored"
rm -rf "$W/restored"

echo "== a file:// remote holding 1,000,000 chunks (fake index objects, no data): push one new recording"
$FAKE "$W/million" 1000000
first=$(ls "$CORPUS" | head -1)
$RR --store "$W/one" import "$CORPUS/$first" >/dev/null
$RR --store "$W/one" remote add mil "file://$W/million" >/dev/null
s=$(now); $RR --store "$W/one" push mil --all --json >"$W/m.json"; e=$(now)
echo "  $first, fresh cache: $(field "$W/m.json" requests) requests, $(field "$W/m.json" chunk_bytes) chunk bytes, $(echo "$e - $s" | bc)s (filling the cache: 1,000,000 rows)"
second=$(ls "$CORPUS" | sed -n 2p)
$RR --store "$W/one" import "$CORPUS/$second" >/dev/null
s=$(now); $RR --store "$W/one" push mil --all --json >"$W/m.json"; e=$(now)
echo "  then $second, cache up to date: $(field "$W/m.json" requests) requests, $(field "$W/m.json" chunk_bytes) chunk bytes, $(echo "$e - $s" | bc)s"
