#!/usr/bin/env python3
"""The FTS5 trigram baseline in docs/benchmarks.md: every body of a mirror.db into an FTS5
trigram table (detail=full and detail=none), one transaction each.

    python3 scripts/fts5-trigram-baseline.py target/bench-data/search-home-50000/mirror.db
"""
import sqlite3, time, os, sys
src = sys.argv[1]
for detail in ["full", "none"]:
    dst = f"/tmp/fts5-{detail}.db"
    for ext in ["", "-wal", "-shm"]:
        try: os.remove(dst + ext)
        except FileNotFoundError: pass
    c = sqlite3.connect(dst)
    c.execute(f"ATTACH '{src}' AS m")
    c.execute(f"CREATE VIRTUAL TABLE b USING fts5(body, tokenize='trigram', detail={detail})")
    t = time.time()
    c.execute("INSERT INTO b(rowid, body) SELECT message_id, body_text FROM m.message_bodies")
    c.commit()
    el = time.time() - t
    c.execute("DETACH m")
    c.close()
    print(f"FTS5 trigram body, detail={detail}: {el:.1f} s, {os.path.getsize(dst)/1e6:.0f} MB")
