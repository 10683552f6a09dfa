#!/usr/bin/env bash
# test/rdma/idle-conns-smoke.sh - keeps bench/idle_conns (issue 12's measuring tool) working:
# 20 idle RDMA connections with default settings, every call over RDMA (the tool's exit status),
# and a full key=value line with both sides' per-connection figures; then one short round of its
# --idle_probe_seconds mode. All of it twice: with the ring (RRPC_RDMA_ELASTIC=0) and with elastic
# rings (=1), whatever the suite runs under; each run must also end within its timeout (an
# elastic process that exited without closing its connections once took ~50 s per QP in rxe's
# teardown: pieces_mem.c, rrpc__piece_bind). IDLE_SMOKE_MODES="0" or "1" runs one. Checks no cost figure:
# those are measurements for docs/performance.md, not limits. Needs real verbs: run by
# tools/run-rdma-tests (make test-rdma) inside the VM, or on a host with an RDMA port.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 2
BIN=${RRPC_BUILD:-build}/bench/idle_conns

# One mode: $1 is RRPC_RDMA_ELASTIC's value.
smoke() {
  export RRPC_RDMA_ELASTIC=$1
  echo "--- RRPC_RDMA_ELASTIC=$1"
  local line rc probe keys side k
  line=$(timeout -k 5 60 "$BIN" --n=20 --max_seconds=40 | grep '^idle_conns ')
  rc=$?
  echo "$line"
  [ "$rc" -eq 0 ] || { echo "FAIL: idle_conns exited $rc (or printed no line)"; return 1; }
  for k in ok=20 used_rdma=20 stopped=none; do
    case " $line " in *" $k "*) ;; *) echo "FAIL: no $k in the line"; return 1 ;; esac
  done
  keys="pin_kib rss_kib fds maps cpu_ms writes cdcs cqes wakeups grants bg_jobs"
  # QPs/CQs/MRs come from iproute2's rdma tool (always there in the VM; res_src=0 where it is not).
  case $line in *" c_res_src=1 "*) keys="$keys qp cq mr" ;; esac
  for side in s c; do
    for k in $keys; do
      case $line in *" ${side}_per_conn_$k="*) ;; *) echo "FAIL: no ${side}_per_conn_$k"; return 1 ;; esac
    done
  done
  # Every connection was proven with one call over RDMA: each side wrote at least once per connection.
  case $line in *" s_per_conn_writes=0."* | *" c_per_conn_writes=0."*) echo "FAIL: fewer writes than connections"; return 1 ;; esac
  # The busy-after-idle mode (--idle_probe_seconds) keeps working: one short round, its summary,
  # with one busy loop beside it (--idle_probe_busy_loops), which must be gone when the tool is,
  # and one background connection calling meanwhile (--idle_probe_background), none of its calls failed.
  probe=$(timeout -k 5 60 "$BIN" --n=1 --list_resources=false --idle_probe_seconds=1 --idle_probe_rounds=1 \
    --idle_probe_busy_loops=1 --idle_probe_background=1 --idle_probe_background_gap_us=2000 |
    grep '^idle_probe_summary ')
  rc=$?
  echo "$probe"
  [ "$rc" -eq 0 ] || { echo "FAIL: idle_conns --idle_probe_seconds exited $rc"; return 1; }
  case " $probe " in *" ok=1 "*) ;; *) echo "FAIL: the idle probe did not finish (ok=1)"; return 1 ;; esac
  case " $probe " in *" busy_loops=1 "*) ;; *) echo "FAIL: the probe ran without its busy loop"; return 1 ;; esac
  case " $probe " in *" background_failed=0 "*) ;; *) echo "FAIL: background calls failed"; return 1 ;; esac
  case " $probe " in *" background_calls=0 "*) echo "FAIL: the background connection made no call"; return 1 ;; esac
  local d
  for d in /proc/[0-9]*; do
    if [ "$(cat "$d/comm" 2>/dev/null)" = idle_conns ]; then
      echo "FAIL: an idle_conns process (a busy loop?) outlived the probe: ${d#/proc/}"
      kill -9 "${d#/proc/}"
      return 1
    fi
  done
}

for mode in ${IDLE_SMOKE_MODES:-0 1}; do
  smoke "$mode" || { echo "FAIL idle-conns-smoke (RRPC_RDMA_ELASTIC=$mode)"; exit 1; }
done
echo "PASS idle-conns-smoke"
