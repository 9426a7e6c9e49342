#!/usr/bin/env bash
# Side-by-side comparison of tokimq with a Redis sorted-set delay queue, beanstalkd and a
# PostgreSQL jobs table (FOR UPDATE SKIP LOCKED, as pg-boss / River / Solid Queue).
# Starts each system from its binary on a free loopback port with persistence on (tokimq's
# default async flush, Redis AOF everysec, beanstalkd binlog, PostgreSQL's defaults:
# synchronous_commit = on), runs the same workloads with
# tokimq-bench, stops it, prints one table with tokimq/peer ratios and writes the table into
# docs/performance.md (between the compare.sh markers; the hand-written notes are kept).
#
# Usage: bench/compare.sh [--smoke] [--bin DIR] [--systems "tokimq redis beanstalkd postgresql"]
#                         [--out FILE]
#                         [--workloads abcdefg]
#   --smoke   seconds-long sizes (CI); writes to a temp file unless --out is given
#   --bin     use tokimq-broker/tokimq-bench from DIR instead of building the release preset
# Workloads (full / smoke):
#   a  1M / 20k x 100 B, delays uniform 1-10 s / 1-2 s: enqueue rate, lateness, early
#      (tokimq also: the broker timer's release lateness)
#   b  500k / 10k due in the same second: time until the second is fully delivered
#      (tokimq also: until it is fully released into the topic)
#   c  10M / 50k pending with a 2 h delay: anonymous RSS and disk bytes per pending message
#   d  restart with c's messages pending: ms until the system serves again
#   e  500k / 20k immediately-due messages: lease receive + ack rate
#   f  a's delayed enqueue with every system in its fsync-before-ack mode (tokimq --flush sync,
#      Redis appendfsync always, beanstalkd -f 0, PostgreSQL synchronous_commit = on), single-
#      message sends from 1, 16 and 128
#      producers, each with one send in flight: enqueue rate, and fsyncs per acknowledged
#      message (tokimq's own count; for every system strace -c on a second, shorter run when
#      strace can attach). Sizes per level: F1_N F16_N F128_N (full 2k / 40k / 200k,
#      smoke 100 / 500 / 2k); F_STRACE_DIV: the strace run sends N / this (default 4).
# PostgreSQL runs as the unprivileged user postgres when started by root (it refuses root),
# with max_connections = 300 (f opens 128 producer connections) and otherwise the defaults.
#   g  millisecond resolution (issue 21 item 5): 1,000 messages due one per millisecond of one
#      second (sent 3 s ahead), alone (label g) and again while a second tokimq-bench sends
#      G_BG_RATE msg/s (full 100k, smoke 5k) of 1 h-delayed messages to another queue (label gb):
#      release lateness (tokimq) and consumer-side lateness; targets p99 <= 1 ms / <= 3 ms.
# Consumers ack their last batch with their next receive (tokimq-bench --ack with-receive: one
# round trip per batch where the system allows it); ACK=separate gives each ack its own round
# trip (the form of the runs before 2026-12-03).
# Sizes can be overridden: A_N B_N C_N E_N environment variables. START_TIMEOUT (120s): how long
# a start (and d's restart) waits for the system to serve before the run fails.
# --workloads "abcde f" picks workloads (default all); f alone: --workloads f.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

smoke=0
bin=""
systems="tokimq redis beanstalkd postgresql"
workloads="abcdefg"
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --workloads) workloads="$2"; shift ;;
    --bin) bin="$2"; shift ;;
    --systems) systems="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

if [[ $smoke -eq 1 ]]; then
  A_N=${A_N:-20000}; A_DELAY=${A_DELAY:-uniform:1s-2s}
  B_N=${B_N:-10000}; B_LEAD=${B_LEAD:-3s}
  C_N=${C_N:-50000}
  E_N=${E_N:-20000}
  F1_N=${F1_N:-100}; F16_N=${F16_N:-500}; F128_N=${F128_N:-2000}
  G_BG_RATE=${G_BG_RATE:-5000}
else
  A_N=${A_N:-1000000}; A_DELAY=${A_DELAY:-uniform:1s-10s}
  B_N=${B_N:-500000}; B_LEAD=${B_LEAD:-30s}
  C_N=${C_N:-10000000}
  E_N=${E_N:-500000}
  F1_N=${F1_N:-2000}; F16_N=${F16_N:-40000}; F128_N=${F128_N:-200000}
  G_BG_RATE=${G_BG_RATE:-100000}
