#!/usr/bin/env bash
# The cost of the HTTP port and its metrics (issue 18): tokimq-bench enqueue and lease against
# the same broker binary with --http-port 0 (off) and with the port on and /metrics scraped
# every SCRAPE_S seconds (default 1: 15x Prometheus' default rate), alternating off/on for
# ROUNDS rounds in one run. Prints each RESULT line and the median on/off ratios.
# Usage: bench/metrics_cost.sh BIN_DIR [ENQUEUE_N] [LEASE_N] [ROUNDS] [SCRAPE_S]
#   BIN_DIR holds tokimq-broker and tokimq-bench (a release build: build/release/bin);
#   BENCH=/path/to/tokimq-bench takes the load generator from elsewhere.
set -euo pipefail
bin="$(cd "${1:?usage: metrics_cost.sh BIN_DIR [ENQUEUE_N] [LEASE_N] [ROUNDS] [SCRAPE_S]}" && pwd)"
enqueue_n="${2:-300000}"
lease_n="${3:-200000}"
rounds="${4:-3}"
scrape_s="${5:-1}"
bench="${BENCH:-$bin/tokimq-bench}"
work="$(mktemp -d)"
pid=""
scraper=""
cleanup() {
  [[ -n "$scraper" ]] && kill "$scraper" 2>/dev/null
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() {  # start <name> <http port or 0>
  local name=$1 http=$2
  rm -f "$work/port"
  "$bin/tokimq-broker" --data-dir "$work/$name" --port 0 --port-file "$work/port" --grpc-port 0 \
    --http-port "$http" --log-file "$work/$name.log" &
  pid=$!
  for _ in $(seq 200); do [[ -s "$work/port" ]] && break; sleep 0.05; done
  addr="127.0.0.1:$(cat "$work/port")"
  if [[ $http != 0 ]]; then
    (while true; do
       curl -sf "http://127.0.0.1:$http/metrics" -o "$work/last.prom" || echo "scrape failed" >&2
       sleep "$scrape_s"
     done) &
    scraper=$!
  fi
}
stop() {
  if [[ -n "$scraper" ]]; then kill "$scraper"; wait "$scraper" 2>/dev/null || true; scraper=""; fi
  kill "$pid"; wait "$pid" || true; pid=""
}

results="$work/results"
for round in $(seq "$rounds"); do
  for variant in off on; do
    http=0
    [[ $variant == on ]] && http=$(free_port)
    start "$variant-$round" "$http"
    "$bench" --system tokimq --addr "$addr" --label "enqueue-$variant" \
      --queue wc --messages "$enqueue_n" --delay fixed:2h --mode enqueue --pid "$pid" |
      grep '^RESULT' | tee -a "$results"
    "$bench" --system tokimq --addr "$addr" --label "lease-$variant" \
      --queue we --messages "$lease_n" --delay now --mode lease --pid "$pid" |
      grep '^RESULT' | tee -a "$results"
    stop
  done
done
[[ -s "$work/last.prom" ]] && echo "last scrape: $(grep -c '^tokimq_' "$work/last.prom") samples, $(wc -c <"$work/last.prom") bytes"
python3 - "$results" <<'PY'
import re, statistics, sys
rates = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    mode, variant = f["label"].rsplit("-", 1)
    key = "enqueue_rate" if mode == "enqueue" else "consume_rate"
    rates.setdefault((mode, variant), []).append(float(f[key]))
for mode in ("enqueue", "lease"):
    off, on = rates.get((mode, "off"), []), rates.get((mode, "on"), [])
    if off and on:
        mo, mn = statistics.median(off), statistics.median(on)
        print(f"{mode}: off median {mo:.0f}/s {sorted(off)}, on median {mn:.0f}/s {sorted(on)}, on/off {mn/mo:.3f}")
PY
