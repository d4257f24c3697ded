#!/usr/bin/env bash
# Builds rrstore and runs its main job on the bundled example recordings
# (real LLVM 22 host-offload recordings in tests/fixtures/llvm22-host) with the
# default embedded store ($RRSTORE_DIR, else ~/.local/share/rrstore):
# import, list, show, replay with verification, replay history, and a
# pack/unpack round trip through a single-file .rra archive.
set -euo pipefail
cd "$(dirname "$0")/.."

# Replaying the host images needs LLVM's OpenMP offload runtime.
if ! dpkg -s liboffload-22 >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "== installing liboffload-22 (LLVM 22 OpenMP offload runtime, needed to replay host images)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends liboffload-22
fi

cargo build --release --locked -p rrstore-cli
RR=target/release/rrstore
FIX=tests/fixtures/llvm22-host
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# The bundled recordings were made with 2 OpenMP threads; float reductions
# are bit-reproducible only with the same count.
export OMP_NUM_THREADS=2

echo "== rrstore import $FIX"
$RR import "$FIX" --label demo
echo "== rrstore ls"
$RR ls --label demo
echo "== rrstore stats"
$RR stats
echo "== rrstore replay (every bundled recording, verified byte for byte)"
for id in $($RR ls --label demo --json | python3 -c 'import json,sys; [print(r["id"]) for r in json.load(sys.stdin)]'); do
  $RR replay "$id"
done
echo "== rrstore history"
$RR history | tail -n 12
echo "== rrstore show (the globals recording)"
GID=$($RR ls --label demo --kernel '*9ae057*' --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
$RR show "$GID"
echo "== rrstore pack / inspect / unpack"
$RR pack "$FIX/saxpy" -o "$OUT/saxpy.rra"
$RR inspect "$OUT/saxpy.rra"
$RR unpack "$OUT/saxpy.rra" -o "$OUT/saxpy"
for f in "$FIX"/saxpy/*; do cmp "$f" "$OUT/saxpy/$(basename "$f")"; done
echo "unpacked files are byte-identical to the originals"
