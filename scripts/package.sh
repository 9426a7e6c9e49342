#!/usr/bin/env bash
# Builds the release Debian package: build/package/tokimq_<version>_amd64.deb.
# Release build of the broker and the CLI only (no tests, no benchmarks), then CPack.
# Install with `apt install ./build/package/tokimq_*.deb` (creates the tokimq user and
# /etc/tokimq/tokimq.toml, starts nothing); docs/operations.md "Installing from a package".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build/package -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTOKIMQ_BUILD_TESTS=OFF -DTOKIMQ_BUILD_BENCH=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
cmake --build build/package -j"$(nproc)" --target tokimq_broker_main tokimq_cli
(cd build/package && cpack -G DEB)
ls -l build/package/tokimq_*.deb
