#!/usr/bin/env bash
# Issue 24 figures: retention_churn_bench of two builds (old = before the retention mover,
# new = with it), alternated on the same machine, with and without 1 % of messages delayed.
# Usage: bench/retention_churn.sh OLD_BIN NEW_BIN [extra flags for both]
set -euo pipefail
old=$1 new=$2
shift 2
for rep in 1 2; do
  for bin in "$old" "$new"; do
    for pct in 1 0; do
      echo "== rep=$rep bin=$bin delayed_pct=$pct"
      "$bin" --delayed_pct=$pct "$@" 2>&1 | grep -v '\[info\]'
    done
  done
done
