#!/usr/bin/env bash
# Look-alike cost (issue 39), before and after. See RELIABILITY.md "Look-alike cost".
#
#   bench/lookalike-cost/run.sh detect REV [N...]
#       Builds examples/lookalike_cost.rs against dossier-core as of git revision REV (in a
#       throw-away worktree, its own target dir) and runs it for each workload and N
#       (default 1000 4000 20000): wall time and peak RSS from /usr/bin/time -v, under a
#       memory cap of $CAP_GB GiB (default 8) and $TIMEOUT s (default 300).
#       OVERLAY_CORE=1 measures the working tree's dossier-core sources on REV instead
#       (LABEL names the run).
#   [KIND=template] bench/lookalike-cost/run.sh e2e DOSSIER_BIN N
#       Writes N "Meeting notes i" documents (make_corpus.py; KIND=template: one body
#       for all, so every one has look-alikes by content), ingests them with the
#       given release binary (hash:64 embedder: the embedding is not what is measured),
#       then runs one search whose hits share the stem; time and peak RSS of each, and
#       the search's body size and conflict count.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
CAP_GB="${CAP_GB:-8}"
TIMEOUT="${TIMEOUT:-300}"

measure() { # label cmd...: prints label, status, wall seconds, peak RSS MiB
  local label="$1"; shift
  local log; log="$(mktemp)"
  local status=0
  ( ulimit -v $((CAP_GB * 1024 * 1024)); timeout "$TIMEOUT" /usr/bin/time -v "$@" ) \
    >"$log.out" 2>"$log" || status=$?
  local wall rss
  wall="$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log")"
  rss="$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$log")"
  echo "$label | exit $status | wall $wall | peak RSS ${rss} MiB | $(tail -1 "$log.out" | cut -c1-200)"
  rm -f "$log" "$log.out"
}

case "${1:-}" in
detect)
  rev="$2"; shift 2
  sizes=("${@:-}")
  [ -n "${sizes[0]}" ] || sizes=(1000 4000 20000)
  label="${LABEL:-$rev}"
  wt="/tmp/lookalike-wt-$label"
  [ -d "$wt" ] || git -C "$repo" worktree add --detach "$wt" "$rev" >/dev/null
  if [ -n "${OVERLAY_CORE:-}" ]; then # measure the working tree's dossier-core on REV
    cp "$repo"/crates/dossier-core/src/{text,validity}.rs "$wt/crates/dossier-core/src/"
  fi
  mkdir -p "$wt/crates/dossier-core/examples"
  cp "$here/lookalike_cost.rs" "$wt/crates/dossier-core/examples/"
  (cd "$wt" && CARGO_TARGET_DIR=/tmp/lookalike-target cargo build -q --release \
      -p dossier-core --example lookalike_cost)
  bin="/tmp/lookalike-cost-$label"
  cp /tmp/lookalike-target/release/examples/lookalike_cost "$bin"
  for w in series versions same; do
    for n in "${sizes[@]}"; do
      measure "$label $w n=$n" "$bin" "$w" "$n"
    done
  done
  ;;
e2e)
  bin="$(realpath "$2")"; n="$3"; kind="${KIND:-distinct}"
  store="/tmp/lookalike-e2e-store-$kind-$n"
  corpus="/tmp/lookalike-e2e-corpus-$kind-$n"
  [ -d "$corpus" ] || python3 "$here/make_corpus.py" "$n" "$corpus" "$kind"
  rm -rf "$store"
  measure "ingest $kind n=$n" "$bin" --store "$store" --embedder hash:64 ingest "$corpus"
  measure "search $kind n=$n" "$bin" --store "$store" --json search "meeting notes agenda minutes" \
    --as u1 --now 2026-06-01 -k 10
  "$bin" --store "$store" --json search "meeting notes agenda minutes" --as u1 \
    --now 2026-06-01 -k 10 >"/tmp/lookalike-e2e-search-$kind-$n.json"
  python3 "$here/summarize.py" "/tmp/lookalike-e2e-search-$kind-$n.json"
  ;;
*)
  sed -n 2,14p "$0"; exit 2 ;;
esac
