#!/bin/sh
# test/preload/preload_test.sh - the socket-semantics cases of
# preload_semantics under tools/rrpc-run: both ends under rrpc-run with the
# address listed in RRPC_RUN_PEERS (the relay carries every connection: RDMA
# where a device is up, TCP after the handshake's fallback elsewhere), and
# the plain-peer cases (one end without rrpc-run). RRPC_RUN_DEBUG's lines
# show which path each connection took; a case whose connections did not
# take the expected path fails.
#   RRPC_BUILD=build (default)   where librrpc_preload.so and the program are
#   PRELOAD_CASES="..."         only these cases
#   RRPC_TEST_RDMA_ADDR          (set by tools/run-rdma-tests) an address on an
#                                RDMA device: both ends use it, and every relayed
#                                connection must have been carried by RDMA
set -u
here=$(cd "$(dirname "$0")" && pwd)
name=preload_semantics
. "$here/relayed-env.sh"
ulimit -n 65536 2>/dev/null || true
fails=0
n=0

# one NAME EXPECT [env ARGS...]: run case NAME (with those settings);
# EXPECT is "relayed", "plain", "raw" (a relayed server whose client is
# plain: its bytes must pass untouched) or "handback" (... the accept hands
# the plain client's TCP socket itself to the program).
# RRPC_RUN_RDMA=on by default: without a device (the host) every relayed
# connection falls back to TCP inside the relay, which these cases cover.
one() {
  name=$1 expect=$2
  shift 2
  n=$((n + 1))
  # Relayed cases list the address both ends use; plain ones list nothing
  # that they use (port 1), so neither end tries RDMA. The negotiation is
  # rrpc-run's default (eBPF's TCP option where the program loads, else the
  # list), except for the cases of a plain client listed by mistake, which
  # only peers mode can have (eBPF mode never relays a client without the
  # option).
  mode=${RRPC_RUN_MODE:-auto}
  case $expect in raw|server|handback) mode=peers ;; esac
  if [ "$expect" = plain ]; then peers=":1"; else peers=$PRELOAD_TEST_ADDR; fi
  start=$(date +%s.%N)
  # 200 connections at once: both ends in one process register 400 rings
  # (64 KiB each fits the VM's memory) and run 200 handshakes at once
  # (RRPC_RUN_RING_KB, RRPC_RUN_MAX_HANDSHAKES: docs/rrpc-run.md).
  ring= hs=
  [ "$name" = many ] && ring=64 hs=256
  RRPC_RUN_RDMA=on RRPC_RUN_MODE=$mode RRPC_RUN_RING_KB=$ring RRPC_RUN_MAX_HANDSHAKES=$hs RRPC_RUN_PEERS=$peers RRPC_RUN_DEBUG=1 \
    env "$@" timeout 90 "$run" "$prog" "$name" 0 >"$tmp/$name.log" 2>&1
  rc=$?
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  if [ $rc -eq 0 ]; then
    case $expect in
      relayed) grep -q "relayed, trying RDMA" "$tmp/$name.log" || { rc=99; echo "  (no connection was relayed)"; } ;;
      raw) grep -q "bytes relayed untouched" "$tmp/$name.log" || { rc=96; echo "  (the server did not relay raw)"; } ;;
      handback) grep -q "handed back, plain TCP" "$tmp/$name.log" || { rc=94; echo "  (the accept did not hand the TCP socket back)"; } ;;
      server) grep -q "server .* relayed, trying RDMA" "$tmp/$name.log" || { rc=95; echo "  (the server did not relay)"; } ;;
      plain) if grep -q "relayed, trying RDMA" "$tmp/$name.log"; then rc=98; echo "  (a plain peer was relayed)"; fi ;;
    esac
  fi
  rdma=$(grep -c "transport=rdma" "$tmp/$name.log")
  fb=$(grep -c "transport=tcp-fallback" "$tmp/$name.log")
  if [ $rc -eq 0 ] && [ $want_rdma = 1 ] && [ "$expect" = relayed ] && { [ "$fb" -gt 0 ] || [ "$rdma" -eq 0 ]; }; then
    rc=97
    echo "  (RDMA expected: $rdma connections closed over RDMA, $fb over TCP)"
  fi
  if [ $rc -eq 0 ]; then
    neg=$(sed -n 's/.*negotiation mode \([a-z]*\).*/\1/p' "$tmp/$name.log" | head -n 1)
    printf 'PASS %-19s %5.1fs  %-5s debug lines: rdma=%s tcp-fallback=%s\n' "$name" "$secs" "$neg" "$rdma" "$fb"
  else
    printf 'FAIL %-14s rc=%s\n' "$name" "$rc"
    grep -v "closed transport=" "$tmp/$name.log" | tail -n 30
    fails=$((fails + 1))
  fi
}

