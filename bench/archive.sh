#!/usr/bin/env bash
# Pack/unpack benchmark: rrstore pack/unpack next to tar + zstd -3 -T0 on
# the same synthetic GPU-like recording, in the same run.
#
#   bench/archive.sh [SIZE_MIB] [--output] [--rss-only]
#
# SIZE_MIB (default 1024): arena size; --output also writes an output
# snapshot sharing ~7/8 of its chunks with the input (a multi-snapshot
# recording). Data goes to /work/data/bench (override: BENCH_DIR), never the
# repository, and is deleted at the end (KEEP=1 keeps it).
# Needs: python3, zstd, GNU time (/usr/bin/time): apt-get install -y zstd time
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-1024}; shift || true
OUTPUT=""; RSS_ONLY=""
for a in "$@"; do
  case $a in --output) OUTPUT=--output ;; --rss-only) RSS_ONLY=1 ;; esac
done
BENCH_DIR=${BENCH_DIR:-/work/data/bench}
W="$BENCH_DIR/archive-$SIZE$OUTPUT"
REC="$W/rec"
rm -rf "$W"; mkdir -p "$W"
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT

# RR=path/to/rrstore skips the build (e.g. a binary built from a clean checkout).
if [ -z "${RR:-}" ]; then
  cargo build --release -q -p rrstore-cli
  RR=target/release/rrstore
fi

echo "# generating a ${SIZE} MiB GPU-like recording ${OUTPUT} in $REC"
python3 bench/gen_gpu_recording.py "$REC" "$SIZE" $OUTPUT
IN_BYTES=$(du -cb "$REC"/* | tail -1 | cut -f1)
sync

# run LABEL CMD...: wall seconds and peak RSS from GNU time, best of
# ${REPS:-3} runs, each after a sync (so no run pays for the previous one's
# write-back).
run() {
  local label=$1; shift
  local best_t="" best_r=""
  for i in $(seq 1 "${REPS:-3}"); do
    sync
    /usr/bin/time -f "%e %M" -o "$W/time" "$@" >/dev/null
    read -r t r < "$W/time"
    if [ -z "$best_t" ] || awk "BEGIN{exit !($t < $best_t)}"; then best_t=$t; best_r=$r; fi
  done
  printf '%-26s %8.2f s  %8.1f MiB/s  peak RSS %7.1f MiB\n' "$label" "$best_t" \
    "$(awk "BEGIN{print $IN_BYTES/1048576/$best_t}")" "$(awk "BEGIN{print $best_r/1024}")"
  eval "T_$(echo "$label" | tr -c 'a-zA-Z0-9\n' _)=$best_t"
}

echo "# input: $IN_BYTES bytes in $(ls "$REC" | wc -l) files; $(nproc) cores; $(zstd --version | head -1)"
run "rrstore pack"      "$RR" pack "$REC" -o "$W/x.rra"
rm -rf "$W/unpacked"
run "rrstore unpack"    sh -c "rm -rf '$W/unpacked' && '$RR' unpack '$W/x.rra' -o '$W/unpacked'"
diff -r "$REC" "$W/unpacked" >/dev/null && echo "# rrstore round trip: identical"
if [ -z "$RSS_ONLY" ]; then
  run "tar+zstd -3 -T0 create"  tar -I 'zstd -3 -T0' -cf "$W/x.tar.zst" -C "$REC" .
  run "tar+zstd -3 -T0 extract" sh -c "rm -rf '$W/untar' && mkdir '$W/untar' && tar -I 'zstd -3 -T0' -xf '$W/x.tar.zst' -C '$W/untar'"
fi
RRA=$(stat -c %s "$W/x.rra")
echo "# sizes: input $IN_BYTES, .rra $RRA ($(awk "BEGIN{printf \"%.3f\", $IN_BYTES/$RRA}")x)"
if [ -z "$RSS_ONLY" ]; then
  TZ=$(stat -c %s "$W/x.tar.zst")
  echo "# sizes: .tar.zst $TZ ($(awk "BEGIN{printf \"%.3f\", $IN_BYTES/$TZ}")x); .rra/.tar.zst = $(awk "BEGIN{printf \"%.3f\", $RRA/$TZ}")"
  echo "# speed: pack is $(awk "BEGIN{printf \"%.2f\", $T_tar_zstd__3__T0_create/$T_rrstore_pack}")x tar+zstd create, unpack is $(awk "BEGIN{printf \"%.2f\", $T_tar_zstd__3__T0_extract/$T_rrstore_unpack}")x tar+zstd extract"
fi
