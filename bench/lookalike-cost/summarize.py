#!/usr/bin/env python3
"""Size, hits and conflicts of one `dossier search --json` body. Usage: summarize.py FILE"""
import json, os, sys

p = sys.argv[1]
r = json.load(open(p))
print("search body %d bytes, %d hits, %d conflicts listed, conflicts_total %s" % (
    os.path.getsize(p), len(r["hits"]), len(r["conflicts"]), r.get("conflicts_total", "absent")))
