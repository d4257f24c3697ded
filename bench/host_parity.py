#!/usr/bin/env python3
"""Crash and output parity of host replays, rrstore against LLVM's tool
(docs/replay.md, "The host call path"; issue 44 item 2).

usage: host_parity.py N RRSTORE STORE RECDIR...
  env LLVM_TOOL_DIR: directory of the patched llvm-omp-kernel-replay and the
      libomptarget.so.22.1 it runs with (default /work/exp); NOLLVM=1 skips it.
  env RRX: extra `rrstore replay` arguments.
Per recording directory (one LLVM recording, made with
`OMP_NUM_THREADS=2 LD_LIBRARY_PATH=<patched runtime>:/usr/lib/llvm-22/lib
LIBOMPTARGET_RECORD=1 LIBOMPTARGET_RR_SAVE_OUTPUT=1 ./prog`): N replays
with each tool; prints (verified, crashed) counts and the bytes each
replay's output differs from the recorded one.

The "garbage index" row's program (5 recordings of it):
    const int teams = 4, n = 4096;
    float *in = (float *)malloc(n * sizeof(float));
    float *out = (float *)calloc(teams, sizeof(float));
    for (int i = 0; i < n; i++) in[i] = (i % 7) * 0.25f;
    #pragma omp target teams num_teams(teams) thread_limit(256) \\
        map(to : in[0:n]) map(tofrom : out[0:teams])
    {
      int idx[256];
      int team = omp_get_team_num();
    #pragma omp parallel
      { for (int t = omp_get_thread_num(); t < 256; t += 128) idx[t] = t * 3; }
      float s = 0;
      for (int i = 0; i < 256; i++) { int v = idx[i]; if (v < 0) v = -v; s += in[v % (1 << 22)]; }
      out[team] = s;
    }
"""
import glob, json, os, subprocess, sys

n, rr, store = int(sys.argv[1]), sys.argv[2], sys.argv[3]
tool_dir = os.environ.get('LLVM_TOOL_DIR', '/work/exp')
extra = os.environ.get('RRX', '').split()
env = dict(os.environ, OMP_NUM_THREADS='2')
lenv = dict(env, LD_LIBRARY_PATH=tool_dir + ':/usr/lib/llvm-22/lib')
total = {}
for d in sys.argv[4:]:
    js = glob.glob(d + '/*.json')[0]
    orig = open(glob.glob(d + '/*.original.output')[0], 'rb').read()
    res = {}
    if os.environ.get('NOLLVM') is None:
        ok = crashed = 0
        diffs = []
        for _ in range(n):
            out = js[:-5] + '.replay.output'
            if os.path.exists(out):
                os.remove(out)
            # It writes the output only with --verify (LLVM 22.1).
            p = subprocess.run([tool_dir + '/llvm-omp-kernel-replay', '--verify', os.path.basename(js)],
                               cwd=d, env=lenv, capture_output=True, timeout=60)
            if p.returncode != 0 or not os.path.exists(out):
                crashed += 1
            else:
                b = open(out, 'rb').read()
                ok += b == orig
                diffs.append(sum(x != y for x, y in zip(b, orig)))
        res['llvm'] = (ok, crashed)
        res['llvm_diff'] = sorted(diffs)
    ok = crashed = 0
    diffs = []
    for _ in range(n):
        p = subprocess.run([rr, '--store', store, 'replay', d, '--confirm', '0', '--json'] + extra,
                           env=env, capture_output=True, timeout=120)
        v = json.loads(p.stdout)
        verdict = v.get('verdict')
        diffs.append((v.get('mismatch') or {}).get('differing_bytes', 0))
        if verdict == 'verified':
            ok += 1
        elif verdict != 'mismatch':
            crashed += 1
    res['rr'] = (ok, crashed)
    res['rr_diff'] = sorted(diffs)
    print(d, res, flush=True)
    for k, v in res.items():
        if not k.endswith('diff'):
            t = total.setdefault(k, [0, 0])
            t[0] += v[0]
            t[1] += v[1]
print('TOTAL (verified, crashed) over %d replays per recording:' % n, total)
