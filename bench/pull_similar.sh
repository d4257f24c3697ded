#!/usr/bin/env bash
# sim.sh RR CORPUS REMOTE_URL ENTRY: pull --all into a store holding ENTRY; print bytes/missing and the breakdown
RR=$1; C=$2; URL=$3; one=$4
d=$(mktemp -d ${TMPDIR:-/tmp}/one.XXXX)
$RR --store $d import "$C/$one" >/dev/null
$RR --store $d remote add lab "$URL" >/dev/null
${STRACE:+strace -f -c -e trace=fcntl -o $d.strace} $RR --store $d pull lab --all --json > $d.json
python3 - "$d.json" "$one" <<'PY'
import json,sys
j=json.load(open(sys.argv[1])); b=j['bytes']; m=j['missing_stored_bytes']
print(f"{sys.argv[2]}: received {b} for {m} missing: {b/m if m else 0:.4f}x, {j['requests']} requests; {j.get('received','')}")
PY
[ -n "$STRACE" ] && grep fcntl $d.strace
rm -rf $d $d.json $d.strace
