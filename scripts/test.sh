#!/usr/bin/env bash
# Runs the whole rrstore test suite on a fresh Debian machine: installs the
# Debian packages the tests need (when missing), then `cargo test`.
#
#   liboffload-22  LLVM 22's OpenMP offload runtime (libomptarget.so.22.1;
#                  libomp.so.5 comes from libomp5-19, which it depends on):
#                  the bundled LLVM 22 host recordings' images need it.
#   libomp5-19     LLVM 19's runtime, /usr/lib/llvm-19/lib/libomptarget.so.19.1
#                  (`dpkg -S`; Debian has no liboffload-19): the LLVM 19
#                  recordings in tests/fixtures/llvm19-host. Named although
#                  liboffload-22 pulls it in, so the LLVM 19 tests keep their
#                  runtime whatever liboffload-22 comes to depend on.
#   clang-22, llvm-22, libomp-22-dev, lld-22, python3
#                  build real OpenMP offload programs in the tests and record
#                  them (tests/src/offload.rs, with a patched copy of
#                  libomptarget); lld links IR (-fopenmp-target-jit) images.
#   clang-19       LLVM 19's compiler: IR of LLVM 19 compiled by rrstore with
#                  19 and 22, and LLVM 22's IR refused by 19 (cli/tests/ir_replay.rs);
#                  `bisect --passes --toolchains 19 22` (cli/tests/bisect_passes.rs).
#   llvm-22        llvm-objdump and llvm-offload-binary, which the offload
#                  binary reader is checked against (format/tests/offload_real.rs).
#   zstd           tar+zstd comparison in the archive tests' helpers.
#   chromium, fonts-dejavu-core
#                  headless browser and a font for cli/tests/report_browser.rs,
#                  which renders `rrstore report` and checks its screenshots.
# and, from PyPI, moto's S3 server (`moto_server`): the remote tests start a
# real S3-compatible server on loopback.
#
# As root it also reserves a small huge page pool (64 pages of 2 MiB,
# `vm.nr_hugepages`, when the machine has fewer) and sets
# RRSTORE_TEST_HUGE_POOL, so the host arena's pool path
# (replay/src/backend/host/arena.rs) is tested rather than skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
PKGS="liboffload-22 libomp5-19 clang-22 llvm-22 libomp-22-dev lld-22 clang-19 python3 zstd chromium fonts-dejavu-core"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "== installing Debian packages:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

if ! command -v moto_server >/dev/null 2>&1; then
  echo "== installing moto[server] (S3-compatible test server) from PyPI"
  python3 -m pip install -q 'moto[server]'
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
  hash -r
fi

POOL=/proc/sys/vm/nr_hugepages
if [ "$(id -u)" = 0 ] && [ -w "$POOL" ] && [ "$(cat "$POOL")" -lt 64 ]; then
  echo 64 >"$POOL" || true
fi
FREE=/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages
if [ -r "$FREE" ] && [ "$(cat "$FREE")" -ge 2 ]; then
  export RRSTORE_TEST_HUGE_POOL=1
fi

cargo test --workspace --locked "$@"
