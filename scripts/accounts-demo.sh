#!/usr/bin/env bash
# The bank-account example of the ordering seed end to end (examples/accounts, issue 23):
# a fresh broker, a FIFO topic, the account log published, the OrderedConsumer projecting it into
# SQLite with injected handler failures and kill -9 of the consumer, then the check against a
# sequential replay (balances, statuses, each event once, nothing outside Opened..Closed).
# With --compare, the same backlog is then drained by the ordered batch consumer and by a
# one-message-per-group consumer (max_per_group 1), each in its own consumer group, and their
# RESULT lines are printed (docs/performance.md "Ordered batch consumption").
#
# Without --bins / --build it installs what is missing and builds the release preset first.
# Usage: scripts/accounts-demo.sh [--short] [--compare | --compare-only] [--size A E] [--build DIR]
#   or:  scripts/accounts-demo.sh --bins <tokimq-broker> <tokimq> <tokimq-accounts> [--short]
# --short: 100 accounts x 20 events, one kill (the form ctest runs). Default 2000 x 50, 3 kills.
# --size A E: A accounts x E events. --compare-only: the measurement without the failure run.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$here/build/release"
short=0
compare=0
demo=1
size=""
broker_bin="" cli_bin="" demo_bin=""
while (($#)); do
  case "$1" in
    --short) short=1 ;;
    --compare) compare=1 ;;
    --compare-only) compare=1 demo=0 ;;
    --size) size="$2 $3"; shift 2 ;;
    --build) build=$2; shift ;;
    --bins) broker_bin=$2 cli_bin=$3 demo_bin=$4; shift 3 ;;
    *) echo "accounts-demo: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
: "${broker_bin:=$build/bin/tokimq-broker}" "${cli_bin:=$build/bin/tokimq}"
: "${demo_bin:=$build/bin/tokimq-accounts}"
if [[ $build == "$here/build/release" && ! -x $demo_bin ]]; then
  # The one-command form: install what is missing and build the release preset (as demo.sh).
  (cd "$here" && scripts/install-deps.sh &&
   export CCACHE_BASEDIR="$here" CCACHE_NOHASHDIR=true &&
   cmake --preset release >/dev/null &&
   cmake --build --preset release --target tokimq_broker_main tokimq_cli accounts)
fi
for b in "$broker_bin" "$cli_bin" "$demo_bin"; do
  [[ -x $b ]] || { echo "accounts-demo: $b not built (cmake --build --preset release)" >&2; exit 2; }
done

# kill_after: tenths of a second the consumer runs before its kill -9 (random in the range).
if ((short)); then accounts=100 events=20 kills=1 kill_after=(3 9); else
  accounts=2000 events=50 kills=3 kill_after=(1 19); fi
if [[ -n $size ]]; then read -r accounts events <<<"$size"; fi
work="$(mktemp -d "${TMPDIR:-/tmp}/tokimq-accounts.XXXXXX")"
broker_pid="" consumer_pid=""
cleanup() {
  for p in $consumer_pid $broker_pid; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

dir="$work/data"
# What a killed consumer held comes back 1 s after its leases end (default backoff: 10 s, 30 s..).
printf '[group.accounts-projection]\nbackoff = ["1s"]\n' >"$work/broker.toml"
"$broker_bin" --data-dir "$dir" --bind 127.0.0.1 --port 0 --port-file "$dir.port" \
  --log-file "$dir.log" --log-level warn --grpc-port 0 --http-port 0 --config "$work/broker.toml" &
broker_pid=$!
for _ in $(seq 1 300); do
  if [[ -s "$dir.port" ]]; then
    addr="127.0.0.1:$(cat "$dir.port")"
    if "$cli_bin" --broker "$addr" topic list >/dev/null 2>&1; then break; fi
  fi
  kill -0 "$broker_pid" 2>/dev/null || { echo "broker exited; log:" >&2; cat "$dir.log" >&2; exit 1; }
  sleep 0.1
done
"$cli_bin" --broker "$addr" topic create --name accounts --type fifo --queues 8 >/dev/null
common=(--broker "$addr" --topic accounts --accounts "$accounts" --events "$events" --seed 7)
"$demo_bin" produce "${common[@]}"

if ((demo)); then
  # Consumer with 5 % of handler calls failing, killed -9 $kills times at random moments and
  # restarted; what the killed one held comes back after its 2 s leases and the group's 1 s
  # backoff.
  consume=("$demo_bin" consume "${common[@]}" --db "$work/projection.db" --fail-rate 0.05
           --invisible-ms 2000 --timeout-s 600 --label ordered-with-failures)
  for k in $(seq 1 "$kills"); do
    "${consume[@]}" >"$work/consume.$k.out" 2>&1 &
    consumer_pid=$!
    tenths=$((kill_after[0] + RANDOM % (kill_after[1] - kill_after[0] + 1)))
    sleep "$((tenths / 10)).$((tenths % 10))"
    kill -9 "$consumer_pid" 2>/dev/null && echo "kill -9 of the consumer ($k of $kills)"
    wait "$consumer_pid" 2>/dev/null || true
    consumer_pid=""
  done
  "${consume[@]}" | tee "$work/consume.final.out"
  "$demo_bin" check "${common[@]}" --db "$work/projection.db"
fi

if ((compare)); then
  for mode in ordered:16 single:1; do
    label=${mode%%:*} per=${mode##*:}
    "$demo_bin" consume "${common[@]}" --group "accounts-$label" --db "$work/$label.db" \
      --max-per-group "$per" --label "$label" --timeout-s 900
    "$demo_bin" check "${common[@]}" --db "$work/$label.db" >/dev/null
  done
fi
