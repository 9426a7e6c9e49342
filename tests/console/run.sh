#!/usr/bin/env bash
# The web console in a real browser: headless Debian Chromium driven by puppeteer-core against a
# broker with known traffic (console.test.js). puppeteer-core is installed with npm into
# <build>/_console_npm (nothing into the repo); it never downloads a browser
# (PUPPETEER_SKIP_DOWNLOAD): the system's chromium is used (scripts/install-deps.sh).
# Usage: tests/console/run.sh <build-dir>      e.g. tests/console/run.sh build/asan
# Leaves <build-dir>/console-screenshot.png.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$(cd "${1:?usage: run.sh <build-dir>}" && pwd)"
for b in tokimq-broker tokimq; do
  [[ -x "$build/bin/$b" ]] || { echo "run.sh: $build/bin/$b missing (build it first)" >&2; exit 1; }
done
chromium="${TOKIMQ_CHROMIUM:-$(command -v chromium || true)}"
[[ -n "$chromium" ]] || { echo "run.sh: chromium not found (scripts/install-deps.sh)" >&2; exit 1; }
prefix="$build/_console_npm"
version=$(node -p "require('$here/package.json').dependencies['puppeteer-core']")
mkdir -p "$prefix"
exec 9>"$prefix.lock"   # one npm install at a time into this prefix
flock 9
if [[ ! -d "$prefix/node_modules/puppeteer-core" ]]; then
  PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-save --no-audit --no-fund --loglevel=error \
    --prefix "$prefix" "puppeteer-core@$version" >&2
fi
exec 9>&-
export NODE_PATH="$prefix/node_modules"
export TOKIMQ_BIN_DIR="$build/bin" TOKIMQ_CHROMIUM="$chromium" TOKIMQ_SCREENSHOT="$build/console-screenshot.png"
exec node --test --test-reporter=spec "$here/console.test.js"
