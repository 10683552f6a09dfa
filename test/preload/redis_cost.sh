#!/bin/sh
# test/preload/redis_cost.sh - what rrpc-run costs a real program:
# redis-server + redis-benchmark (SET and GET, C clients, pipeline P) on one
# address, plain, both ends under rrpc-run, only the client, only the
# server. On a host without an RDMA device no connection is relayed (what a
# connection that does not go RDMA costs); in the Soft-RoCE VM
# (tools/run-rdma-tests test/preload/redis_cost.sh) both ends go RDMA.
# Per setup: SET/s GET/s and the CPU both processes used (user + system,
# from /proc) in microseconds per request: on a shared host the rate varies
# with the neighbours' load, the CPU per request much less.
#   N (50000) requests per test, C (50) clients, PIPES ("1") pipelines,
#   LIB the preload, SETUPS ("plain both client server"),
#   STRACE_N (0): also count each process's system calls (strace -c -f)
#   for a run of that many requests per pipeline, both ends under rrpc-run
#   and plain.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${RRPC_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
N=${N:-50000} C=${C:-50} PIPES=${PIPES:-1} STRACE_N=${STRACE_N:-0}
SETUPS=${SETUPS:-"plain both client server"}
export RRPC_PRELOAD_LIB=${LIB:-$build/librrpc_preload.so}
addr=${RRPC_TEST_RDMA_ADDR:-127.0.0.1}
port=${PORT:-16391}
run="$root/tools/rrpc-run"
tck=$(getconf CLK_TCK)
ulimit -l unlimited 2>/dev/null || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# Peers mode (a listed plain server would get the handshake): each end
# lists the other only when that one runs rrpc-run too.
server_up() { # PREFIX
  $1 redis-server --bind "$addr" --port $port --save '' --appendonly no --protected-mode no --daemonize no \
    >"$tmp/srv.log" 2>&1 &
  spid=$!
  i=0
  while ! redis-cli -h "$addr" -p $port ping >/dev/null 2>&1 && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
}
server_down() { kill $spid 2>/dev/null; wait $spid 2>/dev/null; }
one() { # label server-prefix client-prefix P
  label=$1 sv=$2 cl=$3 p=$4
  RRPC_RUN_PEERS=":$port" server_up "$sv"
  cpeers=":1"; [ -n "$sv" ] && cpeers="$addr:$port"
  s0=$(cpu_ticks $spid)
  out=$(RRPC_RUN_PEERS=$cpeers timeout 300 /usr/bin/time -f 'CPU %U %S' $cl redis-benchmark -h "$addr" -p $port \
        -t set,get -n $N -c $C -P $p -q 2>&1 | tr '\r' '\n')
  s1=$(cpu_ticks $spid)
  server_down
  rates=$(echo "$out" | sed -n 's/^\(SET\|GET\): \([0-9.]*\) requests per second.*/\2/p' | tr '\n' ' ')
  ccpu=$(echo "$out" | sed -n 's/^CPU \([0-9.]*\) \([0-9.]*\)$/\1 \2/p' | awk '{print $1 + $2}')
  us=$(echo "$s0 $s1 ${ccpu:-0} $N $tck" | awk '{printf "%.1f", (($2 - $1) / $5 + $3) * 1e6 / (2 * $4)}')
  echo "$label -P $p SET/GET/s: $rates cpu_us/req (both ends): $us"
}
# syscalls LABEL PREFIX P: strace -c -f both processes for STRACE_N requests.
syscalls() {
  label=$1 pre=$2 p=$3
  RRPC_RUN_PEERS=":$port" server_up "$pre"
  cpeers=":1"; [ -n "$pre" ] && cpeers="$addr:$port"
  # Every thread the server already has (the relay's, if a connection
  # started it): -f follows only threads created after the attach.
  strace -c -f $(ls /proc/$spid/task | sed 's/^/-p /') -o "$tmp/srv.strace" 2>/dev/null &
  tpid=$!
  sleep 1
  RRPC_RUN_PEERS=$cpeers timeout 300 strace -c -f -o "$tmp/cli.strace" $pre redis-benchmark -h "$addr" -p $port \
    -t set -n $STRACE_N -c $C -P $p -q >/dev/null 2>&1
  kill -INT $tpid 2>/dev/null; wait $tpid 2>/dev/null
  server_down
  for side in srv cli; do
    tot=$(awk '$NF == "total" {print $4}' "$tmp/$side.strace")
    top=$(awk 'NR > 2 && $1 !~ /^-/ && $NF != "total" && NF >= 5 {print $NF "=" $4}' "$tmp/$side.strace" | head -n 6 | tr '\n' ' ')
    echo "$label -P $p $side syscalls/request: $(echo "${tot:-0} $STRACE_N" | awk '{printf "%.1f", $1 / $2}') top: $top"
  done
}
for p in $PIPES; do
  for s in $SETUPS; do
    case $s in
      plain) one plain "" "" $p ;;
      both) one both-rrpc-run "$run" "$run" $p ;;
      client) one client-only "" "$run" $p ;;
      server) one server-only "$run" "" $p ;;
    esac
  done
  if [ "$STRACE_N" -gt 0 ]; then
    syscalls plain "" $p
    syscalls both-rrpc-run "$run" $p
  fi
done
