#!/usr/bin/env bash
# Catch-up of a follower that was down (issue 20 item 5, docs/replication.md "Catch-up"):
# a leader stores N delayed messages (tokimq-bench --mode enqueue, 100-byte bodies, 1 h delay),
# then an empty follower starts and copies its CommitLog. Prints the seconds from the
# follower's start until its CommitLog end equals the leader's (read from /metrics,
# tokimq_commitlog_max_offset_bytes), and the copy rate.
#   BIN=build/release/bin N=1000000 scripts/replication_catchup.sh
set -euo pipefail
BIN=${BIN:-build/release/bin}
N=${N:-1000000}
LPORT=${LPORT:-19611}
LHTTP=${LHTTP:-19612}
FHTTP=${FHTTP:-19613}
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
max_offset() {
  curl -s "http://127.0.0.1:$1/metrics" | awk '/^tokimq_commitlog_max_offset_bytes/ {print $2}' |
    awk '{printf "%d", $1}'
}
"$BIN/tokimq-broker" --data-dir "$dir/leader" --port "$LPORT" --http-port "$LHTTP" \
  --grpc-port 0 --broker-id 0 --log-file "$dir/leader.log" &
pids+=($!)
until curl -sf "http://127.0.0.1:$LHTTP/metrics" >/dev/null; do sleep 0.1; done
"$BIN/tokimq-bench" --system tokimq --addr "127.0.0.1:$LPORT" --queue bench --mode enqueue \
  -n "$N" --delay fixed:1h --producers 4 --batch 128 | grep RESULT || true
target=$(max_offset "$LHTTP")
echo "leader CommitLog end: $target bytes ($N messages)"
start=$(date +%s.%N)
"$BIN/tokimq-broker" --data-dir "$dir/follower" --port 0 --http-port "$FHTTP" --grpc-port 0 \
  --broker-id 1 --replicate-from "127.0.0.1:$LPORT" --log-file "$dir/follower.log" &
pids+=($!)
# The follower's progress from its segment files (not preallocated: their sizes add up to its
# CommitLog end), so polling costs it nothing.
while true; do
  got=$(find "$dir/follower/store/commitlog" -name '[0-9]*' -size +0 -printf '%s\n' 2>/dev/null |
    awk '{s += $1} END {printf "%d", s}' || true)
  [[ -n "$got" && "$got" -ge "$target" ]] && break
  sleep 0.05
done
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v b="$target" -v n="$N" 'BEGIN {
  t = e - s; printf "follower caught up: %.2f s (%.0f MB/s, %.0f messages/s), including its start\n",
  t, b / t / 1e6, n / t }'
