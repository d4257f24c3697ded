#!/usr/bin/env bash
# bench/replay.sh: `rrstore replay --verify` from the store vs the minimal
# native baseline (bench/native-replay), side by side in one run, on every
# corpus recording (llvm22-host) and on the large corpus (3 x 64 MiB), plus
# rehydration throughput from the store (input snapshot decoded straight
# into the arena) read from `rrstore replay --json`.
#
#   bench/replay.sh [CORPUS_DIR] [LARGE_DIR]
#     defaults: ../shared/corpus/llvm22-host and /work/data/corpus/large
#   needs: hyperfine (apt-get install -y hyperfine), cc, liboffload-22
# Prints a markdown table; RAW=DIR keeps the hyperfine JSON of each recording.
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-../shared/corpus/llvm22-host}
LARGE=${2:-/work/data/corpus/large}
RUNS=${RUNS:-10}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}   # the corpus was recorded with 2 threads

cargo build --release -p rrstore-cli >/dev/null 2>&1 || cargo build --release -p rrstore-cli
BIN=$PWD/target/release/rrstore
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -o "$WORK/native-replay" bench/native-replay/native_replay.c -ldl
NATIVE=$WORK/native-replay
STORE=$WORK/store
RAW=${RAW:-$WORK/raw}   # hyperfine JSON per recording (set RAW=dir to keep)
mkdir -p "$RAW"

mapfile -t JSONS < <( (find "$CORPUS" -name '*.json' -not -path '*/src/*'; [ -d "$LARGE" ] && find "$LARGE" -name '*.json') | sort)
"$BIN" --store "$STORE" import "$CORPUS" >/dev/null
[ -d "$LARGE" ] && "$BIN" --store "$STORE" import "$LARGE" >/dev/null

echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs; OMP_NUM_THREADS=$OMP_NUM_THREADS; runs=$RUNS"
echo
echo "| recording | arena | native (ms) | rrstore replay --verify, store (ms) | ratio | rehydrate from store, fresh arena (GB/s) | rehydrate, warm arena (GB/s) | kernel (ms) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for j in "${JSONS[@]}"; do
  rel=${j#"$CORPUS"/}; case $j in "$LARGE"/*) rel=large/${j#"$LARGE"/} ;; esac
  tag=$(echo "$rel" | tr '/' '_')
  # the store ID of this recording: what `rrstore replay` of the .json reports
  id=$("$BIN" --store "$WORK/scratch" replay "$j" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["recording_id"])')
  "$BIN" --store "$STORE" replay "$id" --verify >/dev/null   # warm the page cache
  hyperfine -N --warmup 2 --runs "$RUNS" --export-json "$RAW/$tag.json" \
    -n native "$NATIVE $j" -n rrstore "$BIN --store $STORE replay $id --verify" >/dev/null 2>&1
  read -r nat rr < <(python3 - "$RAW/$tag.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
print(r["native"]["median"] * 1e3, r["rrstore"]["median"] * 1e3)
PY
)
  # rehydration throughput: the first repetition writes a fresh arena (page
  # faults included, as in a normal replay); repetitions 2-5 rewrite it warm
  read -r cold warm kern size < <("$BIN" --store "$STORE" replay "$id" --verify --repetitions 5 --json | python3 -c '
import json, sys
v = json.load(sys.stdin); t = v["timing"]; b = t["rehydrate_bytes"]
print("%.2f" % (b / t["rehydrate_ns"][0]), "%.2f" % (b / min(t["rehydrate_ns"][1:])), "%.3f" % (v["kernel_min_ns"] / 1e6), v["arena_size"])')
  printf '| %s | %s | %.1f | %.1f | %.2fx | %s | %s | %s |\n' "$rel" "$(numfmt --to=iec "$size")" "$nat" "$rr" \
    "$(python3 -c "print($rr / $nat)")" "$cold" "$warm" "$kern"
done
