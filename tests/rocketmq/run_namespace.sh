#!/usr/bin/env bash
# Runs the official RocketMQ Node.js client against a tokimq broker for namespaces (issue 22
# item 6): tests/rocketmq/rocketmq_namespace.test.js. Same set-up as run.sh (client
# installed into build/_rocketmq_npm, nothing into the repo).
# Usage: tests/rocketmq/run_namespace.sh <build-dir>     e.g. tests/rocketmq/run_namespace.sh build/asan
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:?usage: run_namespace.sh <build-dir>}" && pwd)"
for b in tokimq-broker tokimq; do
  [[ -x "$build/bin/$b" ]] || { echo "run_namespace.sh: $build/bin/$b missing (build it first)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "run_namespace.sh: node not found" >&2; exit 1; }
prefix="${TOKIMQ_ROCKETMQ_NPM_DIR:-$root/build/_rocketmq_npm}"
"$root/scripts/fetch-rocketmq-proto.sh" "$prefix" >/dev/null
export NODE_PATH="$prefix/node_modules"
export TOKIMQ_BIN_DIR="$build/bin"
exec node --test --test-reporter=spec "$here/rocketmq_namespace.test.js"
