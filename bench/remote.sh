#!/usr/bin/env bash
# Remote push/pull benchmark (layout 3) against one loopback moto S3 server,
# side by side with restic backing up and restoring the same files to the
# same server, for several corpora in one run; plus pulls into stores that
# hold a similar recording (bytes received vs bytes missing) and a push to
# a file:// remote holding a million (fake) chunks.
#
# For every command: wall time, MB/s of files, requests counted at the
# server (moto's request log), the server's CPU time (is moto the
# bottleneck?), rrstore's own count of requests and payload bytes (its
# JSON report) and, for restic, its repository's size (`restic stats
# --mode raw-data`: what a backup sends and a restore receives, about). ROUNDS rounds, interleaved (rrstore
# push, restic backup, rrstore pull, restic restore, each to a fresh
# prefix/repository/store), then the ratios of the medians.
#
# SERVER=moto (default; Python, in memory: the tests' server) or
# NODELAY=1 (s3s-fs only): run the server with bench/nodelay.c preloaded,
# which sets TCP_NODELAY on its connections as production S3 servers do.
# SERVER=s3s-fs (Rust, on the file system under $W; S3S=path to the binary,
# `cargo install s3s-fs@0.14.1 --features binary --root DIR`, outside the
# repository), to tell whether the server is the bottleneck. s3s-fs keeps
# no request log: "server: requests" is then "-" and rrstore's own count
# (its JSON) is the figure.
#
# Needs: rrstore (RR=..., default target/release/rrstore; build it with
# `cargo build --release -p rrstore-cli`), the fake_index example (FAKE=...,
# `cargo build --release -p rrstore-store --features remote --example
# fake_index`), moto_server (`python3 -m pip install 'moto[server]'`),
# restic (`apt-get install restic`), python3, bc.
#
#   bench/remote.sh [CORPUS_DIR...]
#     default: /work/data/corpus/large /work/data/corpus/jacobi and the
#     synthetic 3-recording corpus (bench/gen_gpu_recording.py 64/65/66
#     --output, generated into $W once)
#   ROUNDS=2 (default)   RR_B=path/to/other/rrstore: also time its pulls,
#   interleaved with RR's (A/B of two builds on the same server and files;
#   the timed pushes then write RRX3 index objects, which rrstore before
#   RRX4 can read: RRSTORE_REMOTE_INDEX_FORMAT=3)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RR=${RR:-$ROOT/target/release/rrstore}
RR_B=${RR_B:-}
FAKE=${FAKE:-$ROOT/target/release/examples/fake_index}
ROUNDS=${ROUNDS:-2}
W=$(mktemp -d "${TMPDIR:-/tmp}/rr-remote-bench.XXXX")
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
EP=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
export RESTIC_PASSWORD=bench
SERVER=${SERVER:-moto}
case $SERVER in
  moto)
    moto_server -H 127.0.0.1 -p "$PORT" >"$W/moto.log" 2>&1 &
    MOTO=$! ;;
  s3s-fs)
    mkdir -p "$W/s3/bench"
    PRELOAD=""
    if [ "${NODELAY:-0}" = 1 ]; then
      cc -shared -fPIC -O2 -o "$W/nodelay.so" bench/nodelay.c -ldl
      PRELOAD="$W/nodelay.so"
    fi
    LD_PRELOAD=$PRELOAD "${S3S:-s3s-fs}" --host 127.0.0.1 --port "$PORT" --access-key bench --secret-key bench "$W/s3" >"$W/moto.log" 2>&1 &
    MOTO=$! ;;
  *) echo "SERVER is moto or s3s-fs" >&2; exit 2 ;;
esac
trap 'kill $MOTO 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do curl -s "$EP" >/dev/null && break; sleep 0.1; done
[ "$SERVER" = moto ] && curl -s -X PUT "$EP/bench" >/dev/null

