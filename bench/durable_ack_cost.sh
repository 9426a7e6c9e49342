#!/usr/bin/env bash
# What one durable send costs the broker (issue 21 item 1), figures that do not depend on how
# loaded the machine is: per acknowledged single-message send under --flush sync, the broker
# process's context switches (voluntary + nonvoluntary, /proc/<pid>/status of every thread),
# CPU time (utime + stime of /proc/<pid>/stat) and CommitLog fdatasyncs (tokimq-bench's
# log_syncs, from Stats commitlog_syncs); with STRACE=1 a second, shorter run per binary counts
# futex wake calls, futex calls in all and fsync + fdatasync calls under strace -f (strace
# stops every system call, so it shifts the grouping: an upper bound). Old and new binaries
# alternate, a fresh broker and data directory per run. msg/s and the load average are
# printed too (they swing 2x on a shared machine).
# Usage: bench/durable_ack_cost.sh OLD_BIN_DIR NEW_BIN_DIR [N] [ROUNDS] [PRODUCERS]
#   BIN_DIRs hold tokimq-broker (release builds); the load generator is NEW_BIN_DIR's
#   tokimq-bench unless BENCH=/path/to/tokimq-bench. N sends per run (20000), ROUNDS pairs (3),
#   PRODUCERS in flight (128, one send each). STRACE=1 adds the strace runs (N/4 sends).
#   IDLE_S=S adds, per binary, the fsync + fdatasync calls and futex wake calls of a broker
#   left idle for S seconds after 1000 sends (strace -f).
set -euo pipefail
usage="usage: durable_ack_cost.sh OLD_BIN_DIR NEW_BIN_DIR [N] [ROUNDS] [PRODUCERS]"
old="$(cd "${1:?$usage}" && pwd)"
new="$(cd "${2:?$usage}" && pwd)"
n="${3:-20000}"
rounds="${4:-3}"
producers="${5:-128}"
bench="${BENCH:-$new/tokimq-bench}"
work="$(mktemp -d)"
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

start() {  # start <bin dir> <name>
  rm -f "$work/port"
  "$1/tokimq-broker" --data-dir "$work/$2" --bind 127.0.0.1 --port 0 --port-file "$work/port" \
    --grpc-port 0 --http-port 0 --flush sync --log-file "$work/$2.log" --log-level warn &
  pid=$!
  for _ in $(seq 400); do [[ -s "$work/port" ]] && break; sleep 0.05; done
  addr="127.0.0.1:$(cat "$work/port")"
}
stop() { kill "$pid"; wait "$pid" || true; pid=""; }

# Context switches of all threads, and utime + stime in clock ticks, of process $pid.
ctxt() {
  local sum=0 v
  for f in /proc/"$pid"/task/*/status; do
    while read -r k v; do
      [[ $k == voluntary_ctxt_switches: || $k == nonvoluntary_ctxt_switches: ]] && sum=$((sum + v))
    done <"$f" 2>/dev/null || true
  done
  echo "$sum"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

send() {  # send <label> <messages>: prints the RESULT line
  "$bench" --system tokimq --addr "$addr" --label "$1" --mode enqueue --queue wf \
    --delay fixed:1h --batch 1 --producers "$producers" --pipeline 1 -n "$2" | grep '^RESULT'
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }

hz=$(getconf CLK_TCK)
printf '%-5s %5s %9s %12s %12s %14s %9s %s\n' binary round msg/s ctxsw/send cpu_us/send \
  fdatasync/send load1 note
for round in $(seq "$rounds"); do
  for variant in old new; do
    dir=$old
    [[ $variant == new ]] && dir=$new
    start "$dir" "$variant-$round"
    c0=$(ctxt)
    t0=$(cpu_ticks)
    line=$(send "$variant" "$n")
    c1=$(ctxt)
    t1=$(cpu_ticks)
    load=$(cut -d' ' -f1 /proc/loadavg)
    rate=$(field enqueue_rate <<<"$line")
    syncs=$(field syncs_per_msg <<<"$line")
    # Threads that ended during the run are not counted (the broker's do not).
    awk -v r="$round" -v v="$variant" -v rate="$rate" -v c=$((c1 - c0)) -v t=$((t1 - t0)) \
      -v n="$n" -v hz="$hz" -v s="$syncs" -v l="$load" \
      'BEGIN { printf "%-5s %5d %9s %12.2f %12.1f %14s %9s\n", v, r, rate, c / n, t * 1e6 / hz / n, s, l }'
    stop
  done
done

if [[ -n "${IDLE_S:-}" ]]; then
  printf '\nidle broker, %d s after 1000 sends (strace -f)\n' "$IDLE_S"
  printf '%-5s %14s %18s\n' binary fsyncs/min futex_wakes/s
  for variant in old new; do
    dir=$old
    [[ $variant == new ]] && dir=$new
    start "$dir" "idle-$variant"
    send "idle-$variant" 1000 >/dev/null
    sleep 2  # the first checkpoints after the sends
    strace -f -qq -e trace=futex,fsync,fdatasync -o "$work/idle.txt" -p "$pid" &
    tracer=$!
    sleep "$IDLE_S"
    kill -INT "$tracer"
    wait "$tracer" || true
    fsyncs=$(grep -Ec '(fsync|fdatasync)\(' "$work/idle.txt" || true)
    wakes=$(grep -c 'FUTEX_WAKE' "$work/idle.txt" || true)
    awk -v v="$variant" -v f="$fsyncs" -v w="$wakes" -v s="$IDLE_S" \
      'BEGIN { printf "%-5s %14.1f %18.1f\n", v, f * 60 / s, w / s }'
    stop
  done
fi

[[ "${STRACE:-0}" == 1 ]] || exit 0
sn=$((n / 4))
printf '\nstrace -f runs, %d sends each\n' "$sn"
printf '%-5s %16s %16s %16s %9s\n' binary futex_wake/send futex/send fsyncs/send msg/s
for variant in old new; do
  dir=$old
  [[ $variant == new ]] && dir=$new
  start "$dir" "strace-$variant"
  strace -f -qq -e trace=futex,fsync,fdatasync -o "$work/strace.txt" -p "$pid" &
  tracer=$!
  sleep 1  # attached to every thread
  line=$(send "strace-$variant" "$sn")
  kill -INT "$tracer"
  wait "$tracer" || true
  rate=$(field enqueue_rate <<<"$line")
  wakes=$(grep -c 'FUTEX_WAKE' "$work/strace.txt" || true)
  futex=$(grep -c 'futex(' "$work/strace.txt" || true)
  fsyncs=$(grep -Ec '(fsync|fdatasync)\(' "$work/strace.txt" || true)
  awk -v v="$variant" -v w="$wakes" -v f="$futex" -v s="$fsyncs" -v n="$sn" -v r="$rate" \
    'BEGIN { printf "%-5s %16.3f %16.3f %16.4f %9s\n", v, w / n, f / n, s / n, r }'
  stop
done
