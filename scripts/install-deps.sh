#!/usr/bin/env bash
# Installs, with apt-get, only the Debian 12 packages tokimq needs that are missing.
# Idempotent: a second run installs nothing. Used by README.md and .ci/run.
# Cluster mode (docs/cluster.md): etcd-server runs the coordination store (tests and
# scripts/cluster.sh start it); the golang-*-dev packages only carry the etcd v3 API's .proto
# files that cluster/CMakeLists.txt compiles at build time.
# Usage: scripts/install-deps.sh [--peers] [--fuzz]
#   --peers adds redis-server, beanstalkd and postgresql (server) for bench/
#   --fuzz adds clang-14 and its libFuzzer runtime (libclang-rt-14-dev) for scripts/fuzz.sh
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build ccache pkg-config git
  libisal-dev librocksdb-dev libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev
  libboost-dev libboost-system-dev libjemalloc-dev
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libsqlite3-dev libpq-dev
  libssl-dev openssl
  # scripts/unit_sizes.sh (function lengths of the library code).
  universal-ctags
  # The /metrics text format (prometheus-cpp core only); promtool, which the metrics and deploy
  # tests run, ships only in Debian's prometheus package (on a machine with systemd it also
  # enables a Prometheus server on :9090; `systemctl disable --now prometheus` if unwanted).
  prometheus-cpp-dev prometheus
  # The web console: its JSON (nlohmann), its browser test (chromium, driven by puppeteer-core).
  nlohmann-json3-dev chromium
  etcd-server golang-etcd-server-dev golang-github-gogo-protobuf-dev
  golang-github-grpc-ecosystem-grpc-gateway-dev
  # etcdctl, which docs/cluster.md's and docs/security.md's examples use (a tester lacked it).
  etcd-client
  # `ip` (netns, veth, bridge): tests/failover/partition_test.cc isolates a leader with them.
  iproute2
)
for arg in "$@"; do
  case "$arg" in
    --peers) pkgs+=(redis-server beanstalkd postgresql strace) ;;
    --fuzz) pkgs+=(clang-14 libclang-rt-14-dev) ;;
    *) echo "install-deps: unknown option $arg" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
