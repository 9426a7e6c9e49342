#!/usr/bin/env bash
# The cost of authentication + TLS (issue 17): tokimq-bench enqueue and lease against the same
# broker binary with auth and TLS off, then with --auth and --tls-mode enforcing, in one run.
# Prints each RESULT line and the on/off ratios. Test certificates are made with openssl in a
# temp dir and removed on exit.
# Usage: bench/auth_tls_cost.sh BIN_DIR [ENQUEUE_N] [LEASE_N]   (BIN_DIR: tokimq-broker, tokimq-bench, tokimq)
set -euo pipefail
bin="$(cd "${1:?usage: auth_tls_cost.sh BIN_DIR [ENQUEUE_N] [LEASE_N]}" && pwd)"
enqueue_n="${2:-300000}"
lease_n="${3:-200000}"
work="$(mktemp -d)"
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
(
  cd "$work"
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj /CN=bench-ca
  openssl req "${ec[@]}" -keyout server.key -out server.csr -subj /CN=127.0.0.1
  printf 'subjectAltName=IP:127.0.0.1\n' >ext.cnf
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile ext.cnf -out server.pem
) 2>/dev/null

start() {  # start <name> <broker args...>
  local name=$1
  shift
  rm -f "$work/port"
  "$bin/tokimq-broker" --data-dir "$work/$name" --port 0 --port-file "$work/port" --grpc-port 0 --http-port 0 \
    --log-file "$work/$name.log" "$@" &
  pid=$!
  for _ in $(seq 200); do [[ -s "$work/port" ]] && break; sleep 0.05; done
  addr="127.0.0.1:$(cat "$work/port")"
}
stop() { kill "$pid"; wait "$pid" || true; pid=""; }

results="$work/results"
for variant in off on; do
  creds=()
  if [[ $variant == off ]]; then
    start off
  else
    start on --auth --auth-init-user bench:bench-secret --tls-cert "$work/server.pem" \
      --tls-key "$work/server.key" --tls-mode enforcing
    creds=(--access-key bench --secret-key bench-secret --tls --tls-ca "$work/ca.pem")
  fi
  "$bin/tokimq-bench" --system tokimq --addr "$addr" "${creds[@]}" --label "enqueue-$variant" \
    --queue wc --messages "$enqueue_n" --delay fixed:2h --mode enqueue --pid "$pid" |
    grep '^RESULT' | tee -a "$results"
  "$bin/tokimq-bench" --system tokimq --addr "$addr" "${creds[@]}" --label "lease-$variant" \
    --queue we --messages "$lease_n" --delay now --mode lease --pid "$pid" |
    grep '^RESULT' | tee -a "$results"
  stop
done
