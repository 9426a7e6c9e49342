#!/usr/bin/env bash
# Installs the npm package rocketmq-client-nodejs (default 1.0.8) into a prefix directory and
# prints the directory holding apache/rocketmq/v2/*.proto. The .proto files are never copied into
# this repository; the rocketmq component generates C++ from this copy at configure time,
# and tests/rocketmq uses the same package as the official client.
# Idempotent: an existing install of the right version is reused without touching the network.
# Usage: scripts/fetch-rocketmq-proto.sh [prefix-dir]   (default: build/_rocketmq_npm)
# Exit status 1 (and a message on stderr) when npm or the package is unavailable.
# Concurrent runs on one prefix (two build presets configuring at once, tests run by ctest -j)
# take an exclusive lock on <prefix>.lock, so only one npm install writes the folder at a time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-$here/build/_rocketmq_npm}"
version="${ROCKETMQ_CLIENT_NODEJS_VERSION:-1.0.8}"
pkg="$prefix/node_modules/rocketmq-client-nodejs"
proto_dir="$pkg/proto"

installed_version() {
  [[ -f "$pkg/package.json" ]] || return 1
  node -e "process.stdout.write(require(process.argv[1]).version)" "$pkg/package.json" 2>/dev/null
}

mkdir -p "$prefix"
exec 9>"$prefix.lock"
flock 9
if [[ "$(installed_version || true)" != "$version" || ! -f "$proto_dir/apache/rocketmq/v2/service.proto" ]]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "fetch-rocketmq-proto: npm not found" >&2
    exit 1
  fi
  if ! npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$prefix" \
      "rocketmq-client-nodejs@$version" >&2; then
    echo "fetch-rocketmq-proto: npm install rocketmq-client-nodejs@$version failed" >&2
    exit 1
  fi
fi
if [[ ! -f "$proto_dir/apache/rocketmq/v2/service.proto" ]]; then
  echo "fetch-rocketmq-proto: $proto_dir/apache/rocketmq/v2/service.proto missing" >&2
  exit 1
fi
echo "$proto_dir"
