#!/usr/bin/env bash
# --version of the broker and the CLI, and the broker's --log-format json: every log line it
# writes from start to a clean stop is one JSON object with ts, level, logger, thread, msg.
# Usage: broker_flags_test.sh <tokimq-broker> <tokimq> <version>
set -euo pipefail
broker=$1
cli=$2
version=$3
work=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$work"' EXIT
pid=
fail() { echo "FAIL: $*" >&2; exit 1; }

[[ "$("$broker" --version)" == "tokimq-broker $version" ]] || fail "broker --version: $("$broker" --version)"
[[ "$("$cli" --version)" == "tokimq $version" ]] || fail "cli --version: $("$cli" --version)"

"$broker" --data-dir "$work/data" --port 0 --grpc-port 0 --http-port 0 --port-file "$work/port" \
  --log-format json 2>"$work/log.json" &
pid=$!
for _ in $(seq 200); do [[ -s "$work/port" ]] && break; sleep 0.1; done
[[ -s "$work/port" ]] || { cat "$work/log.json"; fail "broker did not start"; }
"$cli" --broker "127.0.0.1:$(cat "$work/port")" topic create --name t1 >/dev/null
kill -TERM "$pid"
wait "$pid" || fail "broker exit code"
pid=

# Node.js (installed for the RocketMQ client test) parses the lines: a strict JSON parser.
node - "$work/log.json" <<'JS'
const fs = require("fs");
const lines = fs.readFileSync(process.argv[2], "utf8").split("\n").filter((l) => l.length);
if (lines.length < 3) throw new Error(`only ${lines.length} log lines`);
const levels = ["trace", "debug", "info", "warning", "error", "critical"];
lines.forEach((line, n) => {
  const o = JSON.parse(line);
  const keys = Object.keys(o).join(",");
  if (keys !== "ts,level,logger,thread,msg") throw new Error(`line ${n + 1} keys ${keys}: ${line}`);
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(o.ts)) throw new Error(`ts ${o.ts}`);
  if (!levels.includes(o.level)) throw new Error(`level ${o.level}`);
  if (!Number.isInteger(o.thread)) throw new Error(`thread ${o.thread}`);
});
if (!lines.some((l) => JSON.parse(l).msg.includes("ready on"))) throw new Error("no ready line");
console.log(`${lines.length} JSON log lines ok`);
JS
echo "PASS"
