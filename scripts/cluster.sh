#!/usr/bin/env bash
# A tokimq cluster on loopback (docs/cluster.md): etcd and three brokers (b1, b2, b3), each on
# free ports and a temp dir, in cluster "local". Prints the addresses and `tokimq cluster
# status`, then waits; Ctrl-C (or SIGTERM) stops the brokers (SIGTERM: they leave the cluster
# at once) and etcd, and removes the temp dir.
#
# Usage: scripts/cluster.sh [--demo | --bench N | --enqueue N] [--build-dir DIR]
#   --demo       create the TRANSACTION topic orders.timeout on all three brokers and run the
#                order-timeout demo (20k orders, 5 s timeout) against broker b1, then stop
#   --bench N    one broker vs three in the same run: N delayed messages (3 s) sent with the
#                routing CLI to a topic placed on b1 only, then to one on all three, each
#                consumed (and acked) by a group; prints the split and the rates, then stops
#   --enqueue N  delayed-enqueue capacity, one broker vs three in the same run: tokimq-bench
#                (--mode enqueue, 2 producers, batches of 128, delay fixed:1h) sends N messages
#                to a topic on b1 only, then N/3 to each broker of a topic on all three (three
#                tokimq-bench processes at once, one per broker: what a producer spreading its
#                sends evenly does); prints msg/s over the wall time and the load average
#   --build-dir  where bin/ is (default build/release; built when missing)
# Needs etcd (Debian etcd-server: scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/etcd.sh

demo=0
bench=0
enqueue=0
build_dir=build/release
while (($#)); do
  case "$1" in
    --demo) demo=1 ;;
    --bench) bench="$2"; shift ;;
    --enqueue) enqueue="$2"; shift ;;
    --build-dir) build_dir="$2"; shift ;;
    *) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

bin="$PWD/$build_dir/bin"
if [[ ! -x "$bin/tokimq-broker" || ! -x "$bin/tokimq" ]] ||
   { ((demo)) && [[ ! -x "$bin/tokimq-order-timeout" ]]; } ||
   { ((enqueue)) && [[ ! -x "$bin/tokimq-bench" ]]; }; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
  cmake --preset release >/dev/null
  cmake --build --preset release --target tokimq_broker_main tokimq_cli order_timeout tokimq_bench_tool
fi
etcd_require cluster.sh

work="$(mktemp -d "${TMPDIR:-/tmp}/tokimq-cluster.XXXXXX")"
pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  rm -rf "$work"
  echo "cluster.sh: stopped, $work removed"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() {  # wait_for <what> <command...>: up to 20 s
  local what="$1"; shift
  for _ in $(seq 1 200); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "cluster.sh: $what did not come up; logs in $work" >&2
  exit 1
}

started=0
etcd_start "$work" tokimq-local && started=1
pids+=("$ETCD_PID")
((started)) || { echo "cluster.sh: etcd did not come up; logs in $work" >&2; exit 1; }
etcd_ep="$ETCD_ENDPOINT"

addresses=()
for name in b1 b2 b3; do
  grpc_port=$(free_port)
  http_port=$(free_port)
  "$bin/tokimq-broker" --cluster local --etcd-endpoints "$etcd_ep" --broker-name "$name" \
    --data-dir "$work/$name" --bind 127.0.0.1 --port 0 --port-file "$work/$name.port" \
    --grpc-port "$grpc_port" --http-port "$http_port" --log-file "$work/$name.log" &
  pids+=($!)
  wait_for "broker $name" test -s "$work/$name.port"
  addr="127.0.0.1:$(cat "$work/$name.port")"
  addresses+=("$addr")
  echo "cluster.sh: broker $name native $addr grpc 127.0.0.1:$grpc_port" \
    "http://127.0.0.1:$http_port/ (console, /metrics; log $work/$name.log)"
done
echo "cluster.sh: etcd $etcd_ep (data $work/etcd)"
wait_for "three members" bash -c "'$bin/tokimq' --broker ${addresses[0]} cluster status | grep -q 'members (3)'"
"$bin/tokimq" --broker "${addresses[0]}" cluster status

if ((demo)); then
  "$bin/tokimq" --broker "${addresses[0]}" topic create --name orders.timeout --type transaction
  wait_for "orders.timeout on b1" "$bin/tokimq" --broker "${addresses[0]}" topic describe orders.timeout
  # The demo's producers and cancellers use the single-broker clients (transactional sends are
  # not routed yet): they all talk to b1, which hosts its queues of the topic.
  "$bin/tokimq-order-timeout" --broker "${addresses[0]}" --topic orders.timeout \
    --orders 20000 --timeout 5s --paid 0.7 --state-dir "$work/state"
  "$bin/tokimq" --broker "${addresses[1]}" cluster status
  exit 0
