#!/usr/bin/env bash
# Crash loop: kill -9 the real broker at random instants under a delayed +
# lease workload, then check the history: lost 0, early 0, broker-made duplicates 0.
#
# usage: tests/crash/crash_loop.sh [--short|--long] [CRASHLOOP_BIN BROKER_BIN] [-- extra args]
#   --short  ~60 s: 16 kills (every 3rd a double kill within a second); what ctest runs
#            (ctest -L crash)
#   --long   35 kills, longer uptimes, three runs: flush async, flush sync, and async with the
#            broker on its manual clock (a restart takes no broker time; see tokimq-crashloop
#            --help) — about 10 minutes
# Binaries default to build/release/bin/{tokimq-crashloop,tokimq-broker}. Extra arguments go
# to tokimq-crashloop (--seed N repeats a run; see tokimq-crashloop --help).
# Exit code: 0 pass, 1 a check failed, 2 the harness could not run. On failure the work dir
# (data, broker.log) is kept and printed.
set -euo pipefail
mode=short
if [[ "${1:-}" == --short || "${1:-}" == --long ]]; then mode=${1#--}; shift; fi
root=$(cd "$(dirname "$0")/../.." && pwd)
crashloop=$root/build/release/bin/tokimq-crashloop
broker=$root/build/release/bin/tokimq-broker
if [[ $# -ge 2 && "$1" != -* ]]; then crashloop=$1; broker=$2; shift 2; fi
if [[ "${1:-}" == -- ]]; then shift; fi
for b in "$crashloop" "$broker"; do
  [[ -x "$b" ]] || { echo "crash_loop.sh: $b not built" >&2; exit 2; }
done

run() {  # run <name> <args...>
  local name=$1; shift
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/tokimq-crashloop-$name-XXXXXX")
  local rc=0
  "$crashloop" --broker-bin "$broker" --work-dir "$dir" "$@" || rc=$?
  if [[ $rc -eq 0 ]]; then rm -rf "$dir"; else echo "crash_loop.sh: $name failed (rc $rc), kept $dir" >&2; fi
  return $rc
}

if [[ $mode == short ]]; then
  run short --kills 16 --double-kill-every 3 --min-up-ms 1000 --max-up-ms 2200 \
      --max-delay-ms 4000 --drain-timeout-ms 60000 "$@"
else
  long=(--kills 35 --double-kill-every 3 --min-up-ms 700 --max-up-ms 4000 --max-delay-ms 8000)
  run long-async "${long[@]}" --flush async "$@"
  run long-sync "${long[@]}" --flush sync "$@"
  run long-manual-clock "${long[@]}" --flush async --manual-clock "$@"
fi
