#!/usr/bin/env bash
# How much of workload f's rate is the fsync and how much the round trip (issue 21 item 1).
# The same single-message delayed sends as compare.sh's f (batch 1, one send in flight per
# producer connection, P producers), against each system twice: in its fsync-before-ack mode
# (tokimq --flush sync, Redis appendfsync always) and without it (tokimq --flush async, Redis
# appendfsync no). The rate without fsync is the ceiling of this load generator + system on
# this machine: no group commit can make a durable send faster than a non-durable one.
# Systems alternate within each round; a fresh server and data dir per run.
# Usage: bench/durable_ceiling.sh [BIN_DIR] [N] [PRODUCERS] [ROUNDS]
#   BIN_DIR holds tokimq-broker and tokimq-bench (default build/release/bin); N sends per run
#   (20000); PRODUCERS (128); ROUNDS (2). Prints one line per run and a summary.
set -euo pipefail
bin="$(cd "${1:-build/release/bin}" && pwd)"
n="${2:-20000}"
producers="${3:-128}"
rounds="${4:-2}"
work="$(mktemp -d)"
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start() {  # start <system> <durable 0|1> <dir>; sets pid and addr
  local sys=$1 durable=$2 dir=$3
  mkdir -p "$dir"
  case "$sys" in
    tokimq)
      local flush=async
      [[ $durable -eq 1 ]] && flush=sync
      "$bin/tokimq-broker" --data-dir "$dir/data" --bind 127.0.0.1 --port 0 --grpc-port 0 \
        --http-port 0 --port-file "$dir/port" --log-file "$dir/broker.log" --log-level warn \
        --flush "$flush" &
      pid=$!
      for _ in $(seq 1 600); do [[ -s "$dir/port" ]] && break; sleep 0.05; done
      addr="127.0.0.1:$(cat "$dir/port")"
      ;;
    redis)
      local fsync=no port
      [[ $durable -eq 1 ]] && fsync=always
      port=$(free_port)
      redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --appendonly yes \
        --appendfsync "$fsync" --save "" --daemonize no --logfile "$dir/redis.log" &
      pid=$!
      addr="127.0.0.1:$port"
      ;;
  esac
  "$bin/tokimq-bench" --system "$sys" --addr "$addr" --mode ping --max-run 60s >/dev/null
}

declare -A rates
for round in $(seq 1 "$rounds"); do
  for sys in tokimq redis; do
    for durable in 1 0; do
      dir="$work/$sys-$durable-$round"
      start "$sys" "$durable" "$dir"
      out=$("$bin/tokimq-bench" --system "$sys" --addr "$addr" --mode enqueue -n "$n" \
        --producers "$producers" --pipeline 1 --batch 1 --delay uniform:1s-10s --label f)
      rate=$(sed -n 's/.*enqueue_rate=\([0-9.]*\).*/\1/p' <<<"$out" | head -1)
      kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
      mode=$([[ $durable -eq 1 ]] && echo "fsync before ack" || echo "no fsync")
      echo "round $round $sys ($mode): ${rate} msg/s, load $(cut -d' ' -f1 /proc/loadavg)"
      rates["$sys-$durable"]+="${rate} "
    done
  done
done
echo
echo "summary, $producers producers x 1 in flight, batch 1, N=$n (msg/s per round):"
for sys in tokimq redis; do
  echo "  $sys: fsync before ack ${rates[$sys-1]}| no fsync ${rates[$sys-0]}"
done
