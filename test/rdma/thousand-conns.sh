#!/usr/bin/env bash
# test/rdma/thousand-conns.sh - issue 12's "1,000 connections, traffic on a random 10 % at a
# time for 30 s, nothing lost": bench/idle_conns opens 1,000 RDMA connections (each one's first
# call must be over RDMA), then runs 30 one-second waves in which a fresh random 10 % of them
# make back-to-back echo calls of 64 B - 256 KiB (log-uniform), each response checked byte for
# byte. Passes only if every call sent was answered intact over RDMA, none failed, and no
# connection was set up again. Needs real verbs: run by tools/run-rdma-tests (make test-rdma).
#
# Settings: the VM of make test-rdma has 2 GiB and holds both sides, and today every connection
# pins its whole ring on each side (1 MiB by default: 2 GiB for 1,000), so the ring is 64 KiB
# (RRPC_THOUSAND_FLAGS overrides; with --mem 6G the defaults fit: RRPC_THOUSAND_FLAGS=" ").
# Bounded: setup by --max_seconds, the whole run by timeout(1).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 2
BIN=${RRPC_BUILD:-build}/bench/idle_conns
N=${RRPC_THOUSAND_N:-1000}
FLAGS=${RRPC_THOUSAND_FLAGS:---rdma_ring_size=65536}
ulimit -n 65536 2>/dev/null || true
ulimit -l unlimited 2>/dev/null || true
# shellcheck disable=SC2086
line=$(timeout -k 5 300 "$BIN" --n="$N" --concurrency=2 --max_seconds=180 --traffic_seconds=30 \
  --traffic_percent=10 --traffic_min_size=64 --traffic_max_size=262144 --list_resources=false $FLAGS | grep '^idle_conns ')
rc=$?
echo "$line"
[ -n "$line" ] || { echo "FAIL: idle_conns printed no line (exit $rc)"; exit 1; }
for k in ok=$N used_rdma=$N stopped=none traffic_waves=30 traffic_conns_per_wave=$((N / 10)) \
  traffic_failed=0 traffic_corrupt=0 traffic_not_rdma=0 traffic_reconnects=0 traffic_stalled=0 traffic_ok=1; do
  case " $line " in *" $k "*) ;; *) echo "FAIL: no $k in the line"; exit 1 ;; esac
done
sent=$(echo "$line" | tr ' ' '\n' | sed -n 's/^traffic_sent=//p')
answered=$(echo "$line" | tr ' ' '\n' | sed -n 's/^traffic_answered=//p')
[ "$sent" = "$answered" ] && [ "${sent:-0}" -gt 0 ] || { echo "FAIL: sent=$sent answered=$answered"; exit 1; }
[ "$rc" -eq 0 ] || { echo "FAIL: idle_conns exited $rc"; exit 1; }
echo "PASS thousand-conns: $N connections, $sent calls sent, $answered answered, none lost"
