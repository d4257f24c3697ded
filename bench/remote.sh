#!/usr/bin/env bash
# Remote push/pull benchmark against a loopback moto S3 server (and a
# file:// remote), on the `large` corpus. Needs: a release build
# (cargo build --release -p rrstore-cli; cargo build --release -p
# rrstore-store --features s3 --example remote_put) and moto_server
# (python3 -m pip install 'moto[server]').
#
#   bench/remote.sh [CORPUS_DIR]    (default /work/data/corpus/large)
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-/work/data/corpus/large}
RR=$PWD/target/release/rrstore
PUT=$PWD/target/release/examples/remote_put
W=$(mktemp -d /tmp/rr-remote-bench.XXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
EP=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
moto_server -H 127.0.0.1 -p "$PORT" >"$W/moto.log" 2>&1 &
MOTO=$!
trap 'kill $MOTO 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do curl -s "$EP" >/dev/null && break; sleep 0.1; done
curl -s -X PUT "$EP/bench" >/dev/null

t() { local s e; s=$(date +%s.%N); "$@" >"$W/out.json"; e=$(date +%s.%N); echo "$e - $s" | bc; }
field() { python3 -c "import json,sys; print(json.load(open('$W/out.json'))['$1'])"; }
mbps() { echo "scale=1; $1 / 1000000 / $2" | bc; }

echo "== load: $(uptime)"
echo "== corpus: $CORPUS ($(du -sb "$CORPUS" | cut -f1) bytes of files)"
$RR --store "$W/full" import "$CORPUS" >/dev/null
RECS=($(ls "$CORPUS"))

for kind in s3 file; do
  if [ $kind = s3 ]; then URL=s3://bench/rr; ARGS=(--endpoint "$EP" --allow-http); else URL=file://$W/fileremote; ARGS=(); fi
  $RR --store "$W/full" remote add $kind "$URL" "${ARGS[@]}" >/dev/null
  s=$(t $RR --store "$W/full" push $kind --all --json)
  b=$(field bytes); lg=$(field logical_bytes)
  echo "$kind push --all (empty remote): ${s}s, sent $b bytes ($(field chunks) chunks) for $lg logical: $(mbps "$b" "$s") MB/s sent, $(mbps "$lg" "$s") MB/s logical"
  # Pull into an empty store.
  $RR --store "$W/empty-$kind" remote add $kind "$URL" "${ARGS[@]}" >/dev/null
  s=$(t $RR --store "$W/empty-$kind" pull $kind --all --json)
  b=$(field bytes); lg=$(field logical_bytes)
  echo "$kind pull --all into an empty store: ${s}s, received $b bytes for $lg logical: $(mbps "$b" "$s") MB/s received, $(mbps "$lg" "$s") MB/s logical"
  $RR --store "$W/empty-$kind" verify --full | tail -1
  # Pull into a store that holds one of the recordings.
  for one in "${RECS[@]}"; do
    d="$W/one-$kind-$one"
    $RR --store "$d" import "$CORPUS/$one" >/dev/null
    $RR --store "$d" remote add $kind "$URL" "${ARGS[@]}" >/dev/null
    s=$(t $RR --store "$d" pull $kind --all --json)
    b=$(field bytes); cb=$(field chunk_bytes); m=$(field missing_stored_bytes); md=$(field metadata_bytes)
    echo "$kind pull --all into a store holding $one: ${s}s, received $b bytes = chunks $cb + metadata $md; missing chunks (stored) $m; ratio $(echo "scale=4; $b / $m" | bc) (chunks only $(echo "scale=4; $cb / $m" | bc))"
  done
done

echo "== baseline: the same client library (object_store) uploading the first recording's .memory"
MEM=$(ls "$CORPUS/${RECS[0]}"/*.memory)
$PUT "$EP" bench "$MEM"
