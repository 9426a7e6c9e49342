#!/usr/bin/env bash
# What replication costs a broker group (issue 20 item 8): the same workloads against a single
# node, a leader with an async follower and a leader with a sync follower, in one run, the
# variants alternated (single async sync single async sync ...) so that a shared machine's load
# swings hit all three alike. Each run starts fresh brokers on free loopback ports and temp data
# dirs, runs tokimq-bench's workloads a and e (bench/compare.sh) against the leader, stops them
# and deletes the dirs.
#   a  A_N messages, 100-byte bodies, delays A_DELAY: delayed enqueue rate, delivery rate,
#      consumer-side lateness p50/p99 and the broker timer's release lateness p50/p99
#   e  E_N immediately-due messages: lease receive + ack rate
# Variants:
#   single  --broker-id 0 (no follower; a single node writes no group-state records)
#   async   leader --broker-id 0 --replication async; follower --broker-id 1 --replicate-from
#           (a static async leader writes no group-state records: docs/replication.md)
#   sync    the same with --replication sync on both: sends, receives and acks are answered
#           once the follower's pull holds their CommitLog bytes (group-state records included)
# A follower is started, and the leader's /metrics shows its pull, before the workloads run.
# Also printed per variant: the leader's CommitLog bytes per message after both workloads (its
# /metrics tokimq_commitlog_max_offset_bytes; load-independent) and the 1-minute load average.
# Prints one row per run, then per metric the median and range over the rounds.
# Usage: bench/replication_cost.sh [--bin DIR] [--rounds R] [--variants "single async sync"]
#                                   [--alt-bin DIR]
#   --bin     directory with tokimq-broker and tokimq-bench (default build/release/bin)
#   --rounds  rounds of all variants (default 5)
#   --variants  any of single, async, sync, each optionally suffixed @alt: that variant's
#             brokers are --alt-bin's tokimq-broker (the load generator stays --bin's), so two
#             builds compare in one alternated run, e.g. --variants "sync@alt sync"
#             --alt-bin /tmp/main-bin (before / after a change)
#   env A_N (300000), A_DELAY (uniform:1s-5s), E_N (200000)
#   Time: sync's receive + ack path ran ~1k msg/s on a loaded 2-core machine (2026-12-02), so
#   one sync run of the defaults can take minutes; lower A_N / E_N there.
set -euo pipefail
cd "$(dirname "$0")/.."

bin="build/release/bin"
rounds=5
variants="single async sync"
alt_bin=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --variants) variants="$2"; shift ;;
    --alt-bin) alt_bin="$2"; shift ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "replication_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
A_N=${A_N:-300000}
A_DELAY=${A_DELAY:-uniform:1s-5s}
E_N=${E_N:-200000}
bench="$bin/tokimq-bench"
broker="$bin/tokimq-broker"
for f in "$bench" "$broker"; do
  [[ -x "$f" ]] || { echo "replication_cost.sh: missing $f" >&2; exit 2; }
done
for v in $variants; do
  case "${v%@alt}" in single|async|sync) ;; *) echo "replication_cost.sh: unknown variant $v" >&2; exit 2 ;; esac
  if [[ $v == *@alt && ! -x "$alt_bin/tokimq-broker" ]]; then
    echo "replication_cost.sh: variant $v needs --alt-bin DIR with tokimq-broker" >&2; exit 2
  fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/tokimq-replcost.XXXXXX")"
pids=()
stop_all() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  rm -rf "$work"
}
trap cleanup EXIT
results="$work/results"
: >"$results"

free_port() {  # a port below the ephemeral range that nothing listens on
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}

metric() {  # metric <http port> <name>: the first sample's value (empty when absent or down)
  { curl -s "http://127.0.0.1:$1/metrics" || true; } | awk -v m="$2" '
    !done && ($1 == m || index($1, m "{") == 1) { printf "%d", $2; done = 1 }'
}

# start_variant <variant> <dir>: sets addr and lhttp; leaves the pids in pids.
start_variant() {
  local v=${1%@alt} dir=$2 mode=() broker="$broker"
  [[ $1 == *@alt ]] && broker="$alt_bin/tokimq-broker"
  [[ $v != single ]] && mode=(--replication "$v")
  lhttp=$(free_port)
  "$broker" --data-dir "$dir/leader" --bind 127.0.0.1 --port 0 --port-file "$dir/leader.port" \
    --grpc-port 0 --http-port "$lhttp" --broker-id 0 "${mode[@]}" \
    --log-file "$dir/leader.log" --log-level warn &
  pids+=($!)
  for _ in $(seq 1 600); do [[ -s "$dir/leader.port" ]] && break; sleep 0.05; done
  [[ -s "$dir/leader.port" ]] || { echo "leader did not start: $(tail -3 "$dir/leader.log")" >&2; return 1; }
  addr="127.0.0.1:$(cat "$dir/leader.port")"
  if [[ $v != single ]]; then
    "$broker" --data-dir "$dir/follower" --bind 127.0.0.1 --port 0 --grpc-port 0 --http-port 0 \
      --broker-id 1 --replicate-from "$addr" "${mode[@]}" \
      --log-file "$dir/follower.log" --log-level warn &
    pids+=($!)
    local pulled=""
    for _ in $(seq 1 600); do
      pulled=$(metric "$lhttp" tokimq_replication_last_pull_age_seconds)
      [[ -n $pulled ]] && break
      sleep 0.05
    done
    [[ -n $pulled ]] || { echo "the follower never pulled: $(tail -3 "$dir/follower.log")" >&2; return 1; }
  fi
  "$bench" --system tokimq --addr "$addr" --mode ping --max-run 60s >/dev/null
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }

