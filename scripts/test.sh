#!/usr/bin/env bash
# Builds tokimq with address + undefined sanitizers and runs every test with ctest.
# Usage: scripts/test.sh [preset]   (default: asan; debug and release also work)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-asan}"
# ccache: make paths relative so clones in other directories share the cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
# One asan build is ~4 GB of objects: ccache's default 5 GB limit evicts half of it per build.
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
scripts/install-deps.sh
# The RocketMQ endpoint (and its official-client tests) must build here: no silent skip.
cmake --preset "$preset" -DTOKIMQ_REQUIRE_ROCKETMQ=ON >/dev/null
cmake --build --preset "$preset" --target tokimq_tests all
ctest --preset "$preset"