fi

if ((bench > 0)); then
  cli=("$bin/tokimq" --timeout 60s)
  rate() { python3 -c "import sys; n,t=int(sys.argv[1]),float(sys.argv[2]); print(f'{n/t:.0f} msg/s ({t:.2f} s)')" "$@"; }
  for placement in one three; do
    topic="bench.$placement"
    if [[ $placement == one ]]; then extra=(--brokers b1); else extra=(); fi
    "${cli[@]}" --broker "${addresses[0]}" topic create --name "$topic" --type delay --queues 8 "${extra[@]}" >/dev/null
    sleep 1  # every host applies it from its watch
    t0=$(date +%s.%N)
    seq "$bench" | "${cli[@]}" --broker "${addresses[1]}" send --topic "$topic" --delay 3s --batch 200 >"$work/sent.$placement"
    t1=$(date +%s.%N)
    "${cli[@]}" --broker "${addresses[2]}" consume --group bench --topic "$topic" --count "$bench" \
      --ack --wait 10s >/dev/null 2>"$work/consumed.$placement"
    t2=$(date +%s.%N)
    split=$(grep -o 'broker=b[0-9]' "$work/sent.$placement" | sort | uniq -c | awk '{printf "%s %s  ", $2, $1}')
    echo "bench: topic on $placement broker(s): split $split"
    echo "bench:   send    $(rate "$bench" "$(echo "$t1 - $t0" | bc)")"
    echo "bench:   consume $(rate "$bench" "$(echo "$t2 - $t1" | bc)")  ($(cat "$work/consumed.$placement"))"
  done
  exit 0
fi

if ((enqueue > 0)); then
  cli=("$bin/tokimq" --timeout 60s)
  run_bench() {  # run_bench <label> <n> <address>: one tokimq-bench enqueue run, RESULT line kept
    "$bin/tokimq-bench" --system tokimq --addr "$3" --queue "$1" --mode enqueue --messages "$2" \
      --delay fixed:1h --producers 2 --batch 128 --label "$1" 2>&1 | grep '^RESULT' >"$work/$1.$3.result"
  }
  for placement in one three; do
    topic="enq.$placement"
    if [[ $placement == one ]]; then extra=(--brokers b1); else extra=(); fi
    "${cli[@]}" --broker "${addresses[0]}" topic create --name "$topic" --type delay --queues 8 \
      "${extra[@]}" >/dev/null
    sleep 1  # every host applies it from its watch
    echo "bench: load average before ($placement): $(cut -d' ' -f1-3 /proc/loadavg)"
    t0=$(date +%s.%N)
    if [[ $placement == one ]]; then
      run_bench "$topic" "$enqueue" "${addresses[0]}"
    else
      bench_pids=()
      for a in "${addresses[@]}"; do run_bench "$topic" $((enqueue / 3)) "$a" & bench_pids+=($!); done
      wait "${bench_pids[@]}"
    fi
    t1=$(date +%s.%N)
    # Aggregate: all messages over the longest sending time (tokimq-bench's own clock: from
    # its first send to its last acknowledgement, process start and setup excluded).
    echo "bench: enqueue, topic on $placement broker(s): $(cat "$work/$topic".*.result | python3 -c '
import re, sys
runs = [dict(re.findall(r"(\w+)=(\S+)", l)) for l in sys.stdin]
n = sum(int(r["messages"]) for r in runs)
t = max(int(r["messages"]) / float(r["enqueue_rate"]) for r in runs)
print(f"{n} msg in {t:.2f} s = {n / t:.0f} msg/s; per process msg/s: " +
      " ".join(r["enqueue_rate"] for r in runs))') (wall incl. start: $(echo "$t1 - $t0" | bc) s)"
    echo "bench: load average after ($placement): $(cut -d' ' -f1-3 /proc/loadavg)"
  done
  exit 0
fi

echo "cluster.sh: try  $bin/tokimq --broker ${addresses[1]} topic create --name orders --type delay"
echo "cluster.sh: Ctrl-C stops the cluster"
# In the background + wait: bash runs the SIGTERM/SIGINT trap at once instead of after sleep.
while true; do sleep 3600 & wait $!; done
