#!/usr/bin/env bash
# Cost per topic (issue 25): RSS, descriptors, disk files and start-up time of a broker holding
# N topics of 8 queues with a delayed message in every queue (delivered, so every queue of every
# topic holds one message and the timer holds none).
#
#   scripts/topic_cost.sh [BUILD_DIR] [TOPICS] [MAX_OPEN_FILES]
#   scripts/topic_cost.sh build/release 10000
#   BROKER=/path/to/older/tokimq-broker scripts/topic_cost.sh build/release 1000   (before/after)
#   CONSUMER_GROUPS=10000 DELETE=1 scripts/topic_cost.sh build/release 1000  (after the restart: 10k
#   consumer groups with one lease each, then delete every topic; each phase sampled)
#
# Runs bin/tokimq-broker (--manual-clock, grpc off) in a temp dir and bin/tokimq-topic-cost
# against it, sampling /proc/<pid> after each phase, then restarts the broker (SIGTERM, start)
# and times how long it takes to answer, and samples again after one receive per topic.
set -euo pipefail
build=${1:-build/release}
topics=${2:-1000}
max_open=${3:-0}
bin=$build/bin
broker=${BROKER:-$bin/tokimq-broker}
extra=()
[ "$max_open" != 0 ] && extra=(--max-open-files "$max_open")
dir=$(mktemp -d /tmp/topic-cost.XXXXXX)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT

sample() {  # label
  local rss fds files du
  rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  fds=$(ls /proc/$pid/fd | wc -l)
  files=$(find "$dir/data" -type f | wc -l)
  du=$(du -sk "$dir/data" | cut -f1)
  printf 'SAMPLE %-14s topics=%d rss_kib=%d fds=%d files=%d disk_kib=%d\n' \
    "$1" "$topics" "$rss" "$fds" "$files" "$du"
}

start() {
  rm -f "$dir/port"
  local t0=$(date +%s.%N)
  "$broker" --data-dir "$dir/data" --port 0 --port-file "$dir/port" --grpc-port 0 --http-port 0 \
    --manual-clock "${extra[@]}" --log-file "$dir/broker.log" &
  pid=$!
  while [ ! -s "$dir/port" ]; do sleep 0.01; done
  port=$(cat "$dir/port")
  local t1=$(date +%s.%N)
  printf 'STARTUP %.3f s (to listening)\n' "$(echo "$t1 - $t0" | bc)"
}

start
sample empty
coproc COST { "$bin/tokimq-topic-cost" --addr 127.0.0.1:$port --topics "$topics" --pause; }
cost_pid=$COST_PID
while read -r line <&"${COST[0]}"; do
  echo "$line"
  case $line in PHASE*) sample "after-$(echo "$line" | cut -d' ' -f2)"; echo >&"${COST[1]}" ;; esac
done
wait $cost_pid || true
sleep 5  # a few checkpoints: every queue's file written and fsynced
sample settled
t0=$(date +%s.%N); kill -TERM $pid; rc=0; wait $pid || rc=$?; echo "shutdown exit $rc after $(echo "$(date +%s.%N) - $t0" | bc) s"
start
sample restarted
t0=$(date +%s.%N); "$bin/tokimq" --broker 127.0.0.1:$port stats > "$dir/stats.txt"
echo "tokimq stats: $(echo "$(date +%s.%N) - $t0" | bc) s, $(wc -l < "$dir/stats.txt") lines, $(wc -c < "$dir/stats.txt") bytes"
after=(--receive --stats-calls 5)
[ "${CONSUMER_GROUPS:-0}" != 0 ] && after+=(--groups "$CONSUMER_GROUPS")
[ "${DELETE:-0}" != 0 ] && after+=(--delete)
coproc COST2 { "$bin/tokimq-topic-cost" --addr 127.0.0.1:$port --topics "$topics" --skip-create --pause "${after[@]}"; }
cost_pid=$COST2_PID
while read -r line <&"${COST2[0]}"; do
  echo "$line"
  case $line in PHASE*) sample "after-$(echo "$line" | cut -d' ' -f2)"; echo >&"${COST2[1]}" ;; esac
done
wait $cost_pid || true
grep -c . "$dir/broker.log" | sed 's/^/log lines: /'
grep -E 'file descriptors|re-dispatched|\[warning\]|\[error\]' "$dir/broker.log" | head -5
t0=$(date +%s.%N); kill -TERM $pid; rc=0; wait $pid || rc=$?; echo "shutdown exit $rc after $(echo "$(date +%s.%N) - $t0" | bc) s"
