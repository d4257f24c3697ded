#!/usr/bin/env bash
# Before/after benchmark of pack, import and ls (issues 2 and 3), side by
# side with the peers, interleaved round by round so machine load hits all
# tools alike; prints the best of N wall times per tool. Not a test.
#
#   OLD=/path/to/rrstore-before NEW=target/release/rrstore N=5 bash bench/perf_compare.sh
#
# OLD: a release build of the commit before the change (build it from a
# `git archive` copy; optional, skipped when unset). Data under /work/data:
# the large corpus, a 1 GiB GPU-like recording (bench/gen_gpu_recording.py,
# generated once into $WORK/gpu1g), a 100,000-recording index
# (bench/store_ls_gen.py). Needs: zstd, borgbackup, b3sum, strace, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
LARGE=${LARGE:-/work/data/corpus/large}
WORK=${WORK:-/work/data/bench-compare}
NEW=${NEW:-$PWD/target/release/rrstore}
OLD=${OLD:-}
N=${N:-5}
mkdir -p "$WORK"
W=$(mktemp -d "$WORK/run.XXXXXX")
trap 'rm -rf "$W"' EXIT
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes

[ -d "$WORK/gpu1g" ] || python3 bench/gen_gpu_recording.py "$WORK/gpu1g" 1024
if [ ! -f "$WORK/ls100k/index.sqlite" ]; then
  rm -rf "$WORK/ls100k"
  "$NEW" --store "$WORK/ls100k" stats >/dev/null
  python3 bench/store_ls_gen.py "$WORK/ls100k/index.sqlite" 100000
fi
# An archive of one large recording, to import (.rra chunks copied as stored).
"$NEW" pack "$LARGE/00-patch0" -o "$W/one.rra" >/dev/null
mapfile -t LFILES < <(find "$LARGE" -type f | sort)
find "$LARGE" "$WORK/gpu1g" -type f -exec cat {} + >/dev/null

declare -A best
# run NAME SETUP CMD...: one timed run (SETUP is a shell snippet run first).
run() {
  local name=$1 setup=$2 s e t
  shift 2
  sh -c "$setup"
  sync
  s=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  e=$(date +%s.%N)
  t=$(echo "$e - $s" | bc)
  if [ -z "${best[$name]:-}" ] || [ "$(echo "$t < ${best[$name]}" | bc)" = 1 ]; then best[$name]=$t; fi
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; N=$N"
for i in $(seq 1 "$N"); do
  run "large: read+blake3 (b3sum --num-threads 1)" : b3sum --num-threads 1 "${LFILES[@]}"
  run "large: read+blake3 (b3sum, all cores)" : b3sum "${LFILES[@]}"
  run "large: rrstore import (new)" "rm -rf '$W/s'" "$NEW" --store "$W/s" import "$LARGE"
  [ -n "$OLD" ] && run "large: rrstore import (old)" "rm -rf '$W/s'" "$OLD" --store "$W/s" import "$LARGE"
  run "large: tar + zstd -3 -T0" "rm -f '$W/t.tar.zst'" sh -c "tar -C '$LARGE' -cf - . | zstd -q -3 -T0 -o '$W/t.tar.zst'"
  run "large: borg create (zstd,3)" "rm -rf '$W/borg'; borg init -e none '$W/borg' >/dev/null 2>&1" borg create --compression zstd,3 "$W/borg::a" "$LARGE"
  run "rra: rrstore import one.rra (new)" "rm -rf '$W/r'" "$NEW" --store "$W/r" import "$W/one.rra"
  [ -n "$OLD" ] && run "rra: rrstore import one.rra (old)" "rm -rf '$W/r'" "$OLD" --store "$W/r" import "$W/one.rra"
  run "gpu1g: rrstore pack (new)" "rm -f '$W/x.rra'" "$NEW" pack "$WORK/gpu1g" -o "$W/x.rra"
  [ -n "$OLD" ] && run "gpu1g: rrstore pack (old)" "rm -f '$W/x.rra'" "$OLD" pack "$WORK/gpu1g" -o "$W/x.rra"
  run "gpu1g: tar -I 'zstd -3 -T0' -cf" "rm -f '$W/x.tar.zst'" tar -I 'zstd -3 -T0' -cf "$W/x.tar.zst" -C "$WORK/gpu1g" .
  run "ls100k: rrstore ls (new)" : "$NEW" --store "$WORK/ls100k" ls
  [ -n "$OLD" ] && run "ls100k: rrstore ls (old)" : "$OLD" --store "$WORK/ls100k" ls
  run "rrstore --version (process start)" : "$NEW" --version
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| what | best of $N, s |"
echo "| --- | ---: |"
for k in "${!best[@]}"; do echo "| $k | ${best[$k]} |"; done | sort

# What durability costs: time inside fsync/fdatasync during one import.
rm -rf "$W/s"; sync
strace -f --seccomp-bpf -T -e trace=fsync,fdatasync -o "$W/st" "$NEW" --store "$W/s" import "$LARGE" >/dev/null
echo
echo "fsync+fdatasync calls during one large import: $(grep -c 'sync(' "$W/st"), total $(grep -o '<[0-9.]*>' "$W/st" | tr -d '<>' | paste -sd+ | bc) s"
if [ -n "$OLD" ]; then
  "$NEW" pack "$WORK/gpu1g" -o "$W/n.rra" >/dev/null
  "$OLD" pack "$WORK/gpu1g" -o "$W/o.rra" >/dev/null
  cmp -s "$W/n.rra" "$W/o.rra" && echo "gpu1g: old and new archives are byte-identical ($(stat -c %s "$W/n.rra") bytes)"
fi
