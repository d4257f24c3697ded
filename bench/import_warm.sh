#!/usr/bin/env bash
# Import against an all-core read+blake3 pass with warm page caches
# (issue 24): import_limit.sh syncs before every command, and on this VM
# the page cache of idle files is reclaimed, so its b3sum figures include
# cold reads. Here each of N interleaved pairs reads the corpus once
# (untimed), then times `b3sum` over its files and `rrstore import` into a
# fresh store, back to back; prints both medians and mins, and the ratios.
#
#   bash bench/import_warm.sh CORPUS_DIR [N=7]   (RR=target/release/rrstore)
set -euo pipefail
cd "$(dirname "$0")/.."
C=$1; N=${2:-7}
RR=${RR:-$PWD/target/release/rrstore}
W=$(mktemp -d "${TMPDIR:-/tmp}/import-warm.XXXX")
trap 'rm -rf "$W"' EXIT
mapfile -t FILES < <(find "$C" -type f | sort)
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
: >"$W/b3"; : >"$W/rr"
for i in $(seq "$N"); do
  cat "${FILES[@]}" >/dev/null
  t b3sum "${FILES[@]}" >>"$W/b3"
  rm -rf "$W/store"
  t "$RR" --store "$W/store" import -q "$C" >>"$W/rr"
done
med() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mn() { sort -g "$1" | head -1; }
echo "corpus $C ($(du -sb "$C" | cut -f1) bytes), $N pairs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "b3sum:  median $(med "$W/b3") s, min $(mn "$W/b3") s   ($(tr '\n' ' ' <"$W/b3"))"
echo "import: median $(med "$W/rr") s, min $(mn "$W/rr") s   ($(tr '\n' ' ' <"$W/rr"))"
echo "ratio: median/median $(echo "scale=2; $(med "$W/rr") / $(med "$W/b3")" | bc)x, min/min $(echo "scale=2; $(mn "$W/rr") / $(mn "$W/b3")" | bc)x"
