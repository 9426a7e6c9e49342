#!/usr/bin/env bash
# Unit sizes of the library code (issue 15 item 2, STYLE.md "around 500 lines per .cc is a sign
# to split"): lists the library .cc files over MAX_FILE_LINES lines and the functions over
# MAX_FUNCTION_LINES lines, largest first. Library code: every <component>/src/ tree (common,
# commitlog, timerstore, broker, cluster, replication, rocketmq, client); tests, benchmarks,
# tools, fuzzers and examples are not counted. Function extents come from Universal Ctags
# (apt: universal-ctags, `end:` field), lambdas count towards the function that holds them.
#
# Usage: scripts/unit_sizes.sh [--check]   (from the repository root)
#   MAX_FILE_LINES (default 450), MAX_FUNCTION_LINES (default 80) override the limits.
#   --check: exit 1 when anything is over a limit (for CI); without it the exit status is 0.
set -euo pipefail

max_file=${MAX_FILE_LINES:-450}
max_fn=${MAX_FUNCTION_LINES:-80}
check=0
[[ "${1:-}" == "--check" ]] && check=1

cd "$(git rev-parse --show-toplevel)"
command -v ctags >/dev/null || { echo "unit_sizes: needs Universal Ctags (apt install universal-ctags)" >&2; exit 2; }

mapfile -t files < <(git ls-files '*/src/*.cc' '*/src/**/*.cc' | grep -v -E '^(tests|bench|tools|fuzz|examples)/' | sort -u)

echo "== library .cc files over ${max_file} lines"
big_files=$(wc -l "${files[@]}" | grep -v ' total$' | awk -v m="$max_file" '$1 > m { print }' | sort -rn)
if [[ -n "$big_files" ]]; then echo "$big_files"; else echo "(none)"; fi

echo "== functions over ${max_fn} lines (lines  file:line  name)"
big_fns=$(ctags --languages=C++ --kinds-C++=f --fields=+ne --extras=+q -o - "${files[@]}" 2>/dev/null |
  awk -F'\t' -v m="$max_fn" '
    {
      line = 0; end = 0; scope = ""
      for (i = 4; i <= NF; ++i) {
        if ($i ~ /^line:/) line = substr($i, 6)
        else if ($i ~ /^end:/) end = substr($i, 5)
        else if ($i ~ /^(class|struct|namespace):/) { scope = $i; sub(/^[a-z]+:/, "", scope) }
      }
      if (end == 0 || $1 ~ /::/) next   # --extras=+q repeats each name qualified: keep one
      n = end - line + 1
      name = (scope == "" ? $1 : scope "::" $1)
      if (n > m) printf "%6d  %s:%d  %s\n", n, $2, line, name
    }' | sort -rn)
if [[ -n "$big_fns" ]]; then echo "$big_fns"; else echo "(none)"; fi

if (( check )) && [[ -n "$big_files$big_fns" ]]; then exit 1; fi
exit 0
