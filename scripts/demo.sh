#!/usr/bin/env bash
# Builds rrstore and runs its main job on the bundled example recordings
# with the default embedded store ($RRSTORE_DIR, else ~/.local/share/rrstore).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p rrstore-cli
RR=target/release/rrstore
FIX=tests/fixtures/llvm22-host
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

echo "== rrstore pack / inspect / unpack"
$RR pack "$FIX/saxpy" -o "$OUT/saxpy.rra"
$RR inspect "$OUT/saxpy.rra"
$RR unpack "$OUT/saxpy.rra" -o "$OUT/saxpy"
cmp "$FIX/saxpy/__omp_offloading_fe00_9ae056_main_l13.memory" "$OUT/saxpy/__omp_offloading_fe00_9ae056_main_l13.memory"
echo "unpacked files are byte-identical to the originals"
