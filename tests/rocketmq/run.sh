#!/usr/bin/env bash
# Runs the official RocketMQ Node.js client (rocketmq-client-nodejs@1.0.8) against a tokimq
# broker started by the test (free ports, temp data dir). The client is installed with npm into
# build/_rocketmq_npm (shared with the proto codegen; nothing is installed into the repo).
# Usage: tests/rocketmq/run.sh <build-dir>     e.g. tests/rocketmq/run.sh build/debug
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:?usage: run.sh <build-dir>}" && pwd)"
for b in tokimq-broker tokimq; do
  [[ -x "$build/bin/$b" ]] || { echo "run.sh: $build/bin/$b missing (build it first)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "run.sh: node not found" >&2; exit 1; }
prefix="${TOKIMQ_ROCKETMQ_NPM_DIR:-$root/build/_rocketmq_npm}"
"$root/scripts/fetch-rocketmq-proto.sh" "$prefix" >/dev/null
export NODE_PATH="$prefix/node_modules"
export TOKIMQ_BIN_DIR="$build/bin"
exec node --test --test-reporter=spec "$here/rocketmq_clients.test.js"
