#!/usr/bin/env bash
# Throughput of relocation's stored-pointer scan over a 64 MiB arena in
# 64 KiB pieces (in cache), release build: BENCHMARKS.md "Relocation".
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release -p rrstore-replay --lib scan_throughput -- --ignored --nocapture 2>&1 \
  | grep 'scan of'
