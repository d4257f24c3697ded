#!/usr/bin/env bash
# Import against an all-core read+blake3 pass with warm page caches
# (issue 24): import_limit.sh syncs before every command, and on this VM
# the page cache of idle files is reclaimed, so its b3sum figures include
# cold reads. Here each of N interleaved rounds reads the corpus once
# (untimed), then times `b3sum` over its files and `rrstore import` into a
# fresh store with each binary, back to back; prints medians and mins, and
# each binary's ratios to b3sum. Several binaries (RR="old new") are timed
# in the same rounds, so a change is compared under the same drift.
#
#   bash bench/import_warm.sh CORPUS_DIR [N=7]   (RR=target/release/rrstore)
set -euo pipefail
cd "$(dirname "$0")/.."
C=$1; N=${2:-7}
read -r -a BINS <<<"${RR:-$PWD/target/release/rrstore}"
W=$(mktemp -d "${TMPDIR:-/tmp}/import-warm.XXXX")
trap 'rm -rf "$W"' EXIT
mapfile -t FILES < <(find "$C" -type f | sort)
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
: >"$W/b3"
for k in "${!BINS[@]}"; do : >"$W/rr$k"; done
for i in $(seq "$N"); do
  cat "${FILES[@]}" >/dev/null
  t b3sum "${FILES[@]}" >>"$W/b3"
  for k in "${!BINS[@]}"; do
    rm -rf "$W/store"
    t "${BINS[$k]}" --store "$W/store" import -q "$C" >>"$W/rr$k"
  done
done
med() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mn() { sort -g "$1" | head -1; }
echo "corpus $C ($(du -sb "$C" | cut -f1) bytes), $N rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "b3sum:  median $(med "$W/b3") s, min $(mn "$W/b3") s   ($(tr '\n' ' ' <"$W/b3"))"
for k in "${!BINS[@]}"; do
  f=$W/rr$k
  echo "import ${BINS[$k]}: median $(med "$f") s, min $(mn "$f") s   ($(tr '\n' ' ' <"$f"))"
  echo "  ratio: median/median $(echo "scale=2; $(med "$f") / $(med "$W/b3")" | bc)x, min/min $(echo "scale=2; $(mn "$f") / $(mn "$W/b3")" | bc)x"
done
