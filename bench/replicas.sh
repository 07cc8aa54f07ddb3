#!/usr/bin/env bash
# Replicas of one shared (PostgreSQL) store: replication lag and search throughput with
# one and with two `dossier serve` replicas, in one run. See BENCHMARKS.md.
#
#   cargo build --release -p dossier-cli && bench/replicas.sh
#
# Environment (defaults in brackets):
#   COMMITS [100]      commits through replica A whose arrival on B is timed
#   DURATION [20s]     each wrk run; CONNECTIONS [16] in all
#   EMBEDDER [e5]      the store's embedder (searches embed their queries: cache off)
#   BIN [target/release/dossier]
#   OUT [bench/out/replicas-<UTC time>]
#
# A private PostgreSQL (scripts/pg, its own port and data directory) is started and
# stopped here. Lag: a one-document upload through A, then B's /readyz polled every
# 2 ms until B serves A's generation; the time from A's answer to that moment.
# Throughput: wrk with the search list of bench/wrk (scenario questions, cache off) at
# one replica, then two wrk runs at once, one per replica, summed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/target/release/dossier}"
COMMITS="${COMMITS:-100}"
DURATION="${DURATION:-20s}"
CONNECTIONS="${CONNECTIONS:-16}"
EMBEDDER="${EMBEDDER:-e5}"
OUT="${OUT:-$ROOT/bench/out/replicas-$(date -u +%Y%m%dT%H%M%SZ)}"
SCENARIOS="$ROOT/../shared/scenarios"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
chmod 755 "$WORK"
export DOSSIER_PG_PORT="${DOSSIER_PG_PORT:-55461}"
export DOSSIER_PG_DATA="$WORK/pg"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    "$ROOT/scripts/pg" stop || true
    rm -rf "$WORK"
}
trap cleanup EXIT
command -v wrk >/dev/null || apt-get install -y wrk >/dev/null

URL="$("$ROOT/scripts/pg" start)"
{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "binary: $BIN ($(stat -c %y "$BIN"))"
    echo "store: $URL, embedder $EMBEDDER"
} | tee "$OUT/env.txt"
"$BIN" --store "$URL" --embedder "$EMBEDDER" --index-dir "$WORK/cli" ingest \
    "$SCENARIOS/shop" "$SCENARIOS/acme" > "$OUT/ingest.txt" 2>&1
python3 "$ROOT/bench/wrk/requests.py" keys "$WORK/keys.yaml"
python3 "$ROOT/bench/wrk/requests.py" lists "$SCENARIOS/scenarios.yaml" "$WORK" > /dev/null
# An admin key for the uploads the lag is timed with.
python3 -c "import hashlib; print('- {key_sha256: %s, principal: zhang, admin: true}' % hashlib.sha256(b'bench-admin').hexdigest())" >> "$WORK/keys.yaml"

serve() { # NAME PORT
    "$BIN" --store "$URL" --index-dir "$WORK/$1" serve --addr "127.0.0.1:$2" \
        --keys "$WORK/keys.yaml" --rate 1000000 --burst 1000000 --concurrency 64 \
        --cache-entries 0 --query-vector-entries 0 --follow-ms 100 --quiet \
        > "$OUT/server-$1.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 300); do
        curl -sf "http://127.0.0.1:$2/readyz" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "replicas.sh: replica $1 did not come up" >&2
    exit 1
}
serve a 18491
serve b 18492

# Replication lag.
python3 - "$COMMITS" > "$OUT/lag.json" <<'EOF'
import json, sys, time, urllib.request
A, B = "http://127.0.0.1:18491", "http://127.0.0.1:18492"
def call(base, path, body=None):
    req = urllib.request.Request(base + path, method="POST" if body else "GET",
        data=json.dumps(body).encode() if body else None,
        headers={"Authorization": "Bearer bench-admin", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)
lags = []
for i in range(int(sys.argv[1])):
    doc = f"---\nid: lag-{i}\nversion: \"1\"\ntitle: Lag probe {i}\ntenant: shop\n---\n# Lag probe {i}\n\nProbe {i} of the replication benchmark.\n"
    call(A, "/v1/documents", {"files": [{"name": f"lag-{i}.md", "content": doc}]})
    t0 = time.perf_counter()
    want = call(A, "/readyz")["served_generation"]
    while call(B, "/readyz")["served_generation"] < want:
        time.sleep(0.002)
    lags.append((time.perf_counter() - t0) * 1000)
lags.sort()
pct = lambda p: lags[min(len(lags) - 1, round((len(lags) - 1) * p))]
print(json.dumps({"commits": len(lags), "p50_ms": pct(0.5), "p99_ms": pct(0.99),
                  "max_ms": lags[-1], "follow_ms": 100}))
EOF
cat "$OUT/lag.json"

# Throughput: one replica, then both at once.
wrk_run() { # NAME PORT
    wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --timeout 30s --latency \
        -s "$ROOT/bench/wrk/post.lua" "http://127.0.0.1:$2" -- "$WORK/search.lua" > "$OUT/$1.wrk.txt" 2>&1
}
rps() { awk '/Requests\/sec/{print $2}' "$OUT/$1.wrk.txt"; }
wrk_run one-a 18491
wrk_run two-a 18491 & W1=$!
wrk_run two-b 18492 & W2=$!
wait $W1 $W2
python3 - "$OUT" "$(rps one-a)" "$(rps two-a)" "$(rps two-b)" <<'EOF' | tee "$OUT/summary.json"
import json, sys
out, one, a, b = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
print(json.dumps({"one_replica_rps": one, "two_replicas_rps": a + b,
                  "per_replica_rps": [a, b], "lag": json.load(open(out + "/lag.json"))}))
EOF
grep -h "Non-2xx\|Socket errors" "$OUT"/*.wrk.txt || echo "no non-2xx responses, no socket errors"
