#!/usr/bin/env bash
# Import against the physical limit (issue 24), one command, side by side:
# rrstore import (release build; OLD as well when given) against an all-core
# read+blake3 pass (b3sum) and borg create (default compression, lz4, and
# zstd,3 for reference), over the `large` corpus (random data) and a
# GPU-like application run (bench/gen_app_run.py: random words, smooth
# floats, zeros, small changes between recordings). Rounds are interleaved
# (every tool once per round) so machine load hits all alike; prints per
# tool the best and median wall time and the median user+sys CPU, ratios to
# b3sum and borg, store sizes, and one import's stage breakdown
# (RRSTORE_IMPORT_STAGES). Not a test.
#
#   apt-get install -y b3sum borgbackup
#   cargo build --release -p rrstore-cli
#   bash bench/import_limit.sh          # N=7 rounds; OLD=/path/to/rrstore-before NEW=...
#
# OLD: a release build of the commit before the change (optional). The app
# run is generated once into $WORK/app-run (480 MiB, ~10 s).
set -euo pipefail
cd "$(dirname "$0")/.."
LARGE=${LARGE:-/work/data/corpus/large}
WORK=${WORK:-/work/data/bench-import}
NEW=${NEW:-$PWD/target/release/rrstore}
OLD=${OLD:-}
N=${N:-7}
mkdir -p "$WORK"
APP=${APP:-$WORK/app-run}
[ -d "$APP" ] || python3 bench/gen_app_run.py "$APP"
W=$(mktemp -d "$WORK/run.XXXXXX")
trap 'rm -rf "$W"' EXIT
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
TIMES=$W/times # lines: corpus tool wall cpu
: > "$TIMES"

# one CORPUS TOOL SETUP CMD...: one timed run (SETUP: a shell snippet run
# first, untimed); wall and user+sys from GNU time.
one() {
  local corpus=$1 tool=$2 setup=$3
  shift 3
  sh -c "$setup"
  sync
  /usr/bin/time -f '%e %U %S' -o "$W/t" "$@" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; exit 1; }
  read -r wall user sys < <(tail -1 "$W/t")
  echo "$corpus $tool $wall $(echo "$user + $sys" | bc)" >> "$TIMES"
}

round() {
  local name=$1 dir=$2 files
  mapfile -t files < <(find "$dir" -type f | sort)
  one "$name" b3sum : b3sum "${files[@]}"
  one "$name" rrstore "rm -rf '$W/s'" "$NEW" --store "$W/s" import -q "$dir"
  if [ -n "$OLD" ]; then
    one "$name" rrstore-old "rm -rf '$W/o'" "$OLD" --store "$W/o" import -q "$dir"
  fi
  one "$name" borg-lz4 "rm -rf '$W/b'; borg init -e none '$W/b' >/dev/null 2>&1" borg create "$W/b::a" "$dir"
  one "$name" borg-zstd3 "rm -rf '$W/z'; borg init -e none '$W/z' >/dev/null 2>&1" borg create --compression zstd,3 "$W/z::a" "$dir"
}

packs() { find "$1" -name '*.pack' -printf '%s\n' | awk '{s+=$1} END {print s+0}'; }
size() { du -sb "$1" | cut -f1; }

echo "# import_limit, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "new: $NEW${OLD:+; old: $OLD}; $N interleaved rounds"
for c in "large:$LARGE" "app:$APP"; do
  find "${c#*:}" -type f -exec cat {} + >/dev/null
done
for r in $(seq "$N"); do
  round large "$LARGE"
  round app "$APP"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

for c in "large:$LARGE" "app:$APP"; do
  name=${c%%:*} dir=${c#*:}
  bytes=$(find "$dir" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
  echo
  echo "## $name ($dir, $bytes bytes)"
  echo
  # Sizes from one more run of each (the timed runs' outputs are removed).
  rm -rf "$W/s" "$W/o" "$W/b" "$W/z"
  "$NEW" --store "$W/s" import -q "$dir" >/dev/null
  borg init -e none "$W/b" >/dev/null 2>&1; borg create "$W/b::a" "$dir" >/dev/null 2>&1
  borg init -e none "$W/z" >/dev/null 2>&1; borg create --compression zstd,3 "$W/z::a" "$dir" >/dev/null 2>&1
  python3 - "$TIMES" "$name" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for corpus, tool, wall, cpu in rows:
    if corpus == sys.argv[2]:
        by.setdefault(tool, []).append((float(wall), float(cpu)))
med = {t: statistics.median(w for w, _ in v) for t, v in by.items()}
print("| tool | best wall s | median wall s | median user+sys s | median / b3sum | median / borg-lz4 |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for t, v in by.items():
    best = min(w for w, _ in v)
    cpu = statistics.median(c for _, c in v)
    print(f"| {t} | {best:.3f} | {med[t]:.3f} | {cpu:.3f} | {med[t] / med['b3sum']:.2f}x | {med[t] / med['borg-lz4']:.2f}x |")
PY
  echo
  s=$(packs "$W/s/packs")
  echo "store bytes: rrstore $s packs + $(size "$W/s/index.sqlite") index;" \
    "borg (lz4) $(size "$W/b"); borg (zstd,3) $(size "$W/z")"
  rm -rf "$W/s"
  echo
  echo "stages of one rrstore import of $name (thread-seconds; compare with user+sys):"
  RRSTORE_IMPORT_STAGES=1 "$NEW" --store "$W/s" import -q "$dir" 2>&1 >/dev/null | sed 's/^/    /'
done
