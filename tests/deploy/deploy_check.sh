#!/usr/bin/env bash
# Checks deploy/prometheus and deploy/grafana (issue 18 item 7): promtool accepts the scrape
# config and the alert rules, the rules' unit tests pass (the alerts fire on the series they are
# written for), the Grafana dashboard is valid JSON, and every tokimq_* name the rules and the
# dashboard use is documented in docs/metrics.md (so a renamed metric breaks this test).
# Usage: deploy_check.sh <source dir>
set -euo pipefail
src=${1:?usage: deploy_check.sh <source dir>}
fail() { echo "deploy_check: $*" >&2; exit 1; }
command -v promtool >/dev/null || fail "promtool missing (Debian package prometheus; scripts/install-deps.sh)"
prom=$src/deploy/prometheus
promtool check config "$prom/prometheus.yml"
promtool check rules "$prom/tokimq-rules.yml"
(cd "$prom" && promtool test rules tokimq-rules.test.yml)
dash=$src/deploy/grafana/tokimq.json
python3 - "$dash" "$prom/tokimq-rules.yml" "$src/docs/metrics.md" <<'PY'
import json, re, sys
dash_path, rules_path, doc_path = sys.argv[1:4]
dash = json.load(open(dash_path))
assert dash.get("panels"), "dashboard without panels"
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
assert exprs, "dashboard without queries"
documented = set(re.findall(r"^\| `(tokimq_[a-z0-9_]+)`", open(doc_path).read(), re.M))
used = set()
for text in exprs + [open(rules_path).read(), json.dumps(dash["templating"])]:
    for name in re.findall(r"\btokimq_[a-z0-9_]+", text):
        used.add(re.sub(r"_(bucket|sum|count)$", "", name))
missing = sorted(n for n in used if n not in documented)
if missing:
    sys.exit("not in docs/metrics.md: " + ", ".join(missing))
print(f"deploy_check: {len(exprs)} dashboard queries, {len(used)} metric names, all documented")
PY
echo "deploy_check: OK"
