#!/usr/bin/env bash
# CPU time and context switches per acknowledged send, server and load generator (issue 21
# item 1): figures that move much less than msg/s on a shared machine.
# Usage: bench/cpu_per_send.sh SYSTEM MODE N PRODUCERS
#   SYSTEM tokimq | redis; MODE: tokimq --flush async|sync, Redis appendfsync no|everysec|always
#   Environment: BIN (dir with tokimq-broker and tokimq-bench, default build/release/bin),
#   BENCH (another tokimq-bench), BATCH (messages per send, 1), PIPE (sends in flight per
#   producer, 1), CFG (a TOML config for the broker).
# One fresh server per run: its CPU (utime + stime, /proc/<pid>/stat) and context switches
# (voluntary + nonvoluntary over /proc/<pid>/task/*/status) are read before and after
# `tokimq-bench --mode enqueue`, whose own CPU and switches come from /usr/bin/time.
set -euo pipefail
sys=${1:?usage: cpu_per_send.sh SYSTEM MODE N PRODUCERS}
mode=${2:?mode}
n=${3:?N}
p=${4:?PRODUCERS}
bin="$(cd "${BIN:-build/release/bin}" && pwd)"
bench="${BENCH:-$bin/tokimq-bench}"
d=$(mktemp -d)
pid=""
trap '[[ -n "$pid" ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$d"' EXIT
if [[ $sys == tokimq ]]; then
  "$bin/tokimq-broker" --data-dir "$d/data" --bind 127.0.0.1 --port 0 --grpc-port 0 \
    --http-port 0 --port-file "$d/port" --log-file "$d/b.log" --log-level warn --flush "$mode" \
    ${CFG:+--config "$CFG"} &
  pid=$!
  for _ in $(seq 200); do [[ -s "$d/port" ]] && break; sleep 0.05; done
  addr=127.0.0.1:$(cat "$d/port")
else
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --bind 127.0.0.1 --port "$port" --dir "$d" --appendonly yes --appendfsync "$mode" \
    --save "" --daemonize no --logfile "$d/r.log" &
  pid=$!
  addr=127.0.0.1:$port
fi
"$bench" --system "$sys" --addr "$addr" --mode ping --max-run 30s >/dev/null
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
switches() { cat /proc/"$pid"/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}'; }
t0=$(cpu); c0=$(switches)
/usr/bin/time -f "%U %S %c %w" -o "$d/time" "$bench" --system "$sys" --addr "$addr" \
  --mode enqueue -n "$n" --producers "$p" --pipeline "${PIPE:-1}" --batch "${BATCH:-1}" \
  --delay uniform:1s-10s >"$d/out"
t1=$(cpu); c1=$(switches)
rate=$(sed -n 's/.*enqueue_rate=\([0-9]*\).*/\1/p' "$d/out")
read -r bu bs bc bw <"$d/time"
python3 -c "
n = $n; tck = $(getconf CLK_TCK)
print('$sys $mode P=$p batch ${BATCH:-1} x ${PIPE:-1}: $rate msg/s; server CPU %.1f us/send, '
      '%.2f ctx/send; load generator CPU %.1f us/send, %.2f ctx/send'
      % (($t1 - $t0) * 1e6 / tck / n, ($c1 - $c0) / n, ($bu + $bs) * 1e6 / n, ($bc + $bw) / n))"
