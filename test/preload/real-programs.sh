#!/bin/sh
# test/preload/real-programs.sh - unmodified Debian programs under rrpc-run:
# redis-server + redis-benchmark (SET/GET, -c 50, then -P 16) and socat
# both ends with a half-close, each with both ends under rrpc-run (the
# preload's counters, read with rrpc_stat, must show RDMA carried the bytes
# where a device is up), then with only one end under it and with neither
# (plain TCP: the same answers). Not part of CI (minutes in the VM):
#   tools/run-rdma-tests test/preload/real-programs.sh        (Soft-RoCE VM)
#   test/preload/real-programs.sh                             (host: TCP fallback)
#   REAL_N=20000 requests per redis-benchmark run with both ends or neither
#   under rrpc-run (the comparison); the one-end runs check answers with
#   REAL_N/10
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${RRPC_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
export RRPC_PRELOAD_LIB=$build/librrpc_preload.so
run="$root/tools/rrpc-run"
stat="$build/tools/rrpc_stat"
addr=${RRPC_TEST_RDMA_ADDR:-127.0.0.1}
n=${REAL_N:-20000}
ulimit -l unlimited 2>/dev/null || true
tmp=$(mktemp -d)
fails=0
# Programs here take their port on the command line (no port 0), so each
# case takes the next pair (port, port + 1 for the stat page) below the
# kernel's ephemeral range, which no outgoing connection takes, skipping
# ports a listener holds.
eph_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
[ "${eph_low:-0}" -gt 11024 ] 2>/dev/null || eph_low=32768
port=$((10000 + ($$ % ((eph_low - 11024) / 2)) * 2))
listening() { ss -ltnH 2>/dev/null | awk '{print $4}' | grep -qE "[:.]($1)\$"; }
next_ports() {
  for _ in $(seq 50); do
    port=$((port + 2))
    [ $((port + 1)) -lt "$eph_low" ] || port=10000
    statport=$((port + 1))
    listening "$port|$statport" || return 0
  done
}
cleanup() { [ -n "${srv:-}" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

wait_port() {
  i=0
  while [ $i -lt 300 ]; do
    if redis-cli -h "$addr" -p "$1" ping >/dev/null 2>&1; then return 0; fi
    i=$((i + 1)); sleep 0.1
  done
  return 1
}

# redis SRV_PRELOAD CLI_PRELOAD LABEL N: one server, two benchmark runs.
redis() {
  sp=$1 cp=$2 label=$3 n=$4
  next_ports
  srvcmd="redis-server --bind $addr --port $port --save '' --appendonly no --protected-mode no"
  if [ "$sp" = 1 ]; then
    RRPC_RUN_PEERS=":$port" RRPC_RUN_STAT_PORT=$statport sh -c "exec $run $srvcmd" >"$tmp/srv.log" 2>&1 &
  else
    sh -c "exec $srvcmd" >"$tmp/srv.log" 2>&1 &
  fi
  srv=$!
  wait_port "$port" || { fail "$label: redis-server did not start"; cat "$tmp/srv.log"; kill $srv; return; }
  # Peers mode: a client lists its server only if that runs rrpc-run too
  # (a listed plain server would get the handshake and frames); a server
  # may list every client of its port (a plain one gets its bytes untouched).
  if [ "$sp" = 1 ]; then cpeers="$addr:$port"; else cpeers=":1"; fi
  for p in 1 16; do
    if [ "$cp" = 1 ]; then pre="$run"; else pre=""; fi
    out=$(RRPC_RUN_PEERS="$cpeers" timeout 300 $pre redis-benchmark -h "$addr" -p "$port" -t set,get -n "$n" \
          -c 50 -P $p -q 2>&1 | tr '\r' '\n' | grep 'requests per second')
    echo "$label -n $n -P $p: $(echo "$out" | tr '\n' ' ')"
    [ "$(echo "$out" | grep -c 'requests per second')" = 2 ] || fail "$label -P $p: no SET and GET results"
  done
  # The value written is read back whole (byte for byte through the relay).
  val=$(head -c 3000 /dev/urandom | base64 -w0)
  if [ "$cp" = 1 ]; then pre="$run"; else pre=""; fi
  RRPC_RUN_PEERS="$cpeers" $pre redis-cli -h "$addr" -p "$port" set k "$val" >/dev/null
  got=$(RRPC_RUN_PEERS="$cpeers" $pre redis-cli -h "$addr" -p "$port" get k)
  [ "$got" = "$val" ] || fail "$label: GET returned other bytes"
  if [ "$sp" = 1 ]; then
    "$stat" "127.0.0.1:$statport" vars > "$tmp/vars" 2>&1
    echo "$label server counters: $(tr '\n' ' ' < "$tmp/vars")"
    rdma=$(sed -n 's/^rrpc_run_connections_rdma : //p' "$tmp/vars")
    fallback=$(sed -n 's/^rrpc_run_connections_fallback : //p' "$tmp/vars")
    # (wait_port's plain redis-cli is relayed raw by the server: not RDMA)
    if [ "$cp" = 1 ] && [ -n "${RRPC_TEST_RDMA_ADDR:-}" ]; then
      [ "${rdma:-0}" -ge 50 ] && [ "${fallback:-1}" = 0 ] || fail "$label: rdma=$rdma fallback=$fallback"
    fi
  fi
  kill $srv; wait $srv 2>/dev/null; srv=
}

# socat: an upper-casing server, a client whose stdin ends (half-close):
# the answer must arrive after the client's shutdown(SHUT_WR). Both socats
# wait up to 30 s for the other direction after one ends (-t): socat's
# 0.5 s default closed the server before `tr` (started under the VM's
# emulation) had answered.
socat_case() {
  sp=$1 cp=$2 label=$3
  next_ports
  if [ "$sp" = 1 ]; then spre="$run"; else spre=""; fi
  if [ "$cp" = 1 ]; then cpre="$run"; else cpre=""; fi
  if [ "$cp" = 1 ]; then speers=":$port"; else speers=":1"; fi
  RRPC_RUN_PEERS="$speers" $spre socat -t 30 TCP-LISTEN:$port,bind=$addr,reuseaddr SYSTEM:"tr a-z A-Z" >"$tmp/socat.log" 2>&1 &
  srv=$!
  # A program under rrpc-run may load the eBPF program first (seconds under
  # the VM's emulation): wait for the port to listen, up to 60 s.
  i=0
  while [ $i -lt 600 ] && ! ss -ltn 2>/dev/null | grep -q ":$port "; do i=$((i + 1)); sleep 0.1; done
  if [ "$sp" = 1 ]; then cpeers="$addr:$port"; else cpeers=":1"; fi
  got=$(printf 'hello rdma\n' | RRPC_RUN_PEERS="$cpeers" RRPC_RUN_DEBUG=1 timeout 60 $cpre socat -t 30 - TCP:$addr:$port 2>"$tmp/socat-cli.log")
  if [ "$got" = "HELLO RDMA" ]; then echo "$label socat half-close: ok ($(grep -o 'transport=[a-z-]*' "$tmp/socat-cli.log" | sort -u | tr '\n' ' '))"
  else fail "$label socat: got '$got' (waited $i/10 s for the port)"; cat "$tmp/socat-cli.log" "$tmp/socat.log"; fi
  wait $srv 2>/dev/null; srv=
}

[ -n "${REAL_SOCAT_ONLY:-}" ] || [ -n "${REAL_SKIP_BOTH:-}" ] || redis 1 1 "both under rrpc-run" "$n"
[ -n "${REAL_SOCAT_ONLY:-}" ] || [ -n "${REAL_SKIP_BOTH:-}" ] || redis 0 0 "plain TCP" "$n"
[ -n "${REAL_SOCAT_ONLY:-}" ] || [ -n "${REAL_SKIP_BOTH:-}" ] || redis 1 0 "server only" $((n / 10))
[ -n "${REAL_SOCAT_ONLY:-}" ] || redis 0 1 "client only" $((n / 10))
socat_case 1 1 "both under rrpc-run"
socat_case 0 1 "client only"
socat_case 1 0 "server only"
[ $fails -eq 0 ] && echo "real-programs: all passed" || echo "real-programs: $fails failed"
[ $fails -eq 0 ]
