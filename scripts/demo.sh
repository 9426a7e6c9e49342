#!/usr/bin/env bash
# The README's first command: installs what is missing, builds the release preset, starts a
# broker on a temp dir and a free loopback port, creates the TRANSACTION topic of the timeout
# messages with the CLI, runs the order-timeout demo (100k orders, 5 s timeout, 70 % paid;
# orders in SQLite under the temp dir, each created by a transactional send + INSERT + commit;
# one creator killed mid-transaction and one cancel worker killed between its SQLite commit and
# its ACK, both with SIGKILL), stops the broker with SIGTERM and removes the temp dir. Exits
# with the demo's exit code.
#
# Usage: scripts/demo.sh [extra tokimq-order-timeout flags, e.g. --orders 20000]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
# ccache: make paths relative so clones in other directories share the cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
cmake --preset release >/dev/null
cmake --build --preset release --target tokimq_broker_main tokimq_cli order_timeout

bin="$PWD/build/release/bin"
work="$(mktemp -d "${TMPDIR:-/tmp}/tokimq-demo.XXXXXX")"
broker_pid=""
cleanup() {
  if [[ -n "$broker_pid" ]] && kill -0 "$broker_pid" 2>/dev/null; then
    kill -TERM "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The demo kills one cancel worker between its SQLite commit and its ACK; its messages come back
# after their lease plus the group's first backoff (10 s by default): 1 s keeps the demo short.
cat >"$work/broker.toml" <<'TOML'
[group.order-canceller]
backoff = ["1s", "5s", "30s"]
TOML

echo "demo: starting tokimq-broker (data dir $work/data, log $work/broker.log)"
"$bin/tokimq-broker" -c "$work/broker.toml" --data-dir "$work/data" --bind 127.0.0.1 --port 0 \
  --http-port 0 \
  --port-file "$work/port" --log-file "$work/broker.log" &
broker_pid=$!

# Wait until the broker writes its port and answers a request.
broker=""
for _ in $(seq 1 200); do
  if ! kill -0 "$broker_pid" 2>/dev/null; then
    echo "demo: the broker exited early; its log:" >&2
    cat "$work/broker.log" >&2 || true
    exit 1
  fi
  if [[ -s "$work/port" ]]; then
    broker="127.0.0.1:$(cat "$work/port")"
    if "$bin/tokimq" --broker "$broker" topic list >/dev/null 2>&1; then break; fi
  fi
  sleep 0.1
done
if [[ -z "$broker" ]] || ! "$bin/tokimq" --broker "$broker" topic list >/dev/null 2>&1; then
  echo "demo: the broker did not answer within 20 s" >&2
  exit 1
fi
echo "demo: broker ready on $broker"

"$bin/tokimq" --broker "$broker" topic create --name orders.timeout --type transaction

set +e
"$bin/tokimq-order-timeout" --broker "$broker" --topic orders.timeout \
  --orders 100000 --timeout 5s --paid 0.7 --state-dir "$work/state" "$@"
rc=$?
set -e

kill -TERM "$broker_pid"
if ! wait "$broker_pid"; then
  echo "demo: the broker did not stop cleanly; its log:" >&2
  tail -20 "$work/broker.log" >&2 || true
  [[ $rc -eq 0 ]] && rc=1
fi
broker_pid=""
echo "demo: broker stopped; exit code $rc"
exit "$rc"