fi
F_STRACE_DIV=${F_STRACE_DIV:-4}
# How long start waits for a system to serve (d at 50M: Redis reloads its AOF for minutes).
START_TIMEOUT=${START_TIMEOUT:-120s}
wants() { [[ "$workloads" == *"$1"* ]]; }

scripts/install-deps.sh --peers
if [[ -z "$bin" ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target tokimq_broker_main tokimq_bench_tool
  bin="$root/build/release/bin"
fi
bench="$bin/tokimq-bench"
need=("$bench")
[[ " $systems " == *" tokimq "* ]] && need+=("$bin/tokimq-broker")  # peers alone: bench only
for f in "${need[@]}"; do
  [[ -x "$f" ]] || { echo "compare.sh: missing $f" >&2; exit 2; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/tokimq-compare.XXXXXX")"
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
results="$work/results"
: >"$results"
failures=0

free_port() {
  local p
  for _ in $(seq 1 200); do
    # Below the kernel's ephemeral range (32768-60999): the benchmark's own client connections
    # leave ports there in TIME_WAIT, and beanstalkd cannot bind one of those.
    p=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}

# start <system> <dir> [port]: sets pid and addr, waits until the system serves. With
# durable=1 each system runs in its fsync-before-ack mode (workload f).
durable=0
start() {
  local sys=$1 dir=$2 port=${3:-}
  mkdir -p "$dir"
  local tflush=async rfsync=everysec bflags=()
  if [[ $durable -eq 1 ]]; then tflush=sync; rfsync=always; bflags=(-f 0); fi
  case "$sys" in
    tokimq)
      rm -f "$dir/port"
      "$bin/tokimq-broker" --data-dir "$dir/data" --bind 127.0.0.1 --port "${port:-0}" \
        --grpc-port 0 --http-port 0 --port-file "$dir/port" --log-file "$dir/broker.log" --log-level warn \
        --flush "$tflush" &
      pid=$!
      for _ in $(seq 1 600); do [[ -s "$dir/port" ]] && break; sleep 0.05; done
      addr="127.0.0.1:$(cat "$dir/port")"
      ;;
    redis)
      port=${port:-$(free_port)}
      redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --appendonly yes \
        --appendfsync "$rfsync" --save "" --daemonize no --logfile "$dir/redis.log" &
      pid=$!
      addr="127.0.0.1:$port"
      ;;
    beanstalkd)
      port=${port:-$(free_port)}
      mkdir -p "$dir/binlog"
      beanstalkd -l 127.0.0.1 -p "$port" -b "$dir/binlog" "${bflags[@]}" &
      pid=$!
      addr="127.0.0.1:$port"
      ;;
    postgresql)
      port=${port:-$(free_port)}
      local pgbin run_as=()
      pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
      [[ -x "$pgbin/postgres" ]] || { echo "compare.sh: no PostgreSQL server (install-deps --peers)" >&2; return 1; }
      if [[ $(id -u) -eq 0 ]]; then
        chmod 711 "$work"
        chown postgres: "$dir"
        run_as=(setpriv --reuid=postgres --regid=postgres --init-groups --)
      fi
      if [[ ! -s "$dir/pgdata/PG_VERSION" ]]; then
        "${run_as[@]}" "$pgbin/initdb" -D "$dir/pgdata" -U postgres --auth=trust -E UTF8 \
          --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; return 1; }
      fi
      local pgsync=on  # PostgreSQL's default: a commit is flushed before it is acknowledged
      "${run_as[@]}" "$pgbin/postgres" -D "$dir/pgdata" -p "$port" -k "$dir" \
        -c listen_addresses=127.0.0.1 -c max_connections=300 -c synchronous_commit="$pgsync" \
        -c logging_collector=off >"$dir/postgres.log" 2>&1 &
      pid=$!
      addr="127.0.0.1:$port"
      ;;
  esac
  "$bench" --system "$sys" --addr "$addr" --mode ping --max-run "$START_TIMEOUT" >/dev/null
}

stop() {
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}

