#!/bin/sh
# test/preload/fallback_bench.sh - what a connection that does not go RDMA
# costs under rrpc-run: redis-server + redis-benchmark (SET and GET) on
# loopback, plain, both ends under rrpc-run (on a host without an RDMA
# device every such connection is plain or falls back), only the client,
# only the server. Per setup: SET/s GET/s, and the CPU both processes used
# (user + system, from /proc) in microseconds per request: on a shared host
# the rate varies with the neighbours' load, the CPU per request much less.
#   N (100000) requests per test, C (50) clients, P (1) pipeline,
#   LIB the preload, ROUNDS (1) passes over the setups (interleaved).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
N=${N:-100000} C=${C:-50} P=${P:-1} ROUNDS=${ROUNDS:-1}
export RRPC_PRELOAD_LIB=${LIB:-$root/build/librrpc_preload.so}
port=${PORT:-16391}
run="$root/tools/rrpc-run"
tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
one() { # label server-prefix client-prefix
  label=$1 sv=$2 cl=$3
  $sv redis-server --port $port --save '' --appendonly no --daemonize no >/dev/null 2>&1 &
  spid=$!
  i=0
  while ! redis-cli -p $port ping >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
  s0=$(cpu_ticks $spid)
  out=$(timeout 300 /usr/bin/time -f 'CPU %U %S' $cl redis-benchmark -p $port -t set,get -n $N -c $C -P $P -q 2>&1 |
        tr '\r' '\n')
  s1=$(cpu_ticks $spid)
  kill $spid 2>/dev/null; wait $spid 2>/dev/null
  rates=$(echo "$out" | sed -n 's/^\(SET\|GET\): \([0-9.]*\) requests per second.*/\2/p' | tr '\n' ' ')
  ccpu=$(echo "$out" | sed -n 's/^CPU \([0-9.]*\) \([0-9.]*\)$/\1 \2/p' | awk '{print $1 + $2}')
  us=$(echo "$s0 $s1 ${ccpu:-0} $N $tck" | awk '{printf "%.1f", (($2 - $1) / $5 + $3) * 1e6 / (2 * $4)}')
  echo "$label SET/GET/s: $rates cpu_us/req (both ends): $us"
}
r=0
while [ $r -lt $ROUNDS ]; do
  one plain "" ""
  one both-rrpc-run "$run" "$run"
  one client-only "" "$run"
  one server-only "$run" ""
  r=$((r + 1))
done
