#!/usr/bin/env bash
# Store benchmark (not a test): rrstore import/export against tar+zstd,
# borg 1.2 (zstd,3), restic and a plain read+blake3 pass, side by side on the
# same files in one run; then a 4 GiB snapshot import (peak RSS) and `ls`
# over 100,000 synthesized recordings. Results: BENCHMARKS.md.
#
#   apt-get install -y borgbackup restic zstd && cargo install b3sum
#   cargo build --release -p rrstore-cli
#   bash bench/store.sh            # LARGE=/work/data/corpus/large WORK=/work/data
set -euo pipefail
cd "$(dirname "$0")/.."
LARGE=${LARGE:-/work/data/corpus/large}
MULTI=${MULTI:-tests/fixtures/llvm22-host/multi}
WORK=${WORK:-/work/data}
RR=${RR:-$PWD/target/release/rrstore}
W=$(mktemp -d "$WORK/bench-store.XXXXXX")
trap 'rm -rf "$W"' EXIT
export RESTIC_PASSWORD=bench BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes

now() { date +%s.%N; }
# secs CMD...: wall seconds of CMD (output discarded)
secs() { local s e; s=$(now); "$@" >/dev/null 2>&1; e=$(now); echo "$e - $s" | bc; }
# best3 SETUP CMD...: best wall seconds of 3 runs of CMD, SETUP (a shell
# snippet, e.g. removing the previous run's output) run before each.
best3() { local setup=$1 b="" t; shift; for _ in 1 2 3; do sh -c "$setup"; sync; t=$(secs "$@"); if [ -z "$b" ] || [ "$(echo "$t < $b" | bc)" = 1 ]; then b=$t; fi; done; echo "$b"; }
packsize() { find "$1" -name '*.pack' -printf '%s\n' | awk '{s+=$1} END {print s+0}'; }
size() { du -sb "$1" | cut -f1; }
warm() { find "$1" -type f -exec cat {} + >/dev/null; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
corpus() {
  local name=$1 dir=$2 files bytes
  warm "$dir"
  bytes=$(find "$dir" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
  echo "## $name ($dir, $bytes bytes)"
  echo
  echo "| tool | wall s | stored bytes | ratio to input |"
  echo "| --- | ---: | ---: | ---: |"
  mapfile -t files < <(find "$dir" -type f | sort)
  local t
  t=$(best3 : b3sum --num-threads 1 "${files[@]}"); echo "| read+blake3 (b3sum --num-threads 1) | $t | - | - |"
  t=$(best3 : b3sum "${files[@]}"); echo "| read+blake3 (b3sum, all cores) | $t | - | - |"
  t=$(best3 "rm -rf '$W/s'" "$RR" --store "$W/s" import "$dir")
  local packs; packs=$(packsize "$W/s/packs")
  echo "| rrstore import | $t | $packs packs (+$(size "$W/s/index.sqlite") index) | $(echo "scale=4; $packs / $bytes" | bc) |"
  t=$(best3 "rm -f '$W/t.tar.zst'" sh -c "tar -C '$dir' -cf - . | zstd -q -3 -T0 -o '$W/t.tar.zst'")
  echo "| tar + zstd -3 -T0 | $t | $(size "$W/t.tar.zst") | $(echo "scale=4; $(size "$W/t.tar.zst") / $bytes" | bc) |"
  t=$(best3 "rm -rf '$W/borg'; borg init -e none '$W/borg' >/dev/null 2>&1" borg create --compression zstd,3 "$W/borg::a" "$dir")
  echo "| borg create (zstd,3) | $t | $(size "$W/borg") | $(echo "scale=4; $(size "$W/borg") / $bytes" | bc) |"
  t=$(best3 "rm -rf '$W/restic'; restic init -q --repo '$W/restic' >/dev/null 2>&1" restic -q --repo "$W/restic" backup "$dir")
  echo "| restic backup | $t | $(size "$W/restic") | $(echo "scale=4; $(size "$W/restic") / $bytes" | bc) |"
  # Export every recording back to LLVM files vs extracting the tar.zst.
  local ids; mapfile -t ids < <("$RR" --store "$W/s" ls --json | python3 -c 'import json,sys; [print(r["id"]) for r in json.load(sys.stdin)]')
  t=$(best3 "rm -rf '$W/x'; mkdir -p '$W/x'" sh -c "for i in ${ids[*]}; do '$RR' --store '$W/s' export \$i -o '$W/x/'\$i || exit 1; done")
  echo "| rrstore export (all ${#ids[@]}) | $t | - | - |"
  t=$(best3 "rm -rf '$W/y'; mkdir -p '$W/y'" sh -c "zstd -q -d -T0 -c '$W/t.tar.zst' | tar -C '$W/y' -xf -")
  echo "| tar -x of the tar.zst | $t | - | - |"
  echo
  "$RR" --store "$W/s" stats | sed 's/^/    /'
  echo
}

echo "# store benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
echo
corpus large "$LARGE"
corpus multi "$MULTI"

# 4 GiB snapshot: 1 GiB random + 3 GiB zeros, one recording, import peak RSS.
echo "## 4 GiB snapshot import"
echo
R=$W/big; mkdir -p "$R"
src=tests/fixtures/llvm22-host/saxpy
stem=__omp_offloading_fe00_9ae056_main_l13
cp "$src/$stem.image" "$src/$stem.globals" "$R/"
head -c $((1 << 30)) /dev/urandom > "$R/$stem.memory"
truncate -s $((4 << 30)) "$R/$stem.memory"
sed -e 's/"DeviceMemorySize":[0-9]*/"DeviceMemorySize":4294967296/' "$src/$stem.json" > "$R/$stem.json"
rm -rf "$W/s4"
/usr/bin/time -v "$RR" --store "$W/s4" import "$R" 2> "$W/time.txt" >/dev/null
echo "    $(grep -E 'Maximum resident' "$W/time.txt")"
echo "    $(grep -E 'Elapsed' "$W/time.txt")"
/usr/bin/time -v "$RR" --store "$W/s4" export "$("$RR" --store "$W/s4" ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" -o "$W/big-out" 2> "$W/time2.txt" >/dev/null
echo "    export: $(grep -E 'Maximum resident' "$W/time2.txt")"
cmp "$R/$stem.memory" "$W/big-out/$stem.memory" && echo "    export byte-identical"
rm -rf "$R" "$W/big-out" "$W/s4"
echo

# ls over 100,000 recordings (index rows synthesized by bench/store_ls_gen.py).
echo "## ls over 100,000 recordings"
echo
rm -rf "$W/s5"; "$RR" --store "$W/s5" stats >/dev/null
python3 bench/store_ls_gen.py "$W/s5/index.sqlite" 100000
"$RR" --store "$W/s5" ls >/dev/null
echo "    rrstore ls (100k lines to /dev/null): $(best3 : "$RR" --store "$W/s5" ls) s"
echo "    rrstore --version (process start): $(best3 : "$RR" --version) s"
echo "    rrstore ls --kernel 'kern_7*': $(secs "$RR" --store "$W/s5" ls --kernel 'kern_7*') s"
echo "    rrstore ls --json: $(secs "$RR" --store "$W/s5" ls --json) s"
