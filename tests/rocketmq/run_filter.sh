#!/usr/bin/env bash
# The official RocketMQ Node.js client (rocketmq-client-nodejs@1.0.8) and raw gRPC calls of its
# generated stubs against a tokimq broker: SQL92 filters and offset-based consumption (issue 22
# items 5 and 8). Usage: tests/rocketmq/run_filter.sh <build-dir>
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:?usage: run_filter.sh <build-dir>}" && pwd)"
for b in tokimq-broker tokimq; do
  [[ -x "$build/bin/$b" ]] || { echo "run_filter.sh: $build/bin/$b missing (build it first)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "run_filter.sh: node not found" >&2; exit 1; }
prefix="${TOKIMQ_ROCKETMQ_NPM_DIR:-$root/build/_rocketmq_npm}"
"$root/scripts/fetch-rocketmq-proto.sh" "$prefix" >/dev/null
export NODE_PATH="$prefix/node_modules"
export TOKIMQ_BIN_DIR="$build/bin"
exec node --test --test-reporter=spec "$here/rocketmq_filter.test.js"
