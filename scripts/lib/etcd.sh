# Shell functions for scripts that need etcd on loopback (scripts/cluster.sh, scripts/jepsen.sh).
# Source it: `. "$(dirname "$0")/lib/etcd.sh"`. The C++ tests start etcd the same way
# (tests/cluster/etcd_process.h): the binary is $TOKIMQ_ETCD_BIN or `etcd` on PATH (Debian
# etcd-server, scripts/install-deps.sh), one member on two free loopback ports.

# etcd_bin: prints the etcd binary to run.
etcd_bin() {
  echo "${TOKIMQ_ETCD_BIN:-etcd}"
}

# etcd_require <who>: exits 1 with a hint when there is no etcd to run.
etcd_require() {
  command -v "$(etcd_bin)" >/dev/null ||
    { echo "$1: etcd not found (apt-get install etcd-server, or set TOKIMQ_ETCD_BIN)" >&2; exit 1; }
}

# free_port: prints a loopback TCP port that was free a moment ago.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# etcd_start <dir> <name>: starts one etcd member named <name> in the background with its data
# in <dir>/etcd and its log in <dir>/etcd.log, on two free loopback ports, and waits (up to
# 20 s) until its client port accepts connections. Sets ETCD_PID and ETCD_ENDPOINT
# (127.0.0.1:port); returns 1 when etcd did not come up (it is left to the caller's cleanup).
etcd_start() {
  local dir="$1" name="$2" client_port peer_port
  client_port=$(free_port)
  peer_port=$(free_port)
  ETCD_ENDPOINT="127.0.0.1:$client_port"
  "$(etcd_bin)" --name "$name" --data-dir "$dir/etcd" \
    --listen-client-urls "http://$ETCD_ENDPOINT" --advertise-client-urls "http://$ETCD_ENDPOINT" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "$name=http://127.0.0.1:$peer_port" \
    --logger zap --log-outputs "$dir/etcd.log" &
  ETCD_PID=$!
  for _ in $(seq 1 200); do
    if bash -c "exec 3<>/dev/tcp/127.0.0.1/$client_port" 2>/dev/null; then return 0; fi
    kill -0 "$ETCD_PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
