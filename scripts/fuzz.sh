#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`: clang-14, -fsanitize=fuzzer,address,undefined)
# and runs each for a given time on a temporary copy of its seed corpus (fuzz/corpus/<target>),
# so new corpus entries and crash files never dirty the checkout. Exits non-zero if any target
# crashes (the crash input is copied to build/fuzz/findings/<target>/ and its path printed).
# Prints the execs of every target. docs/testing.md "Fuzzing".
#
# Usage: scripts/fuzz.sh [seconds-per-target] [target...]
#   default: 60 s each, every target (ls fuzz/*_fuzzer.cc). Targets run one after another.
# Env: FUZZ_JOBS=N    parallel targets (default 1; the machine has 2 cores)
#      FUZZ_ARGS=...  extra libFuzzer flags, e.g. FUZZ_ARGS=-runs=1000000
#      FUZZ_NO_BUILD=1  use the binaries already in build/fuzz/bin
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in fuzz/*_fuzzer.cc; do
    t="$(basename "$f" _fuzzer.cc)"
    targets+=("$t")
  done
fi

lib="$(ls /usr/lib/llvm-14/lib/clang/14*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null | head -1 || true)"
if [[ -z "$lib" ]]; then
  echo "fuzz: clang's libFuzzer runtime is missing: apt-get install libclang-rt-14-dev (scripts/install-deps.sh --fuzz)" >&2
  exit 2
fi

export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
if [[ -z "${FUZZ_NO_BUILD:-}" ]]; then
  cmake --preset fuzz >/dev/null
  build_targets=()
  for t in "${targets[@]}"; do build_targets+=("${t}_fuzzer"); done
  cmake --build build/fuzz -j "${FUZZ_BUILD_JOBS:-2}" --target "${build_targets[@]}"
fi

# Temp files of the targets (the broker's data dir, the wheel file) on tmpfs when there is one:
# their fsyncs then cost nothing.
tmp_root="${TMPDIR:-/tmp}"
if [[ -z "${TMPDIR:-}" && -w /dev/shm ]]; then tmp_root=/dev/shm; fi
work="$(mktemp -d "$tmp_root/tokimq-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export TOKIMQ_FUZZ_TMPDIR="$work"
findings="build/fuzz/findings"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:handle_abort=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

run_one() {
  local t="$1"
  local bin="build/fuzz/bin/${t}_fuzzer"
  local corpus="$work/corpus/$t" art="$work/artifacts/$t/" log="$work/$t.log"
  mkdir -p "$corpus" "$art"
  if [[ -d "fuzz/corpus/$t" ]]; then cp -r "fuzz/corpus/$t/." "$corpus/"; fi
  local rc=0 start=$SECONDS
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$art" \
    ${FUZZ_ARGS:-} "$corpus" >"$log" 2>&1 || rc=$?
  local execs
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  if ((rc != 0)); then
    mkdir -p "$findings/$t"
    cp "$art"* "$findings/$t/" 2>/dev/null || true
    cp "$log" "$findings/$t/fuzz.log"
    echo "fuzz: $t CRASHED after ${execs:-?} execs (exit $rc); input and log in $findings/$t/:"
    ls "$findings/$t/" 2>/dev/null | sed 's/^/  /'
    grep -E "==[0-9]+==ERROR|FUZZ_CHECK|runtime error|SUMMARY|^ *#[0-9] 0x|deadly signal|-timeout|out-of-memory" \
      "$log" | head -16 | sed 's/^/  /'
    return 1
  fi
  printf 'fuzz: %-18s ok  %12s execs in %ss\n' "$t" "${execs:-?}" "$((SECONDS - start))"
}

jobs="${FUZZ_JOBS:-1}"
failed=0
pids=()
names=()
for t in "${targets[@]}"; do
  if [[ ! -x "build/fuzz/bin/${t}_fuzzer" ]]; then
    echo "fuzz: no binary for target '$t' (fuzz/${t}_fuzzer.cc?)" >&2
    failed=1
    continue
  fi
  if ((jobs <= 1)); then
    run_one "$t" || failed=1
  else
    run_one "$t" &
    pids+=($!)
    names+=("$t")
    if ((${#pids[@]} >= jobs)); then
      wait "${pids[0]}" || failed=1
      pids=("${pids[@]:1}")
      names=("${names[@]:1}")
    fi
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
if ((failed)); then
  echo "fuzz: FAILED" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ok"