# disk_bytes <dir>: bytes allocated under dir (0 when it does not exist yet).
disk_bytes() {
  if [[ -d $1 ]]; then du -sB1 "$1" | cut -f1; else echo 0; fi
}

# run <system> <label> <tokimq-bench args...>: appends the RESULT line.
run() {
  local sys=$1 label=$2
  shift 2
  echo "== $sys $label: $*"
  local rc=0
  "$bench" --system "$sys" --addr "$addr" --label "$label" --ack "${ACK:-with-receive}" "$@" \
    >"$work/$sys.$label.out" 2>&1 || rc=$?
  sed 's/^/   /' "$work/$sys.$label.out" | grep -v '^   RESULT'
  grep '^RESULT' "$work/$sys.$label.out" >>"$results" || true
  if [[ $rc -ne 0 ]]; then
    echo "   (exit $rc)"
    failures=$((failures + 1))
  fi
}

for sys in $systems; do
  wants a || wants b || wants c || wants d || wants e || wants g || continue
  dir="$work/$sys"
  start "$sys" "$dir"
  rpid=(--pid "$pid"); [[ $sys == postgresql ]] && rpid=()
  wants a && run "$sys" a --queue wa --messages "$A_N" --delay "$A_DELAY" "${rpid[@]}"
  wants b && run "$sys" b --queue wb --messages "$B_N" --delay "hot:$B_LEAD" "${rpid[@]}"
  wants e && run "$sys" e --queue we --messages "$E_N" --delay now --mode lease "${rpid[@]}"
  if wants g; then
    gargs=(--messages 1000 --delay spread:3s --batch 1000 --producers 1 --consumers 4)
    run "$sys" g --queue wg "${gargs[@]}"
    # gb: the same while a paced background producer keeps the system busy (1 h delays: nothing
    # of it comes due in the window, so the release figures are g's alone).
    bg_n=$(( G_BG_RATE * 8 ))
    "$bench" --system "$sys" --addr "$addr" --queue wgbg --mode enqueue --delay fixed:1h \
      --messages "$bg_n" --rate "$G_BG_RATE" --max-run 30s >"$work/$sys.gbg.out" 2>&1 &
    bgpid=$!
    sleep 2
    run "$sys" gb --queue wgb "${gargs[@]}"
    wait "$bgpid" || echo "   (background sender exit $?)"
    grep -E "enqueue " "$work/$sys.gbg.out" | sed 's/^/   background: /' || true
  fi
  if ! wants c && ! wants d; then stop; continue; fi
  cpid=(--pid "$pid"); [[ $sys == postgresql ]] && cpid=()  # many processes: no RSS figure
  disk0=$(disk_bytes "$dir")
  run "$sys" c --queue wc --messages "$C_N" --delay fixed:2h --mode enqueue "${cpid[@]}"
  # c's disk cost: what the data dir grew by, per pending message (allocated bytes, after the
  # system's own flush interval; tokimq: CommitLog + TimerLog + ConsumeQueues + metadata, Redis:
  # AOF, beanstalkd: binlog, PostgreSQL: heap + indexes + WAL).
  sleep 2
  disk1=$(disk_bytes "$dir")
  echo "RESULT system=$sys label=c disk_b_per_msg=$(awk -v a="$disk0" -v b="$disk1" -v n="$C_N" \
    'BEGIN { printf "%.1f", (b - a) / n }')" >>"$results"
  echo "   disk: $(( (disk1 - disk0) / 1048576 )) MiB more under $dir for $C_N pending"
  if [[ $sys == tokimq ]]; then
    du -sB1 "$dir"/data/* 2>/dev/null | awk '{ printf "   disk: %s %d MiB\n", $2, $1 / 1048576 }'
  fi
  # d: restart with c's messages pending (graceful stop, then time until it serves).
  old_addr=$addr
  stop
  port=${old_addr##*:}
  t0=$(date +%s%N)
  start "$sys" "$dir" "$port"
  t1=$(date +%s%N)
  echo "== $sys d: serving $(( (t1 - t0) / 1000000 )) ms after start with $C_N pending"
  echo "RESULT system=$sys label=d ready_ms=$(( (t1 - t0) / 1000000 ))" >>"$results"
  stop
done

# ---- f: fsync before every ack ----
# fsync_count "<pid>..." <outfile> <cmd...>: runs cmd while strace -c counts the fsync and
# fdatasync calls of the pids (all threads, and processes they fork); prints their total, or
# nothing when strace cannot attach.
fsync_count() {
  local target=$1 outf=$2
  shift 2
  command -v strace >/dev/null || return 0
  local pids=() p
  for p in $target; do pids+=(-p "$p"); done
  strace -c -f -e trace=fsync,fdatasync -o "$outf" "${pids[@]}" 2>"$outf.log" &
  local spid=$!
  # Wait until strace has attached to the process's threads (it says so on stderr), bounded.
  for _ in $(seq 1 100); do
    grep -q attached "$outf.log" 2>/dev/null && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  sleep 0.3
  local rc=0
  "$@" >"$outf.run" 2>&1 || rc=$?
  kill -INT "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then
    echo "compare.sh: the strace run failed (exit $rc): $(tail -1 "$outf.run")" >&2
  elif [[ -s "$outf" ]]; then
    awk '$NF == "fsync" || $NF == "fdatasync" { n += $4 } END { if (n > 0) print n }' "$outf"
  fi
  return 0
}
f_levels=(1 16 128)
if wants f; then
  durable=1
  for sys in $systems; do
    dir="$work/$sys-f"
    start "$sys" "$dir" || continue
    for n in "${f_levels[@]}"; do
      var="F${n}_N"; fn=${!var}
      fargs=(--mode enqueue --delay "$A_DELAY" --batch 1 --producers "$n" --pipeline 1)
      run "$sys" "f$n" "${fargs[@]}" --queue "wf$n" --messages "$fn"
      sn=$(( fn / F_STRACE_DIV )); if [[ $sn -lt 10 ]]; then sn=10; fi
      targets="$pid"
      # PostgreSQL: the postmaster and its children (WAL writer, checkpointer); the backends of
      # the run's connections are forked after strace attaches and followed (-f).
      [[ $sys == postgresql ]] && targets="$pid $(pgrep -P "$pid" | tr '\n' ' ')"
      c=$(fsync_count "$targets" "$work/$sys.f$n.strace" "$bench" --system "$sys" --addr "$addr" \
            "${fargs[@]}" --queue "wfs$n" --messages "$sn" --max-run 300s)
      if [[ -n "$c" ]]; then
        echo "   strace: $c fsync+fdatasync for $sn messages"
        echo "RESULT system=$sys label=f$n strace_fsyncs=$c strace_messages=$sn strace_per_msg=$(awk -v a="$c" -v b="$sn" 'BEGIN { printf "%.4f", a / b }')" >>"$results"
      fi
    done
    stop
  done
  durable=0
fi

# ---- table ----
get() {  # get <system> <label> <key>; nothing when absent or -1 (tokimq-bench: not measured)
  awk -v s="$1" -v l="$2" -v k="$3" '
    { sys=""; lab=""; val="";
      for (i = 2; i <= NF; i++) { split($i, kv, "=");
        if (kv[1] == "system") sys = kv[2]; else if (kv[1] == "label") lab = kv[2];
        else if (kv[1] == k) val = kv[2]; }
      if (sys == s && lab == l && val != "" && val !~ /^-1(\.0*)?$/) { print val; exit } }' "$results"
}
ratio() {  # ratio <a> <b>
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-";
                                   else printf "%.2f", a / b }'
}
rows=(
  "a|enqueue_rate|a: enqueue, msg/s (higher is better)"
  "a|consume_rate|a: delivery, msg/s"
  "a|due_rate|a: due rate, msg/s (messages / span of their deliver times: delivery keeps up when close to it)"
  "a|drain_lag_ms|a: last received, ms after the last deliver time"
  "a|p50_ms|a: lateness p50, ms"
  "a|p99_ms|a: lateness p99, ms (consumer side; issue 21: <= 50 at full size)"
  "a|max_ms|a: lateness max, ms"
  "a|release_p99_ms|a: release lateness p99, ms (broker timer; target <= 5)"
  "a|early|a: early messages (must be 0)"
  "b|hot_drain_ms|b: hot second drained, ms after it began (target <= 3000: the second + 2 s)"
  "b|hot_released_ms|b: hot second released, ms after it began"
  "b|enqueue_rate|b: enqueue, msg/s"
  "c|anon_b_per_msg|c: anonymous RSS per pending message, B (target <= 16)"
  "c|enqueue_rate|c: enqueue, msg/s"
  "c|disk_b_per_msg|c: disk bytes per pending message (data dir growth)"
  "d|ready_ms|d: restart until serving, ms (target <= 5000)"
  "e|consume_rate|e: lease receive + ack, msg/s (target >= 200000)"
  "g|release_p99_ms|g: 1 due per ms: release lateness p99, ms (target <= 1)"
  "g|p99_ms|g: 1 due per ms: consumer lateness p99, ms (target <= 3)"
  "gb|release_p99_ms|g + background sends: release lateness p99, ms (target <= 1)"
  "gb|p99_ms|g + background sends: consumer lateness p99, ms (target <= 3)"
)
table="$work/table.md"
{
  echo "| metric | tokimq | redis | beanstalkd | postgresql | tokimq/redis | tokimq/beanstalkd | tokimq/postgresql |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for row in "${rows[@]}"; do
    IFS='|' read -r label key title <<<"$row"
    t=$(get tokimq "$label" "$key"); r=$(get redis "$label" "$key"); b=$(get beanstalkd "$label" "$key")
    p=$(get postgresql "$label" "$key")
    echo "| $title | ${t:--} | ${r:--} | ${b:--} | ${p:--} | $(ratio "$t" "$r") | $(ratio "$t" "$b") | $(ratio "$t" "$p") |"
  done
} >"$table"
# f: its own table (rates and fsyncs per acknowledged message per in-flight level).
ftable="$work/ftable.md"
best() {  # best <a> <b> ...: the largest non-empty value
  local m="" v
  for v in "$@"; do
    [[ -z "$v" ]] && continue
    if [[ -z "$m" ]] || awk -v a="$v" -v b="$m" 'BEGIN { exit !(a > b) }'; then m=$v; fi
  done
  echo "$m"
}
if wants f; then
  {
    echo "| f: fsync before every ack | tokimq | redis | beanstalkd | postgresql | tokimq/best peer |"
    echo "|---|---:|---:|---:|---:|---:|"
    for n in "${f_levels[@]}"; do
      t=$(get tokimq "f$n" enqueue_rate); r=$(get redis "f$n" enqueue_rate)
      b=$(get beanstalkd "f$n" enqueue_rate); p=$(get postgresql "f$n" enqueue_rate)
      echo "| $n in flight: enqueue, msg/s | ${t:--} | ${r:--} | ${b:--} | ${p:--} | $(ratio "$t" "$(best "$r" "$b" "$p")") |"
    done
    for n in "${f_levels[@]}"; do
      t=$(get tokimq "f$n" syncs_per_msg)
      echo "| $n in flight: CommitLog fdatasyncs per ack (tokimq's count) | ${t:--} | - | - | - | - |"
    done
    for n in "${f_levels[@]}"; do
      t=$(get tokimq "f$n" strace_per_msg); r=$(get redis "f$n" strace_per_msg)
      b=$(get beanstalkd "f$n" strace_per_msg); p=$(get postgresql "f$n" strace_per_msg)
      echo "| $n in flight: fsync+fdatasync per ack (strace run) | ${t:--} | ${r:--} | ${b:--} | ${p:--} | - |"
    done
  } >"$ftable"
fi
echo
cat "$table"
[[ -s "$ftable" ]] && { echo; cat "$ftable"; }

# ---- docs/performance.md ----
if [[ -z "$out" ]]; then
  if [[ "$workloads" != "abcdefg" && $smoke -eq 0 ]]; then
    # A partial run must not overwrite the full table in docs/performance.md.
    mkdir -p "$root/build/bench"
    out="$root/build/bench/performance-partial.md"
  elif [[ $smoke -eq 1 ]]; then
    mkdir -p "$root/build/bench"
    out="$root/build/bench/performance-smoke.md"
  else
    out="$root/docs/performance.md"
  fi
fi
section="$work/section.md"
{
  echo "<!-- compare.sh:begin (generated by bench/compare.sh; edits here are overwritten) -->"
  size_label=full
  if [[ $smoke -eq 1 ]]; then
    size_label=smoke
  elif [[ $A_N -lt 1000000 || $B_N -lt 500000 || $C_N -lt 10000000 || $E_N -lt 500000 ]]; then
    size_label="reduced sizes"
  fi
  echo "## Latest run ($size_label, $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Machine: $(nproc) cores ($(awk -F: '/model name/ {print $2; exit}' /proc/cpuinfo | sed 's/^ *//')),"
  echo "$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) RAM, kernel $(uname -r);"
  pgv=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  echo "redis-server $(redis-server --version | awk '{print $3}' | sed 's/v=//'), beanstalkd $(beanstalkd -v 2>&1 | awk '{print $2}'),"
  echo "PostgreSQL $([[ -n "$pgv" ]] && "$pgv/postgres" --version | awk '{print $3}')."
  echo
  echo "Command: \`bench/compare.sh$( [[ $smoke -eq 1 ]] && echo ' --smoke')\` — sizes a=$A_N ($A_DELAY),"
  echo "b=$B_N (hot second, lead $B_LEAD), c=$C_N pending (2 h), e=$E_N; 2 producers, 4 consumers,"
  echo "batch 128, pipeline 16, 100-byte bodies, all on loopback; g: 1,000 messages one per ms of one"
  echo "second, 4 consumers; gb: g while $G_BG_RATE msg/s of 1 h-delayed sends go to another queue."
  echo
  cat "$table"
  echo
  echo "Ratios are tokimq divided by the peer: above 1 is better for rates, below 1 is better for"
  echo "latencies, memory and restart time."
  echo
  echo "Two kinds of lateness. *Lateness* and *drained* are measured at the consumer (receive time"
  echo "− deliver time), so they include how fast the consumers empty the topic; they are the"
  echo "figures compared across systems. *Release lateness* is tokimq's broker timer alone: the"
  echo "moment its dequeue service put the message into the topic − the deliver time; the design"
  echo "targets (p99 ≤ 5 ms; a second of 500k due released within 2 s) are about it. The a row is"
  echo "the difference of the broker's lateness histogram (Stats \`lateness_buckets\`) before and"
  echo "after the run, read as bucket upper bounds (within 6.25 %). The b row is an upper bound on"
  echo "b's last release: the first poll of the topic's message count (every 50 ms) that saw all of"
  echo "b or, when lower, b's last deliver time + the window's release max, or the consumers' last"
  echo "receive (a message is released before it is received)."
  echo "Redis, beanstalkd and PostgreSQL move a message to the consumer in one step: no release"
  echo "figure ('-'). PostgreSQL: no RSS figure for c (a server of many processes)."
  if [[ -s "$ftable" ]]; then
    echo
    echo "Workload f (fsync before every ack: tokimq \`--flush sync\`, Redis \`appendfsync always\`,"
    echo "beanstalkd \`-f 0\`, PostgreSQL \`synchronous_commit = on\`): a's delays ($A_DELAY), single-message sends (batch 1) from 1, 16 and"
    echo "128 producer connections with one send in flight each; sizes $F1_N / $F16_N / $F128_N."
    echo "Fsyncs per ack: tokimq's own count (Stats \`commitlog_syncs\` over the timed run) and, for"
    echo "every system, \`strace -c -f\` on a second run of 1/$F_STRACE_DIV the size (strace slows"
    echo "every system call, so it shifts the grouping; '-' when strace could not attach)."
    echo
    cat "$ftable"
  fi
  rel_a=$(get tokimq a released); top_a=$(get tokimq a released_topic)
  if [[ -n "$rel_a" ]]; then
    echo "Timer releases in a's window: $rel_a, of which $top_a into a's topic (a difference is other"
    echo "timer traffic in the window, e.g. retry copies)."
  fi
  echo "<!-- compare.sh:end -->"
} >"$section"
if [[ -f "$out" ]] && grep -q '<!-- compare.sh:begin' "$out"; then
  awk -v sec="$section" '
    /<!-- compare.sh:begin/ { while ((getline line < sec) > 0) print line; skip = 1; next }
    /<!-- compare.sh:end -->/ { skip = 0; next }
    !skip { print }' "$out" >"$out.tmp" && mv "$out.tmp" "$out"
else
  { echo "# Performance"; echo; cat "$section"; } >"$out"
fi
echo
echo "compare.sh: wrote $out"
echo "compare.sh: $failures failed runs"
[[ $failures -eq 0 ]]
