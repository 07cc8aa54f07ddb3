#!/usr/bin/env python3
"""Where the document an enterprise-dev case cites ranks in a search, per case.

    target/debug/dossier --store /tmp/ent ingest ../shared/enterprise-dev/docs \
        ../shared/enterprise-dev/principals.yaml ../shared/enterprise-dev/records
    python3 bench/enterprise-retrieval/rank.py /tmp/ent graph

For every case expecting an answer: the search (as the case's principal, at its
business date and as-of date, in the given mode, 300 hits: the whole corpus) and the
rank of the first hit from a cited document. Prints top-1/5/10 counts for the
cross-lingual cases and for the others (BENCHMARKS.md, stop 46).
"""
import json
import subprocess
import sys

import yaml

store, mode = sys.argv[1], sys.argv[2]
binary = sys.argv[3] if len(sys.argv) > 3 else "target/debug/dossier"
cases = yaml.safe_load(open("../shared/enterprise-dev/cases.yaml"))
ranks = {"cross-lingual": [], "other": []}
for c in cases:
    e = c["expect"]
    if e.get("status") != "answered" or not e.get("cites_all"):
        continue
    docs = {x["doc"] for x in e["cites_all"]}
    args = [binary, "--store", store, "search", "--as", c["as"],
            "--now", str(c.get("now", "2026-10-15"))]
    if c.get("as_of"):
        args += ["--as-of", str(c["as_of"])]
    args += ["--mode", mode, "-k", "300", c["question"], "--json"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    hits = json.loads(out)["hits"]
    rank = next((i for i, h in enumerate(hits) if h["doc_id"] in docs), 999)
    group = "cross-lingual" if c["kind"] == "cross-lingual" else "other"
    ranks[group].append(rank)
    print(c["id"], c["kind"], rank, flush=True)
for group, r in ranks.items():
    print(f"{mode} {group}: {len(r)} cases, top1 {sum(x == 0 for x in r)}, "
          f"top5 {sum(x < 5 for x in r)}, top10 {sum(x < 10 for x in r)}")
