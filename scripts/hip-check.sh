#!/usr/bin/env bash
# First step of the AMD check list (docs/gpu.md, "First run on an AMD GPU"):
# compiles tests/gpu/hip_layouts.c against this machine's HIP headers, which
# holds only when every struct offset, enum value and error code that
# replay/src/backend/gpu/hip/ffi.rs hard-codes matches them; then lists the
# devices the HIP backend sees, next to rocm-smi's view of them.
#
# Usage: scripts/hip-check.sh [path/to/rrstore]   (default target/release/rrstore)
# Needs: ROCm 6.x or 7.x (headers under $ROCM_PATH/include, default /opt/rocm), a C compiler.
# Exit status: 0 when the layouts match, 1 when one differs, 2 when a prerequisite is missing.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROCM=${ROCM_PATH:-/opt/rocm}
CC=${CC:-$(command -v cc || command -v gcc || command -v clang || true)}
[ -n "$CC" ] || { echo "hip-check: no C compiler (install gcc)"; exit 2; }
[ -f "$ROCM/include/hip/hip_runtime_api.h" ] || { echo "hip-check: no HIP headers under $ROCM/include (set ROCM_PATH)"; exit 2; }

echo "== HIP headers: $ROCM/include ($(grep -m1 -o 'HIP_VERSION_MAJOR [0-9]*' "$ROCM/include/hip/hip_version.h" 2>/dev/null || echo 'version unknown'))"
if "$CC" -std=c11 -fsyntax-only -D__HIP_PLATFORM_AMD__ -I"$ROCM/include" "$ROOT/tests/gpu/hip_layouts.c"; then
  echo "== layouts: match (every CHECK in tests/gpu/hip_layouts.c holds)"
else
  echo "== layouts: DIFFER: fix replay/src/backend/gpu/hip/ffi.rs and tests/gpu/hip_layouts.c before any replay"
  exit 1
fi

BIN=${1:-$ROOT/target/release/rrstore}
if [ -x "$BIN" ]; then
  echo "== rrstore devices"
  "$BIN" devices || true
fi
if command -v rocm-smi >/dev/null; then
  echo "== rocm-smi --showproductname --showuniqueid --showmeminfo vram"
  rocm-smi --showproductname --showuniqueid --showmeminfo vram || true
fi
