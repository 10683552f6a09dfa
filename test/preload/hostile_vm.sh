#!/bin/sh
# test/preload/hostile_vm.sh - hostile rrpc-run peers against rrpc servers in
# the Soft-RoCE VM: a client whose SYN carries option 254 (eBPF; cgroup v2
# is mounted if missing) sends garbage CLC, or stops inside the eyecatcher,
# or inside a Proposal; the RDMA echo server (--use_rdma, handshake
# deadline 1000 ms) and the TCP-only C echo server (CLC sniff deadline,
# 2000 ms by default) and, where built, socat under rrpc-run (eBPF mode, then
# peers mode) must close each within its deadline (+1 s slack). make
# test-rdma runs it (tools/run-rdma-tests sets RRPC_TEST_RDMA_ADDR).
# Run: tools/rxe-vm -- test/preload/hostile_vm.sh   (on the host without
# RDMA: HOSTILE_ADDR=127.0.0.1 test/preload/hostile_vm.sh runs the TCP-only half)
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${RRPC_BUILD:-build}
ADDR=${HOSTILE_ADDR:-${RRPC_TEST_RDMA_ADDR:-10.99.0.1}}
H=$BUILD/test/preload/hostile_clc
fail=0
if [ "$(id -u)" = 0 ] && ! grep -q ' - cgroup2 ' /proc/self/mountinfo; then
  mount -t cgroup2 none /sys/fs/cgroup
fi

# wait_port PORT: until something listens there (bounded: 30 s).
wait_port() {
  i=0
  while ! ss -ltnH "sport = :$1" | grep -q LISTEN; do
    i=$((i + 1))
    [ $i -gt 300 ] && { echo "hostile_vm: nothing listens on $1"; return 1; }
    sleep 0.1
  done
}

run_against() { # NAME PORT DEADLINE_MS
  for m in garbage stall-eye stall-body; do
    printf '%-10s ' "$1"
    "$H" "$ADDR" "$2" "$m" "$3" || fail=1
  done
}

if [ "$ADDR" != 127.0.0.1 ]; then
  "$BUILD/examples/echo/server" --use_rdma --port=18601 --rdma_handshake_timeout_ms=1000 >/tmp/hostile_rdma.log 2>&1 &
  RS=$!
  wait_port 18601 && run_against rdma 18601 1000
  kill "$RS"; wait "$RS" 2>/dev/null
fi
"$BUILD/examples/echo/c_server" "$ADDR:18602" >/tmp/hostile_tcp.log 2>&1 &
TS=$!
wait_port 18602 && run_against tcp-only 18602 2000
kill "$TS"; wait "$TS" 2>/dev/null
# The preloaded server (rrpc-run's relay) where the tree has it: socat under
# rrpc-run, its listener marked (eBPF mode in the VM), so its SYN-ACK answers
# the hostile SYN's option and the rrpc socket behind it runs the CLC side
# (rrpc's handshake deadline, 2000 ms).
if [ -f "$BUILD/librrpc_preload.so" ] && [ -x tools/rrpc-run ]; then
  RRPC_RUN_PEERS=$ADDR RRPC_PRELOAD_LIB=$BUILD/librrpc_preload.so tools/rrpc-run \
    socat "TCP-LISTEN:18603,bind=$ADDR,reuseaddr,fork" EXEC:cat >/tmp/hostile_pre.log 2>&1 &
  PS=$!
  wait_port 18603 && run_against preloaded 18603 2000
  kill "$PS"; wait "$PS" 2>/dev/null
  # The same server in peers mode (no eBPF: the listed client's first
  # bytes decide), where the option cannot be checked: the CLC side and its
  # deadline are the same.
  RRPC_RUN_MODE=peers RRPC_RUN_PEERS=$ADDR RRPC_PRELOAD_LIB=$BUILD/librrpc_preload.so tools/rrpc-run \
    socat "TCP-LISTEN:18604,bind=$ADDR,reuseaddr,fork" EXEC:cat >/tmp/hostile_peers.log 2>&1 &
  PS=$!
  wait_port 18604 && run_against peers-mode 18604 2000
  kill "$PS"; wait "$PS" 2>/dev/null
else
  echo "hostile_vm: no $BUILD/librrpc_preload.so: the preloaded server is not tried"
fi
[ $fail = 0 ] && echo "hostile_vm: PASS" || echo "hostile_vm: FAILED"
exit $fail
