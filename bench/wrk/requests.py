#!/usr/bin/env python3
"""Helpers of bench/wrk/run.sh (standard library + PyYAML).

  requests.py lists SCENARIOS_YAML OUTDIR   write search.lua, ask.lua, mixed.lua
  requests.py keys OUTFILE                  write the keys file (SHA-256 of bench-<principal>)
  requests.py summary OUTDIR                parse wrk outputs, /metrics snapshots and RSS
                                            samples into OUTDIR/summary.md

A request list is a Lua file returning {{path=, key=, body=}, ...}; post.lua rotates
through it. Every request runs as the principal the scenario names, with its key.
"""

import hashlib
import json
import random
import re
import sys
from datetime import date, timedelta
from pathlib import Path

import yaml

PRINCIPALS = ["u7", "u8", "user-1", "zhang", "oncall", "acme-admin"]


def key_of(principal):
    return f"bench-{principal}"


def cases(scenarios_yaml):
    """(principal, now, as_of, mode, question) of every scenario case with a question."""
    out = []
    for c in yaml.safe_load(Path(scenarios_yaml).read_text(encoding="utf-8")):
        if "question" not in c or "as" not in c:
            continue
        out.append(
            (
                c["as"],
                str(c.get("now", "2026-11-30")),
                str(c["as_of"]) if "as_of" in c else None,
                c.get("mode"),
                c["question"],
            )
        )
    return out


def lua_string(s):
    level = "=" * 4
    assert f"]{level}]" not in s
    return f"[{level}[{s}]{level}]"


def write_list(path, reqs):
    lines = ["return {"]
    for r in reqs:
        lines.append(
            "  {path = %s, key = %s, body = %s},"
            % (lua_string(r["path"]), lua_string(r["key"]), lua_string(r["body"]))
        )
    lines.append("}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def search_req(principal, now, as_of, question, k=None):
    body = {"query": question, "now": now}
    if as_of:
        body["as_of"] = as_of
    if k:
        body["k"] = k
    return {
        "path": "/v1/search",
        "key": key_of(principal),
        "body": json.dumps(body, ensure_ascii=False),
    }


def ask_req(principal, now, as_of, mode, question):
    body = {"question": question, "now": now}
    if as_of:
        body["as_of"] = as_of
    if mode:
        body["mode"] = mode
    return {
        "path": "/v1/ask",
        "key": key_of(principal),
        "body": json.dumps(body, ensure_ascii=False),
    }


def cmd_lists(scenarios_yaml, outdir):
    outdir = Path(outdir)
    cs = cases(scenarios_yaml)
    write_list(outdir / "search.lua", [search_req(p, n, a, q) for p, n, a, _m, q in cs])
    write_list(outdir / "ask.lua", [ask_req(p, n, a, m, q) for p, n, a, m, q in cs])
    # The memory run: 70% search, 30% ask, with k and the business date varied so
    # that there are far more distinct requests than cache entries (the cache fills
    # and evicts instead of answering everything).
    rng = random.Random(5)
    mixed = []
    for _ in range(4000):
        p, n, a, m, q = rng.choice(cs)
        now = (date.fromisoformat(n) + timedelta(days=rng.randrange(60))).isoformat()
        if rng.random() < 0.7:
            mixed.append(search_req(p, now, a, q, k=rng.randrange(1, 11)))
        else:
            mixed.append(ask_req(p, now, a, m, q))
    write_list(outdir / "mixed.lua", mixed)
    distinct = len({(r["key"], r["path"], r["body"]) for r in mixed})
    print(f"{len(cs)} scenario questions; mixed list: {len(mixed)} requests, {distinct} distinct")


def cmd_keys(outfile):
    lines = [
        "- {key_sha256: %s, principal: %s, admin: false}"
        % (hashlib.sha256(key_of(p).encode()).hexdigest(), p)
        for p in PRINCIPALS
    ]
    Path(outfile).write_text("\n".join(lines) + "\n", encoding="utf-8")


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    return float(m.group(1)) * UNITS[m.group(2)]


def parse_wrk(text):
    out = {"non2xx": 0, "connect": 0, "read": 0, "write": 0, "timeout": 0}
    for line in text.splitlines():
        line = line.strip()
        if m := re.match(r"(\d+) requests in ([\d.]+\w+)", line):
            out["requests"] = int(m.group(1))
            out["duration_ms"] = ms(m.group(2))
        elif line.startswith("Requests/sec:"):
            out["rps"] = float(line.split()[1])
        elif m := re.match(r"(50|75|90|99)%\s+([\d.]+\w+)", line):
            out[f"p{m.group(1)}"] = ms(m.group(2))
        elif line.startswith("Non-2xx or 3xx responses:"):
            out["non2xx"] = int(line.split(":")[1])
        elif line.startswith("Socket errors:"):
            for kind, n in re.findall(r"(connect|read|write|timeout) (\d+)", line):
                out[kind] = int(n)
    return out


def parse_metrics(text):
    samples = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        series, value = line.rsplit(" ", 1)
        samples[series] = float(value)
    return samples


def statuses(before, after):
    """Responses by status between two /metrics snapshots (the /metrics route excluded)."""
    out = {}
    for series, v in after.items():
        if not series.startswith("dossier_http_requests_total{"):
            continue
        if 'route="/metrics"' in series or 'route="/healthz"' in series:
            continue
        status = re.search(r'status="(\d+)"', series).group(1)
        out[status] = out.get(status, 0) + int(v - before.get(series, 0))
    return {s: n for s, n in sorted(out.items()) if n}


def counter_diff(before, after, prefix):
    return sum(v - before.get(s, 0) for s, v in after.items() if s.startswith(prefix))


def fmt_ms(v):
    if v is None:
        return "–"
    return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.1f} ms"


