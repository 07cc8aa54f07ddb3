#!/usr/bin/env python3
"""Writes a corpus of N Markdown documents titled "Meeting notes 1" ... "Meeting notes N"
(one shared title stem, distinct content) plus principals.yaml, for an end-to-end ingest
and search through the release `dossier` binary. With a third argument `template`, every
document has the same body (look-alikes by content). Usage: make_corpus.py N DIR [template]"""
import os, random, sys

n, out = int(sys.argv[1]), sys.argv[2]
os.makedirs(os.path.join(out, "docs"), exist_ok=True)
with open(os.path.join(out, "principals.yaml"), "w") as f:
    f.write("principals:\n  - id: u1\n    tenant: bench\n    groups: [staff]\n")
rng = random.Random(39)
vocab = ["%s%d" % (p, i) for p in ("ka", "lo", "mi", "ne", "su") for i in range(1000)]
for i in range(1, n + 1):
    words = " ".join(rng.choice(vocab) for _ in range(80))
    if len(sys.argv) > 3 and sys.argv[3] == "template":
        words = "the same template body for every meeting: attendees, decisions and actions"
    with open(os.path.join(out, "docs", "notes-%05d.md" % i), "w") as f:
        f.write(
            "---\nid: notes-%d\nversion: \"1\"\ntitle: Meeting notes %d\ntenant: bench\n"
            "effective_from: 2026-01-01\n---\n\n# Meeting notes %d\n\nAgenda and minutes: %s\n"
            % (i, i, i, words)
        )
