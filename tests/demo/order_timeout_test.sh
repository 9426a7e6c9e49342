#!/usr/bin/env bash
# Black-box test of the order-timeout example against the real broker binary (ctest, from
# tests/demo/module.cmake). Each case uses a fresh temp dir and a free loopback port.
#   1. small run: 2000 orders, 2 s timeout, 70 % paid -> exit 0, nothing missed, none cancelled
#      after payment, no change applied twice in SQLite, and the cancel worker killed (SIGKILL)
#      between its SQLite commit and its ACK had its messages redelivered and found processed,
#      and of the orders of the creator killed mid-transaction exactly those inserted exist and
#      got their (check-back committed) timeout;
#   2. kill -9 of the broker mid-run, restarted on the same data dir and port: the running
#      example reconnects and finishes with exit 0;
#   3. kill -9 of the broker AND the example mid-run; broker restarted; the example run again with
#      --resume from its state dir finishes with exit 0;
#   4. --no-transactional on a DELAY topic (INSERT, then a plain send): exit 0.
# Usage: order_timeout_test.sh <tokimq-broker> <tokimq> <tokimq-order-timeout>
set -euo pipefail
broker_bin=$1
cli_bin=$2
demo_bin=$3
work="$(mktemp -d "${TMPDIR:-/tmp}/tokimq-demo-test.XXXXXX")"
broker_pid=""
demo_pid=""
passed=0
failed=0

cleanup() {
  for p in $demo_pid $broker_pid; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# start_broker <data dir> <port or 0>: sets broker_pid and addr.
start_broker() {
  local dir=$1 port=$2
  rm -f "$dir.port"
  mkdir -p "$(dirname "$dir")"
  printf '[group.order-canceller]\nbackoff = ["1s", "5s", "30s"]\n' >"$dir.toml"
  "$broker_bin" -c "$dir.toml" --data-dir "$dir" --bind 127.0.0.1 --port "$port" \
    --http-port 0 --port-file "$dir.port" --log-file "$dir.log" --log-level warn &
  broker_pid=$!
  for _ in $(seq 1 300); do
    if [[ -s "$dir.port" ]]; then
      addr="127.0.0.1:$(cat "$dir.port")"
      if "$cli_bin" --broker "$addr" topic list >/dev/null 2>&1; then return 0; fi
    fi
    kill -0 "$broker_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "broker did not start; log:" >&2
  cat "$dir.log" >&2 || true
  return 1
}

stop_broker() {
  kill -TERM "$broker_pid"
  wait "$broker_pid" || { echo "broker exited non-zero on SIGTERM" >&2; return 1; }
  broker_pid=""
}

# check <name> <rc> <output file>: the run must exit 0 and report the must-be-0 counters as 0.
check() {
  local name=$1 rc=$2 out=$3
  if [[ $rc -eq 0 ]] && grep -Eq '^cancelled-but-paid +0 ' "$out" &&
     grep -Eq '^missed +0 ' "$out" && grep -Eq '^orders +[0-9]+' "$out" &&
     grep -Eq '^duplicates applied +0 ' "$out" && grep -Eq '^orphan timeouts +0 ' "$out"; then
    echo "PASS $name"
    grep -E '^(paid|cancelled|lateness|killed worker|killed creator|this process|errors|resumed) ' \
      "$out" |
      sed 's/^/    /'
    passed=$((passed + 1))
  else
    echo "FAIL $name (exit $rc); output:"
    cat "$out"
    echo "stderr (last 40 lines):"
    tail -40 "${out%.out}.err" 2>/dev/null || true
    failed=$((failed + 1))
  fi
}

demo_flags=(--orders 2000 --paid 0.7 --invisible 2s --grace 60s --producers 2 --consumers 3)

# 1. small run
d="$work/case1"
start_broker "$d/data" 0
"$cli_bin" --broker "$addr" topic create --name orders.timeout --type transaction >/dev/null
rc=0
"$demo_bin" --broker "$addr" --timeout 2s "${demo_flags[@]}" --state-dir "$d/state" \
  >"$d.out" 2>"$d.err" || rc=$?
check "small run (2000 orders, 2 s)" "$rc" "$d.out"
grep -q '^killed worker *kill -9 after its SQLite commit' "$d.out" ||
  { echo "FAIL the cancel worker was not killed between commit and ACK"; failed=$((failed + 1)); }
grep -q '^killed creator *kill -9 mid-transaction' "$d.out" ||
  { echo "FAIL the creator was not killed mid-transaction"; failed=$((failed + 1)); }
stop_broker

# 2. kill -9 of the broker; the example keeps running and reconnects
d="$work/case2"
start_broker "$d/data" 0
port=$(cat "$d/data.port")
"$cli_bin" --broker "$addr" topic create --name orders.timeout --type transaction >/dev/null
"$demo_bin" --broker "$addr" --timeout 3s "${demo_flags[@]}" --state-dir "$d/state" \
  >"$d.out" 2>"$d.err" &
demo_pid=$!
sleep 3.2
kill -9 "$broker_pid"
wait "$broker_pid" 2>/dev/null || true
sleep 1
start_broker "$d/data" "$port"
rc=0
wait "$demo_pid" || rc=$?
demo_pid=""
check "broker kill -9 mid-run, example reconnects" "$rc" "$d.out"
stop_broker

# 3. kill -9 of the broker and the example; broker restarted; example --resume
d="$work/case3"
start_broker "$d/data" 0
"$cli_bin" --broker "$addr" topic create --name orders.timeout --type transaction >/dev/null
"$demo_bin" --broker "$addr" --timeout 3s "${demo_flags[@]}" --state-dir "$d/state" \
  >"$d.first.out" 2>"$d.first.err" &
demo_pid=$!
sleep 3.2
kill -9 "$broker_pid" "$demo_pid"
wait "$broker_pid" "$demo_pid" 2>/dev/null || true
demo_pid=""
start_broker "$d/data" 0
rc=0
"$demo_bin" --broker "$addr" --resume --invisible 2s --grace 60s --state-dir "$d/state" \
  >"$d.out" 2>"$d.err" || rc=$?
check "broker and example kill -9 mid-run, --resume" "$rc" "$d.out"
grep -q "(resumed)" "$d.out" || { echo "FAIL --resume did not resume"; failed=$((failed + 1)); }
stop_broker

# 4. the plain-send creation path
d="$work/case4"
start_broker "$d/data" 0
"$cli_bin" --broker "$addr" topic create --name orders.timeout --type delay >/dev/null
rc=0
"$demo_bin" --broker "$addr" --timeout 2s "${demo_flags[@]}" --no-transactional \
  --state-dir "$d/state" >"$d.out" 2>"$d.err" || rc=$?
check "--no-transactional on a DELAY topic" "$rc" "$d.out"
stop_broker

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
