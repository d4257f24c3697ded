#!/usr/bin/env bash
# multi export (one process, 8 recordings) vs tar -x of the tar.zst of the same files
set -euo pipefail
RR=${RR:-target/release/rrstore}
W=$(mktemp -d /work/data/mexp.XXXX)
trap 'rm -rf "$W"' EXIT
M=tests/fixtures/llvm22-host/multi
uptime
$RR --store "$W/s" import "$M" >/dev/null
tar -I 'zstd -3 -T0' -cf "$W/multi.tar.zst" -C tests/fixtures/llvm22-host multi
IDS=$($RR --store "$W/s" ls --json | python3 -c 'import json,sys; print(" ".join(r["id"][:12] for r in json.load(sys.stdin)))')
hyperfine -N --warmup 3 --runs 30 \
  --prepare "rm -rf $W/x $W/t" \
  -n "rrstore export (8 IDs, one process)" "$RR --store $W/s export $IDS -o $W/x" \
  -n "tar -x of multi.tar.zst" "sh -c 'mkdir -p $W/t && tar -I zstd -xf $W/multi.tar.zst -C $W/t'"