def cmd_summary(outdir):
    outdir = Path(outdir)
    rows = []
    for wrk_file in sorted(outdir.glob("run-*.wrk.txt")):
        name = wrk_file.name[len("run-") : -len(".wrk.txt")]
        w = parse_wrk(wrk_file.read_text())
        before = parse_metrics((outdir / f"run-{name}.before.prom").read_text())
        after = parse_metrics((outdir / f"run-{name}.after.prom").read_text())
        st = statuses(before, after)
        hits = counter_diff(before, after, "dossier_cache_hits_total")
        misses = counter_diff(before, after, "dossier_cache_misses_total")
        hit_ratio = f"{hits / (hits + misses):.0%}" if hits + misses else "–"
        socket = w["connect"] + w["read"] + w["write"] + w["timeout"]
        rows.append(
            f"| {name} | {w.get('requests', 0)} | {w.get('rps', 0):.1f} | {fmt_ms(w.get('p50'))} "
            f"| {fmt_ms(w.get('p90'))} | {fmt_ms(w.get('p99'))} | {hit_ratio} "
            f"| {w['non2xx']} | {socket} | {json.dumps(st)} |"
        )
    lines = [
        "| run | requests | req/s | p50 | p90 | p99 | cache hits | non-2xx | socket errors | server statuses |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    rss_file = outdir / "rss.tsv"
    if rss_file.exists():
        samples = []
        for line in rss_file.read_text().splitlines():
            t, kb = line.split()
            samples.append((int(t), int(kb)))
        if samples:
            t0 = samples[0][0]

            def at(secs):
                best = min(samples, key=lambda s: abs(s[0] - t0 - secs))
                return best[1] / 1024, best[0] - t0

            rss1, t1 = at(60)
            rss10, t10 = at(samples[-1][0] - t0)
            peak = max(kb for _, kb in samples) / 1024
            lines += [
                "",
                f"Memory run: RSS {rss1:.0f} MiB at {t1} s, {rss10:.0f} MiB at {t10} s "
                f"(peak {peak:.0f} MiB; {len(samples)} samples every 10 s, first at {samples[0][1] / 1024:.0f} MiB).",
            ]
    text = "\n".join(lines) + "\n"
    (outdir / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {"lists": cmd_lists, "keys": cmd_keys, "summary": cmd_summary}[cmd](*args)
