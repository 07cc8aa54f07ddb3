#!/usr/bin/env bash
# Issue 39: connection exhaustion, slow clients, a 200-connection soak and SIGTERM under
# load, against `dossier serve` on 127.0.0.1 (see RELIABILITY.md, "Connections, slow
# clients and load (issue 39)").
#
#   cargo build --release -p dossier-cli && bench/issue39/run.sh
#
# Environment (defaults in brackets):
#   BIN [target/release/dossier]  the binary
#   PORT [18490]          loopback port
#   IDLE_SOCKETS [5000]   idle sockets of the exhaustion probe
#   IDLE_HOLD [75]        seconds they are held (past the 60 s idle timeout)
#   ROUNDS [4]            30 s rounds of the soak
#   ROUND_SECS [30]
#   CONNS [200]           connections of the soak and of the SIGTERM probe
#   SKIP_SLOW [0]         1 skips the slow-client probe (it waits out the timeouts)
#   EXTRA_FLAGS []        more `serve` flags (e.g. for an older binary, none)
#   OUT [/tmp/issue39-<UTC time>]  raw outputs (not kept in the tree)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/issue39"
BIN="${BIN:-$ROOT/target/release/dossier}"
SCENARIOS="$ROOT/../shared/scenarios"
PORT="${PORT:-18490}"
IDLE_SOCKETS="${IDLE_SOCKETS:-5000}"
IDLE_HOLD="${IDLE_HOLD:-75}"
ROUNDS="${ROUNDS:-4}"
ROUND_SECS="${ROUND_SECS:-30}"
CONNS="${CONNS:-200}"
SKIP_SLOW="${SKIP_SLOW:-0}"
EXTRA_FLAGS="${EXTRA_FLAGS:-}"
OUT="${OUT:-/tmp/issue39-$(date -u +%Y%m%dT%H%M%SZ)}"
URL="http://127.0.0.1:$PORT"

mkdir -p "$OUT"
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
ulimit -n 20000 || true

{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), ulimit -n $(ulimit -n)"
    echo "binary: $BIN ($(stat -c %y "$BIN"))"
} | tee "$OUT/env.txt"

STORE="$WORK/store"
"$BIN" --store "$STORE" ingest "$SCENARIOS/shop" "$SCENARIOS/acme" > "$OUT/ingest.txt" 2>&1
python3 "$ROOT/bench/wrk/requests.py" keys "$WORK/keys.yaml"
python3 "$ROOT/bench/wrk/requests.py" lists "$SCENARIOS/scenarios.yaml" "$WORK" > /dev/null
KEY=bench-u7

start_server() { # LOG
    # shellcheck disable=SC2086
    "$BIN" --store "$STORE" serve --addr "127.0.0.1:$PORT" --keys "$WORK/keys.yaml" \
        --rate 1000000 --burst 1000000 --concurrency 64 --quiet $EXTRA_FLAGS > "$1" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 300); do
        curl -sf "$URL/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$1" >&2; exit 1; }
        sleep 0.2
    done
    echo "run.sh: server did not come up" >&2
    exit 1
}
stop_server() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}
rss() { awk '/VmRSS/{printf "%.0f MB", $2/1024}' "/proc/$SERVER_PID/status"; }

# 1. Exhaustion: idle sockets from one address, then spread over 20 addresses (past
#    the per-address cap), held past the idle timeout.
start_server "$OUT/server-idle.log"
echo "== idle: $IDLE_SOCKETS sockets from 127.0.0.1" | tee -a "$OUT/idle.txt"
python3 "$HERE/probe.py" idle "$PORT" "$SERVER_PID" "$IDLE_SOCKETS" "$IDLE_HOLD" 1 | tee -a "$OUT/idle.txt"
echo "== idle: $IDLE_SOCKETS sockets from 20 addresses" | tee -a "$OUT/idle.txt"
python3 "$HERE/probe.py" idle "$PORT" "$SERVER_PID" "$IDLE_SOCKETS" "$IDLE_HOLD" 20 | tee -a "$OUT/idle.txt"
stop_server

# 2. Slow clients.
if [[ "$SKIP_SLOW" != 1 ]]; then
    start_server "$OUT/server-slow.log"
    echo "== slow clients" | tee "$OUT/slow.txt"
    python3 "$HERE/probe.py" slow "$PORT" "$KEY" | tee -a "$OUT/slow.txt"
    stop_server
fi

# 3. Soak: ROUNDS x ROUND_SECS of wrk -c$CONNS (search requests of every scenario).
start_server "$OUT/server-soak.log"
echo "== soak: start rss $(rss), store $(du -sm "$STORE" | cut -f1) MB" | tee "$OUT/soak.txt"
for r in $(seq 1 "$ROUNDS"); do
    wrk -t2 -c"$CONNS" -d"${ROUND_SECS}s" --timeout 30s --latency -s "$ROOT/bench/wrk/post.lua" "$URL" -- "$WORK/search.lua" > "$OUT/soak-$r.wrk.txt" 2>&1
    n5xx=$(curl -sf "$URL/metrics" | awk -F'[{}]' '/^dossier_http_requests_total/ && /status="5/{split($0,a," "); s+=a[length(a)]} END{print s+0}')
    p99=$(awk '/^ +99%/{print $2}' "$OUT/soak-$r.wrk.txt")
    rps=$(awk '/Requests\/sec/{print $2}' "$OUT/soak-$r.wrk.txt")
    non2xx=$(awk '/Non-2xx/{print $NF}' "$OUT/soak-$r.wrk.txt")
    sockerr=$(grep -E "Socket errors" "$OUT/soak-$r.wrk.txt" || echo "no socket errors")
    echo "round $r: rss $(rss), store $(du -sm "$STORE" | cut -f1) MB, $rps req/s, p99 $p99, non-2xx ${non2xx:-0}, server 5xx so far $n5xx, $sockerr" | tee -a "$OUT/soak.txt"
done
sleep 5
echo "idle 5 s after the soak: rss $(rss)" | tee -a "$OUT/soak.txt"
curl -sf "$URL/metrics" | grep -E "^dossier_audit" | tee -a "$OUT/soak.txt" || true
ls -la "$STORE/audit-export" 2>/dev/null | tee -a "$OUT/soak.txt" || true
stop_server

# 4. SIGTERM under load.
start_server "$OUT/server-term.log"
echo "== SIGTERM after 10 s of $CONNS keep-alive clients" | tee "$OUT/term.txt"
python3 "$HERE/probe.py" term "$PORT" "$SERVER_PID" "$KEY" "$CONNS" 10 | tee -a "$OUT/term.txt"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
echo "outputs in $OUT"
