#!/usr/bin/env python3
"""Bench-only: insert N synthetic recording rows straight into a store index
(`rrstore ls` reads only the index; the manifests are dummies, so these rows
must never be exported or verified). Usage: store_ls_gen.py INDEX N"""
import os, sqlite3, sys, time

path, n = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(path)
now = int(time.time())
rows = []
for i in range(n):
    rid = os.urandom(32)
    rows.append((rid, rid.hex(), f"kern_{i % 1000}", "kernel-named", "x86_64" if i % 3 else "sm_90",
                 140000000000 + i, 1 << 20, 1 << 20, 1 << 20, 4, 0, 2 << 20, None,
                 now - i, "/synthetic", f"run-{i % 50}"))
db.executemany("INSERT INTO recordings VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
db.commit()
