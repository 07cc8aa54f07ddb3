#!/usr/bin/env python3
"""Compare Dossier's BM25 with the `bm25s` PyPI package on the same corpus and questions.

For each dataset directory (corpus.jsonl + questions.jsonl):
  * bm25s indexes title + text of every passage, retrieves the top 10 for every
    question, and the bare `retrieve` call of each single question is timed;
  * Dossier is run as `dossier --store STORE eval DATASET --mode bm25 -k 5 --depth 10
    --json --per-question` (10 chunks ranked, bm25s's k) and its figures are read back;
  * Recall@5 and MRR@10 are computed for both with the same code here (Dossier's own
    figures are checked against that recomputation).

A side-by-side table goes to stdout and everything to bench/out/bm25s_compare.json.
Nothing is installed here: see bench/README.md (`pip install -r bench/requirements.txt`).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import os
import platform
import subprocess
import sys
import time
import unicodedata
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATASETS = [REPO.parent / "shared" / "datasets" / "2wiki", REPO.parent / "shared" / "datasets" / "rgb-zh"]
DEFAULT_OUT = REPO / "bench" / "out" / "bm25s_compare.json"
TOP_K = 10

try:
    import numpy as np
    import bm25s
except ImportError as e:  # pragma: no cover - environment problem, not a code path
    sys.exit(f"error: {e}. Install the benchmark's dependencies first: pip install -r bench/requirements.txt")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# ---------------------------------------------------------------- data

def read_jsonl(path: Path) -> list[dict]:
    out = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"error: {path}:{n}: {e}")
    return out


def load_dataset(d: Path) -> tuple[list[dict], list[dict]]:
    corpus, questions = d / "corpus.jsonl", d / "questions.jsonl"
    for p in (corpus, questions):
        if not p.is_file():
            sys.exit(f"error: {p}: not found (a dataset has corpus.jsonl and questions.jsonl)")
    return read_jsonl(corpus), read_jsonl(questions)


def passage_text(p: dict) -> str:
    title = (p.get("title") or "").strip()
    text = p.get("text") or ""
    return f"{title}\n{text}" if title else text


def is_cjk(ch: str) -> bool:
    return "CJK" in unicodedata.name(ch, "")


def detect_lang(corpus: list[dict]) -> str:
    """'zh' when at least a fifth of the letters in a sample of passages are CJK."""
    letters = cjk = 0
    for p in corpus[:300]:
        for ch in passage_text(p):
            if ch.isalpha():
                letters += 1
                cjk += is_cjk(ch)
    return "zh" if letters and cjk / letters >= 0.2 else "en"


# ---------------------------------------------------------------- tokenizers

def make_stemmer():
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        log("warning: PyStemmer is not installed: English text is not stemmed")
        return None
    return Stemmer.Stemmer("english")


class EnglishTokenizer:
    """bm25s's own tokenizer: lower-case, regex (?u)\\b\\w\\w+\\b, bm25s English stopwords,
    PyStemmer (Snowball) English stemmer."""

    def __init__(self, stemmer):
        self.stemmer = stemmer
        self.description = {
            "lang": "en",
            "tokenizer": "bm25s.tokenize(lower=True, token_pattern=r'(?u)\\b\\w\\w+\\b', stopwords='en')",
            "stopwords": "bm25s built-in English list ('en')",
            "stemmer": "PyStemmer Snowball 'english'" if stemmer else None,
        }

    def _tok(self, texts: list[str]) -> list[list[str]]:
        return bm25s.tokenize(texts, lower=True, stopwords="en", stemmer=self.stemmer,
                              return_ids=False, show_progress=False)

    def corpus(self, texts: list[str]) -> list[list[str]]:
        return self._tok(texts)

    def query(self, text: str) -> list[str]:
        return self._tok([text])[0]


class ChineseTokenizer:
    """jieba search-mode segmentation without HMM by default (as Dossier's analyzer), tokens without any
    letter or digit dropped, lower-cased, English Snowball stemmer on every token (a
    no-op on Chinese words; Dossier's analyzer does the same); no stopwords."""

    def __init__(self, stemmer, hmm: bool):
        import jieba

        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()  # load the dictionary now, not inside the first timed call
        self.jieba = jieba
        self.hmm = hmm
        self.stem = stemmer.stemWord if stemmer else (lambda w: w)
        self.description = {
            "lang": "zh",
            "tokenizer": f"jieba.lcut_for_search(text, HMM={hmm}) (search mode), default dictionary",
            "filter": "drop tokens with no alphanumeric character; lower-case",
            "stopwords": None,
            "stemmer": "PyStemmer Snowball 'english' on every token" if stemmer else None,
        }

    def query(self, text: str) -> list[str]:
        return [self.stem(w.lower()) for w in self.jieba.lcut_for_search(text, HMM=self.hmm)
                if any(c.isalnum() for c in w)]

    def corpus(self, texts: list[str]) -> list[list[str]]:
        return [self.query(t) for t in texts]


# ---------------------------------------------------------------- metrics

def recall(gold: set[str], got: list[str], k: int) -> float:
    if not gold:
        return 0.0
    return sum(1 for d in got[:k] if d in gold) / len(gold)


def reciprocal_rank(gold: set[str], got: list[str]) -> float:
    for i, d in enumerate(got[:TOP_K]):
        if d in gold:
            return 1.0 / (i + 1)
    return 0.0


def percentile(sorted_vals: list[float], p: float) -> float:
    """Nearest rank, rounded: the same definition as Dossier's eval."""
    if not sorted_vals:
        return 0.0
    return sorted_vals[round((len(sorted_vals) - 1) * p)]


def score(questions: list[dict], retrieved: list[list[str]]) -> dict:
    n = max(len(questions), 1)
    sums = {"recall@2": 0.0, "recall@5": 0.0, "recall@10": 0.0, "mrr": 0.0}
    for q, got in zip(questions, retrieved):
        gold = set(q.get("gold_ids") or [])
        sums["recall@2"] += recall(gold, got, 2)
        sums["recall@5"] += recall(gold, got, 5)
        sums["recall@10"] += recall(gold, got, 10)
        sums["mrr"] += reciprocal_rank(gold, got)
    return {k: v / n for k, v in sums.items()}


def latency(ms: list[float]) -> dict:
    s = sorted(ms)
    return {
        "latency_p50_ms": percentile(s, 0.5),
        "latency_p99_ms": percentile(s, 0.99),
        "latency_mean_ms": sum(s) / len(s) if s else 0.0,
    }


# ---------------------------------------------------------------- bm25s

def run_bm25s(corpus: list[dict], questions: list[dict], lang: str, args) -> dict:
    stemmer = make_stemmer()
    tok = ChineseTokenizer(stemmer, args.jieba_hmm) if lang == "zh" else EnglishTokenizer(stemmer)
    ids = [str(p["id"]) for p in corpus]

    t0 = time.perf_counter()
    corpus_tokens = tok.corpus([passage_text(p) for p in corpus])
    t1 = time.perf_counter()
    retriever = bm25s.BM25(k1=args.k1, b=args.b, method=args.method, backend="numpy", csc_backend="numpy")
    retriever.index(corpus_tokens, show_progress=False)
    t2 = time.perf_counter()
    k = min(TOP_K, len(ids))

    def retrieve(qtokens: list[str]):
        return retriever.retrieve([qtokens], k=k, show_progress=False, n_threads=0,
                                  backend_selection="numpy")

    # Tokenize every question first (untimed for the headline figure), warm up, then time
    # each single-question retrieve call on its own.
    qtokens = [tok.query(q["question"]) for q in questions]
    for qt in qtokens[: args.warmup]:
        retrieve(qt)
    retrieved, lat_retrieve, lat_total = [], [], []
    for q, qt in zip(questions, qtokens):
        s = time.perf_counter()
        qt2 = tok.query(q["question"])  # tokenizing again, only for the tokenize+retrieve figure
        m = time.perf_counter()
        res = retrieve(qt2)
        e = time.perf_counter()
        lat_retrieve.append((e - m) * 1000.0)
        lat_total.append((e - s) * 1000.0)
        docs, scores = res.documents[0], res.scores[0]
        # Keep only passages that matched a query term (score > 0), as a term index does.
        retrieved.append([ids[int(d)] for d, sc in zip(docs, scores) if sc > 0])

    out = {"system": "bm25s", "questions": len(questions)}
    out.update(score(questions, retrieved))
    out.update(latency(lat_retrieve))
    tot = latency(lat_total)
    out["tokenize_plus_retrieve_p50_ms"] = tot["latency_p50_ms"]
    out["tokenize_plus_retrieve_p99_ms"] = tot["latency_p99_ms"]
    out["latency_measures"] = ("time.perf_counter around one BM25.retrieve([tokens], k=10) call per question, "
                               f"after {min(args.warmup, len(questions))} warm-up calls; query tokenization excluded")
    out["tokenize_corpus_secs"] = t1 - t0
    out["index_secs"] = t2 - t1
    out["vocabulary"] = len(retriever.vocab_dict)
    out["empty_queries"] = sum(1 for qt in qtokens if not qt)
    # bm25s has no admission filter or hydration step: its ranking time is the retrieve call.
    out["rank_p50_ms"], out["rank_p99_ms"] = out["latency_p50_ms"], out["latency_p99_ms"]
    out["config"] = {"k1": args.k1, "b": args.b, "method": args.method, "backend": "numpy",
                     "fields": "title + '\\n' + text, one document per passage", **tok.description}
    out["retrieve_ms"] = lat_retrieve
    out["retrieved"] = retrieved
    return out


# ---------------------------------------------------------------- dossier

def pick_binary(given: str | None) -> Path | None:
    if given:
        p = Path(given)
        if not p.is_file():
            sys.exit(f"error: --dossier {given}: no such file")
        return p
    release, debug = REPO / "target" / "release" / "dossier", REPO / "target" / "debug" / "dossier"
    if release.is_file():
        return release
    if debug.is_file():
        log(f"warning: {release} not found; using the DEBUG build {debug}: its latencies are not "
            "representative (build with: cargo build --release -p dossier-cli)")
        return debug
    return None


def run_dossier(binary: Path, dataset: Path, store: Path, questions: list[dict], args) -> dict:
    if not (store / "manifest.json").is_file():
        log(f"warning: {store} holds no Dossier store yet: eval will ingest and embed the whole "
            "corpus first (with the e5 embedder that takes many minutes)")
    cmd = [str(binary), "--store", str(store), "eval", str(dataset), "--mode", "bm25", "-k", "5",
           "--depth", str(args.depth), "--json", "--per-question"]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    log("running: " + " ".join(cmd))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        report = None
    if proc.returncode != 0 or not isinstance(report, dict) or "error" in report:
        err = (report or {}).get("error") if isinstance(report, dict) else None
        log(f"error: dossier exited {proc.returncode}: {err or proc.stderr.strip()[-2000:]}")
        return {"system": "dossier", "error": err or proc.stderr.strip()[-2000:] or f"exit {proc.returncode}",
                "command": cmd}

    per = report.get("per_question") or []
    by_id = {p["id"]: p.get("retrieved") or [] for p in per}
    retrieved = [by_id.get(str(q["id"]), []) for q in questions]
    mine = score(questions, retrieved)
    out = {"system": "dossier", "questions": report.get("questions")}
    # Dossier's own figures are the ones reported; the recomputation is a cross-check.
    for k in ("recall@2", "recall@5", "recall@10", "mrr", "latency_p50_ms", "latency_p99_ms",
              "rank_p50_ms", "rank_p99_ms"):
        out[k] = report.get(k)
    out["recomputed"] = mine
    out["metrics_agree"] = all(abs((report.get(k) or 0.0) - mine[k]) < 1e-9 for k in mine)
    if not out["metrics_agree"]:
        log(f"warning: Dossier's figures {[(k, report.get(k)) for k in mine]} differ from the recomputation {mine}")
    out["latency_measures"] = ("Dossier eval, timed inside the binary, no warm-up. latency_*: the whole search "
                               f"per question (Engine::rank(question, bm25, {args.depth}) then Engine::hydrate): query "
                               "analysis, scope/ACL admission filter, tantivy BM25, hydration of the hits from "
                               "the catalog. rank_*: Engine::rank alone (analysis, admission filter, BM25), "
                               "no hydration")
    ingest = report.get("ingest") or {}
    out["ingest"] = {k: ingest.get(k) for k in ("documents_added", "documents_unchanged", "chunks_added",
                                                "embed_secs") if k in ingest}
    out["process_wall_secs"] = wall
    out["command"] = cmd
    out["retrieved"] = retrieved
    return out


def agreement(a: list[list[str]], b: list[list[str]]) -> dict:
    n = max(len(a), 1)
    top1 = sum(1 for x, y in zip(a, b) if x and y and x[0] == y[0]) / n
    ov5 = sum(len(set(x[:5]) & set(y[:5])) / 5 for x, y in zip(a, b)) / n
    ov10 = sum(len(set(x[:10]) & set(y[:10])) / 10 for x, y in zip(a, b)) / n
    return {"same_top1": top1, "overlap@5": ov5, "overlap@10": ov10}


# ---------------------------------------------------------------- main

def fmt(v, spec: str) -> str:
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("datasets", nargs="*", type=Path,
                    help="dataset directories (default: ../shared/datasets/2wiki and ../shared/datasets/rgb-zh "
                         "relative to the repository root)")
    ap.add_argument("--dossier", help="dossier binary (default: target/release/dossier, else target/debug/dossier)")
    ap.add_argument("--store-root", type=Path, default=None,
                    help="folder holding one Dossier store per dataset, named after the dataset folder "
                         "(default: ./evalstores, the eval command's own default)")
    ap.add_argument("--skip-dossier", action="store_true", help="run bm25s only")
    ap.add_argument("--lang", choices=["auto", "en", "zh"], default="auto",
                    help="tokenizer for bm25s (auto: zh when the corpus is mostly CJK)")
    ap.add_argument("--jieba-hmm", action="store_true",
                    help="let jieba guess unknown words with its HMM (off by default, as in Dossier's analyzer)")
    ap.add_argument("--k1", type=float, default=1.2, help="BM25 k1 (default 1.2, tantivy's, which Dossier uses)")
    ap.add_argument("--b", type=float, default=0.75, help="BM25 b (default 0.75, tantivy's)")
    ap.add_argument("--method", default="lucene", help="bm25s scoring variant (default lucene, as tantivy)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed bm25s retrieve calls before timing (default 20)")
    ap.add_argument("--depth", type=int, default=10,
                    help="chunks Dossier ranks per question (default 10, bm25s's k; a passage can span "
                         "several chunks, so this can only lower Dossier's recall)")
    ap.add_argument("--limit", type=int, help="only the first N questions of each dataset (both systems)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT.relative_to(REPO)})")
    args = ap.parse_args()

    datasets = args.datasets or DEFAULT_DATASETS
    store_root = args.store_root or Path("evalstores")
    binary = None if args.skip_dossier else pick_binary(args.dossier)
    if not args.skip_dossier and binary is None:
        sys.exit("error: no dossier binary: build one with `cargo build --release -p dossier-cli`, "
                 "pass --dossier PATH, or use --skip-dossier")

    dossier_version = None
    if binary:
        v = subprocess.run([str(binary), "--version"], capture_output=True, text=True)
        dossier_version = v.stdout.strip() or None
    git = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "crates", "Cargo.lock"],
                           capture_output=True, text=True)

    result = {
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": [sys.executable, *sys.argv],
        "cwd": os.getcwd(),
        "environment": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "bm25s": version("bm25s"),
            "jieba": version("jieba"),
            "PyStemmer": version("PyStemmer"),
            "numpy": version("numpy"),
            "dossier_binary": str(binary) if binary else None,
            "dossier_version": dossier_version,
            "dossier_binary_mtime": (_dt.datetime.fromtimestamp(binary.stat().st_mtime, _dt.timezone.utc)
                                     .isoformat(timespec="seconds") if binary else None),
            "git_commit": git.stdout.strip() or None,
            "rust_sources_modified": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None,
        },
        "datasets": [],
    }

    rows = []
    for d in datasets:
        d = Path(d)
        name = d.resolve().name
        corpus, questions = load_dataset(d)
        if args.limit:
            questions = questions[: args.limit]
        lang = detect_lang(corpus) if args.lang == "auto" else args.lang
        log(f"{name}: {len(corpus)} passages, {len(questions)} questions, lang {lang}: bm25s ...")
        b = run_bm25s(corpus, questions, lang, args)
        entry = {"name": name, "path": str(d), "lang": lang, "passages": len(corpus),
                 "questions": len(questions), "bm25s": b}
        rows.append((name, b))
        if binary:
            store = store_root / name
            log(f"{name}: dossier (store {store}) ...")
            dz = run_dossier(binary, d, store, questions, args)
            entry["dossier"] = dz
            rows.append((name, dz))
            if "error" not in dz:
                entry["agreement"] = agreement(b["retrieved"], dz["retrieved"])
        result["datasets"].append(entry)

    header = (f"{'dataset':<12} {'system':<8} {'Recall@5':>9} {'MRR':>7} {'p50 ms':>9} {'p99 ms':>9} "
              f"{'queries':>8} {'rank p50':>9} {'rank p99':>9}")
    print(header)
    print("-" * len(header))
    for name, r in rows:
        if "error" in r:
            print(f"{name:<12} {r['system']:<8} error: {r['error'].splitlines()[-1][:80]}")
            continue
        print(f"{name:<12} {r['system']:<8} {fmt(r['recall@5'], '9.4f')} {fmt(r['mrr'], '7.4f')} "
              f"{fmt(r['latency_p50_ms'], '9.3f')} {fmt(r['latency_p99_ms'], '9.3f')} {fmt(r['questions'], '8d')} "
              f"{fmt(r.get('rank_p50_ms'), '9.3f')} {fmt(r.get('rank_p99_ms'), '9.3f')}")
    print("p50/p99: bm25s = the bare retrieve call on a tokenized question; Dossier = one whole engine search "
          "(analysis, admission filter, BM25, hydration from the catalog).\n"
          "rank p50/p99: Dossier without hydration (analysis, admission filter, BM25); bm25s = same as p50/p99.")
    for e in result["datasets"]:
        b = e["bm25s"]
        line = (f"{e['name']}: bm25s tokenize+retrieve p50 {b['tokenize_plus_retrieve_p50_ms']:.3f} ms, "
                f"p99 {b['tokenize_plus_retrieve_p99_ms']:.3f} ms")
        if "agreement" in e:
            a = e["agreement"]
            line += (f"; same top-1 {a['same_top1']:.3f}, top-5 overlap {a['overlap@5']:.3f}, "
                     f"top-10 overlap {a['overlap@10']:.3f}")
        print(line)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {args.out}")
    return 1 if any("error" in r for _, r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
