#!/usr/bin/env bash
# Runs one Node.js test file of tests/rocketmq (default rocketmq_clients.test.js) with the
# official RocketMQ client (rocketmq-client-nodejs@1.0.8) against tokimq brokers the test starts
# itself (free ports, temp data dirs). The client is installed with npm into build/_rocketmq_npm
# (shared with the proto codegen; nothing is installed into the repo).
# Test TLS certificates are made here and removed on exit (never committed): a CA and a
# certificate for 127.0.0.1 signed by it (TOKIMQ_TEST_TLS_DIR), which the Node client trusts
# through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH.
# Usage: tests/rocketmq/run.sh <build-dir> [test-file]
#   e.g. tests/rocketmq/run.sh build/asan rocketmq_auth.test.js
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:?usage: run.sh <build-dir> [test-file]}" && pwd)"
test_file="$here/${2:-rocketmq_clients.test.js}"
[[ -f "$test_file" ]] || { echo "run.sh: $test_file not found" >&2; exit 1; }
for b in tokimq-broker tokimq; do
  [[ -x "$build/bin/$b" ]] || { echo "run.sh: $build/bin/$b missing (build it first)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "run.sh: node not found" >&2; exit 1; }
prefix="${TOKIMQ_ROCKETMQ_NPM_DIR:-$root/build/_rocketmq_npm}"
"$root/scripts/fetch-rocketmq-proto.sh" "$prefix" >/dev/null
export NODE_PATH="$prefix/node_modules"
export TOKIMQ_BIN_DIR="$build/bin"
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
node --test --test-reporter=spec "$test_file"