printf '%-6s %5s %10s %10s %8s %8s %9s %9s %10s %8s %6s\n' variant round a_enq/s a_deliv/s \
  a_p50ms a_p99ms a_rel_p50 a_rel_p99 e_lease/s cl_B/msg load1
for round in $(seq "$rounds"); do
  for v in $variants; do
    dir="$work/$v-$round"
    mkdir -p "$dir"
    start_variant "$v" "$dir"
    "$bench" --system tokimq --addr "$addr" --label "a" --queue wa --messages "$A_N" \
      --delay "$A_DELAY" >"$dir/a.out" 2>&1 || echo "   ($v a: exit $?: $(grep -m1 -i error "$dir/a.out"))"
    "$bench" --system tokimq --addr "$addr" --label "e" --queue we --messages "$E_N" \
      --delay now --mode lease >"$dir/e.out" 2>&1 || echo "   ($v e: exit $?: $(grep -m1 -i error "$dir/e.out"))"
    cl=$(metric "$lhttp" tokimq_commitlog_max_offset_bytes)
    load=$(cut -d' ' -f1 /proc/loadavg)
    a=$(grep '^RESULT' "$dir/a.out" || true)
    e=$(grep '^RESULT' "$dir/e.out" || true)
    row="$v $round $(field enqueue_rate <<<"$a") $(field consume_rate <<<"$a") \
$(field p50_ms <<<"$a") $(field p99_ms <<<"$a") $(field release_p50_ms <<<"$a") \
$(field release_p99_ms <<<"$a") $(field consume_rate <<<"$e") \
$(awk -v b="${cl:-0}" -v n=$((A_N + E_N)) 'BEGIN { printf "%.1f", b / n }') $load \
$(field early <<<"$a") $(field errors <<<"$a") $(field errors <<<"$e")"
    echo "$row" >>"$results"
    awk '{ printf "%-6s %5s %10s %10s %8s %8s %9s %9s %10s %8s %6s", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11;
           if ($12 != 0 || $13 != 0 || $14 != 0) printf "  early=%s errors=%s/%s", $12, $13, $14;
           printf "\n" }' <<<"$row"
    stop_all
    rm -rf "$dir"
  done
done

# Median and range per variant and metric (columns of the results file).
summary() {  # summary <variant> <column>: "median (min-max)"
  awk -v v="$1" -v c="$2" '$1 == v && $c != "" && $c != "-1" { x[n++] = $c + 0 }
    END { if (n == 0) { print "-"; exit }
          for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
          m = n % 2 ? x[int(n / 2)] : (x[n / 2 - 1] + x[n / 2]) / 2
          fmt = (m >= 100) ? "%.0f" : "%.1f"
          printf fmt " (" fmt "-" fmt ")\n", m, x[0], x[n - 1] }' "$results"
}
median() { summary "$1" "$2" | awk '{ print $1 }'; }
cols=(
  "3|a: delayed enqueue, msg/s"
  "4|a: delivery, msg/s"
  "5|a: consumer lateness p50, ms"
  "6|a: consumer lateness p99, ms"
  "7|a: release lateness p50, ms (broker timer)"
  "8|a: release lateness p99, ms (broker timer)"
  "9|e: lease receive + ack, msg/s"
  "10|leader CommitLog bytes per message (a + e)"
)
echo
echo "A_N=$A_N ($A_DELAY), E_N=$E_N, $rounds rounds; median (min-max)"
printf '| metric |'; for v in $variants; do printf ' %s |' "$v"; done
for v in $variants; do [[ $v != single ]] && printf ' %s/single |' "$v"; done
echo
printf '|---|'; for v in $variants; do printf -- '---:|'; done
for v in $variants; do [[ $v != single ]] && printf -- '---:|'; done
echo
for c in "${cols[@]}"; do
  IFS='|' read -r col title <<<"$c"
  printf '| %s |' "$title"
  for v in $variants; do printf ' %s |' "$(summary "$v" "$col")"; done
  for v in $variants; do
    [[ $v == single ]] && continue
    awk -v a="$(median "$v" "$col")" -v b="$(median single "$col")" 'BEGIN {
      if (a == "" || a == "-" || b == "" || b == "-" || b + 0 == 0) printf " - |"; else printf " %.2f |", a / b }'
  done
  echo
done
echo "load average (1 min) at the end of each run: $(awk '{ print $11 }' "$results" | sort -n | tr '\n' ' ')"