CORPORA=("$@")
if [ ${#CORPORA[@]} -eq 0 ]; then
  for c in /work/data/corpus/large /work/data/corpus/jacobi; do
    [ -d "$c" ] && CORPORA+=("$c")
  done
  syn="$W/synthetic3"
  for s in 64 65 66; do
    python3 bench/gen_gpu_recording.py "$syn/r$s" "$s" --output >/dev/null
  done
  CORPORA+=("$syn")
fi

now() { date +%s.%N; }
reqs() { if [ "$SERVER" = moto ]; then grep -c '" [0-9][0-9][0-9] ' "$W/moto.log" || true; else echo 0; fi; }
cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$MOTO/stat"; }
field() { python3 -c "import json,sys; print(json.load(open('$1')).get('$2', 0))"; }
mbps() { echo "scale=1; $1 / 1000000 / $2" | bc; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# run LABEL LOGICAL CMD...: one timed command; appends "LABEL seconds" to
# $W/times and prints its line.
run() {
  local label=$1 lg=$2; shift 2
  local r0 c0 s e
  r0=$(reqs); c0=$(cpu); s=$(now)
  "$@" >"$W/out" 2>"$W/err" || { cat "$W/err"; return 1; }
  e=$(now)
  local t; t=$(echo "$e - $s" | bc)
  echo "$label $t" >>"$W/times"
  printf '  %-36s %7.2fs %8s MB/s  server: %4d requests, CPU %5.2fs\n' \
    "$label" "$t" "$(mbps "$lg" "$t")" $(($(reqs) - r0)) "$(echo "$(cpu) - $c0" | bc)"
}
client() { echo "      client: $(field "$W/out" requests) requests, $(field "$W/out" bytes) payload bytes ($(field "$W/out" chunk_bytes) chunk bytes)"; }

echo "== load: $(uptime)"
echo "== rrstore: $RR ($($RR --version 2>/dev/null || echo '?'))${RR_B:+, B: $RR_B}; restic $(restic version | cut -d' ' -f2); server $SERVER${NODELAY:+ NODELAY=$NODELAY}"
[ "$SERVER" = moto ] && echo "   moto $(python3 -c 'import moto; print(moto.__version__)')"
SUMMARY="$W/summary"
for CORPUS in "${CORPORA[@]}"; do
  name=$(basename "$CORPUS")
  LOGICAL=$(du -sb "$CORPUS" | cut -f1)
  : >"$W/times"
  echo
  echo "== corpus $name: $CORPUS ($LOGICAL bytes of files, $(find "$CORPUS" -name '*.json' | wc -l) recordings)"
  $RR --store "$W/$name-full" import "$CORPUS" >/dev/null
  for round in $(seq "$ROUNDS"); do
    p=$name-$round
    echo " round $round"
    $RR --store "$W/$name-full" remote rm lab >/dev/null 2>&1 || true
    $RR --store "$W/$name-full" remote add lab "s3://bench/$p/rr" --endpoint "$EP" --allow-http >/dev/null
    rm -rf "$W/$name-full/remote-cache"
    run "rrstore push --all" "$LOGICAL" env ${RR_B:+RRSTORE_REMOTE_INDEX_FORMAT=3} $RR --store "$W/$name-full" push lab --all --json
    client
    restic -q -r "s3:$EP/bench/$p/restic" init >/dev/null
    run "restic backup" "$LOGICAL" restic -q -r "s3:$EP/bench/$p/restic" backup "$CORPUS"
    echo "      repository: $(restic -q -r "s3:$EP/bench/$p/restic" stats --mode raw-data --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["total_size"])') bytes of packs"
    $RR --store "$W/pulled" remote add lab "s3://bench/$p/rr" --endpoint "$EP" --allow-http >/dev/null
    run "rrstore pull --all (empty store)" "$LOGICAL" $RR --store "$W/pulled" pull lab --all --json
    client
    $RR --store "$W/pulled" verify --full >/dev/null || { echo "verify --full FAILED"; exit 1; }
    rm -rf "$W/pulled"
    run "restic restore" "$LOGICAL" restic -q -r "s3:$EP/bench/$p/restic" restore latest --target "$W/restored"
    rm -rf "$W/restored"
    if [ -n "$RR_B" ]; then
      $RR_B --store "$W/pulled" remote add lab "s3://bench/$p/rr" --endpoint "$EP" --allow-http >/dev/null
      run "B: rrstore pull --all (empty store)" "$LOGICAL" $RR_B --store "$W/pulled" pull lab --all --json
      rm -rf "$W/pulled"
    fi
  done
  med() { grep "^$1 [0-9.]*$" "$W/times" | awk '{print $NF}' | median; }
  push=$(med "rrstore push --all"); backup=$(med "restic backup")
  pull=$(med "rrstore pull --all (empty store)"); restore=$(med "restic restore")
  line="$name: push $(mbps "$LOGICAL" "$push") MB/s vs restic backup $(mbps "$LOGICAL" "$backup") MB/s = $(echo "scale=2; $backup / $push" | bc)x; pull $(mbps "$LOGICAL" "$pull") MB/s vs restic restore $(mbps "$LOGICAL" "$restore") MB/s = $(echo "scale=2; $restore / $pull" | bc)x (medians of $ROUNDS)"
  if [ -n "$RR_B" ]; then
    pb=$(med "B: rrstore pull --all (empty store)")
    line="$line; B pull $(mbps "$LOGICAL" "$pb") MB/s (A/B time $(echo "scale=2; $pull / $pb" | bc))"
  fi
  echo "$line" | tee -a "$SUMMARY"

  # Pulls into a store that holds one similar recording: at most 4 of them.
  echo " pull into a store holding one recording (received = all payloads; missing = stored bytes of the chunks it lacked)"
  # (to a remote of its own, written as a push writes it by default)
  $RR --store "$W/$name-full" remote rm lab >/dev/null
  $RR --store "$W/$name-full" remote add lab "s3://bench/$name-sim/rr" --endpoint "$EP" --allow-http >/dev/null
  rm -rf "$W/$name-full/remote-cache"
  $RR --store "$W/$name-full" push lab --all >/dev/null
  entries=$(ls "$CORPUS")
  n=$(echo "$entries" | wc -l)
  for one in $(echo "$entries" | awk -v n="$n" 'NR == 1 || NR == 2 || NR == int((n + 1) / 2) || NR == n' | sort -u); do
    d="$W/one-$one"
    $RR --store "$d" import "$CORPUS/$one" >/dev/null
    $RR --store "$d" remote add lab "s3://bench/$name-sim/rr" --endpoint "$EP" --allow-http >/dev/null
    $RR --store "$d" pull lab --all --json >"$W/one.json"
    b=$(field "$W/one.json" bytes); m=$(field "$W/one.json" missing_stored_bytes)
    r=$( [ "$m" -gt 0 ] && echo "scale=4; $b / $m" | bc || echo "-")
    echo "  holding $one: received $b bytes for $m missing: ${r}x, $(field "$W/one.json" requests) requests" | tee -a "$SUMMARY"
    rm -rf "$d"
  done
done

echo
echo "== a file:// remote holding 1,000,000 chunks (fake index objects, no data): push one new recording"
first=${CORPORA[0]}/$(ls "${CORPORA[0]}" | head -1)
second=${CORPORA[0]}/$(ls "${CORPORA[0]}" | sed -n 2p)
$FAKE "$W/million" 1000000
$RR --store "$W/one" import "$first" >/dev/null
$RR --store "$W/one" remote add mil "file://$W/million" >/dev/null
s=$(now); $RR --store "$W/one" push mil --all --json >"$W/m.json"; e=$(now)
echo "  $(basename "$first"), fresh cache: $(field "$W/m.json" requests) requests, $(field "$W/m.json" chunk_bytes) chunk bytes, $(field "$W/m.json" bytes) bytes, $(echo "$e - $s" | bc)s" | tee -a "$SUMMARY"
$RR --store "$W/one" import "$second" >/dev/null
s=$(now); $RR --store "$W/one" push mil --all --json >"$W/m.json"; e=$(now)
echo "  then $(basename "$second"), cache up to date: $(field "$W/m.json" requests) requests, $(field "$W/m.json" chunk_bytes) chunk bytes, $(echo "$e - $s" | bc)s" | tee -a "$SUMMARY"
echo
echo "== summary (load at the end: $(uptime | sed 's/.*load/load/'))"
cat "$SUMMARY"
