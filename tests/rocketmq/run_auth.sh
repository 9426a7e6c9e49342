#!/usr/bin/env bash
# Runs the official RocketMQ Node.js client against a tokimq broker with --auth (issue 17):
# tests/rocketmq/rocketmq_auth.test.js. Same set-up as run.sh (client installed into
# build/_rocketmq_npm, nothing into the repo).
# Usage: tests/rocketmq/run_auth.sh <build-dir>     e.g. tests/rocketmq/run_auth.sh build/asan
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:?usage: run_auth.sh <build-dir>}" && pwd)"
for b in tokimq-broker tokimq; do
  [[ -x "$build/bin/$b" ]] || { echo "run_auth.sh: $build/bin/$b missing (build it first)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "run_auth.sh: node not found" >&2; exit 1; }
prefix="${TOKIMQ_ROCKETMQ_NPM_DIR:-$root/build/_rocketmq_npm}"
"$root/scripts/fetch-rocketmq-proto.sh" "$prefix" >/dev/null
export NODE_PATH="$prefix/node_modules"
export TOKIMQ_BIN_DIR="$build/bin"
# Test certificates, made here and removed on exit (never committed): a CA and a certificate for
# 127.0.0.1 signed by it, which the Node client trusts through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH.
tls_dir="$(mktemp -d)"
trap 'rm -rf "$tls_dir"' EXIT
(
  cd "$tls_dir"
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj /CN=tokimq-test-ca
  openssl req "${ec[@]}" -keyout server.key -out server.csr -subj /CN=127.0.0.1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >ext.cnf
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile ext.cnf -out server.pem
) 2>/dev/null
export TOKIMQ_TEST_TLS_DIR="$tls_dir"
export GRPC_DEFAULT_SSL_ROOTS_FILE_PATH="$tls_dir/ca.pem"
node --test --test-reporter=spec "$here/rocketmq_auth.test.js"