# preload-fast's cases: fallback-plain (both ends here, no device, auto:
# nothing relayed; host only), plain-client-handback, plain-server-nb (eBPF
# mode: a non-blocking connect to a plain server is never relayed), dupfd
# (fcntl F_DUPFD copies of a relayed socket are tracked like dup).
fast_cases="plain-client-handback plain-server-nb dupfd"
[ $want_rdma = 0 ] && fast_cases="fallback-plain $fast_cases"
cases=${PRELOAD_CASES:-"bytes16m epoll poll-select flags partial-write halfclose close-unread close-held exit-unread dup fork nbconnect many kill9 edges kill9-reader plain-server plain-client plain-client-listed hostile-garbage hostile-stall $fast_cases"}
for c in $cases; do
  case $c in
    plain-server|plain-client) one "$c" plain ;;
    # Decided after the accept returned (no wait): relayed untouched.
    plain-client-listed) one "$c" raw RRPC_RUN_DECIDE_MS=0 ;;
    # (accept waits for the first bytes long enough for a loaded VM)
    plain-client-handback) one "$c" handback RRPC_RUN_ACCEPT_WAIT_MS=5000 ;;
    plain-server-nb) one "$c" plain -u RRPC_RUN_PEERS RRPC_RUN_MODE=ebpf ;;
    fallback-plain) one "$c" plain RRPC_RUN_RDMA=auto RRPC_RUN_PEERS=$PRELOAD_TEST_ADDR RRPC_RUN_ACCEPT_WAIT_MS=5000 ;;
    hostile-garbage|hostile-stall) one "$c" server ;;
    settings) ;; # below
    *) one "$c" relayed ;;
  esac
done
# A malformed numeric setting is refused with a stderr line, never read as
# another number (preload/env_num.h): the timing ones leave the process on
# plain TCP, the ring size keeps rrpc's default and still relays, a bad
# stat port means no page. PRELOAD_CASES skips these unless it names "settings".
# bad_setting VAR=VALUE WANT: one short run of a relayed case; its log must
# have the refusal line and, as WANT says, no relayed connection (plain) or
# one (relayed).
bad_setting() {
  n=$((n + 1))
  var=${1%%=*}
  RRPC_RUN_RDMA=on RRPC_RUN_MODE=peers RRPC_RUN_PEERS=$PRELOAD_TEST_ADDR RRPC_RUN_DEBUG=1 \
    env "$1" timeout 90 "$run" "$prog" dup 0 >"$tmp/setting.log" 2>&1
  rc=$?
  if ! grep -q "rrpc-run[^ ]*: $var=.* is not a" "$tmp/setting.log"; then rc=93; echo "  (no refusal line for $1)"; fi
  if [ "$2" = plain ] && grep -q "relayed, trying RDMA" "$tmp/setting.log"; then rc=92; echo "  ($1: relayed anyway)"; fi
  if [ "$2" = relayed ] && ! grep -q "relayed, trying RDMA" "$tmp/setting.log"; then rc=91; echo "  ($1: nothing relayed)"; fi
  if [ $rc -eq 0 ]; then
    printf 'PASS setting %s\n' "$1"
  else
    printf 'FAIL setting %s rc=%s\n' "$1" "$rc"
    tail -n 20 "$tmp/setting.log"
    fails=$((fails + 1))
  fi
}
case " ${PRELOAD_CASES:-settings} " in
  *" settings "*)
    bad_setting RRPC_RUN_DECIDE_MS=+5 plain
    bad_setting RRPC_RUN_ACCEPT_WAIT_MS=99999999999999999999 plain
    bad_setting RRPC_RUN_RING_KB=-1 relayed
    bad_setting RRPC_RUN_MAX_HANDSHAKES=8x relayed
    bad_setting RRPC_RUN_STAT_PORT=70000 relayed
    bad_setting RRPC_RUN_EXIT_LINGER_MS=5s relayed
    bad_setting RRPC_RUN_ERM_MAX_COMPL=8x relayed
    ;;
esac
[ $fails -eq 0 ] && echo "preload_test: all passed" || echo "preload_test: $fails failed"
[ $fails -eq 0 ]
