#!/bin/sh
# vs-ib-write-bw.sh - examples/remote_write beside perftest's ib_write_bw, 1 MiB
# writes, in one boot of the Soft-RoCE VM (run it through tools/rxe-vm, or
# `make remote-write-bench`). RW_RUNS times, alternating, so both tools see
# the same host load: each run prints both bandwidths, their ratio and the
# CPU seconds per GiB of both sides of both (ib_write_bw's from
# /usr/bin/time over the whole process, setup included; remote_write's from
# its own summary over the timed part, with the writer's split by thread).
# Every run is printed, then the ratios' range and median.
# Env: RRPC_BUILD (build), RW_MIB (MiB per run, a multiple of 64, 256),
# RW_RUNS (3), RW_ADDR (the VM's address, 10.99.0.1), RW_DEV (rxe0).
set -eu
B=${RRPC_BUILD:-build}
MIB=${RW_MIB:-256}
RUNS=${RW_RUNS:-3}
ADDR=${RW_ADDR:-${RRPC_TEST_RDMA_ADDR:-10.99.0.1}}
DEV=${RW_DEV:-${RRPC_TEST_RDMA_DEV:-rxe0}}
T=$(mktemp -d)
srv=
# The trap's status would become the script's: it must not fail.
trap '[ -z "$srv" ] || kill "$srv" 2>/dev/null || true; rm -rf "$T"' EXIT
GIB=$(awk -v m="$MIB" 'BEGIN { print m / 1024 }')

"$B/examples/remote_write/server" --port=0 --ip="$ADDR" >"$T/rws.out" 2>&1 &
srv=$!
i=0
while ! grep -q "listening on port" "$T/rws.out" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$T/rws.out")

run=1
while [ "$run" -le "$RUNS" ]; do
  echo "== run $run/$RUNS: ib_write_bw -s 1048576 -n $MIB on $DEV"
  /usr/bin/time -f "%U %S" -o "$T/ibs.cpu" ib_write_bw -d "$DEV" -s 1048576 -n "$MIB" -F >"$T/ibs.out" 2>&1 &
  ibs=$!
  sleep 1
  /usr/bin/time -f "%U %S" -o "$T/ibc.cpu" ib_write_bw -d "$DEV" -s 1048576 -n "$MIB" -F "$ADDR" >"$T/ibc.out" 2>&1
  wait "$ibs"
  # The result row: bytes, iterations, peak, average (MB/s = 10^6 B/s), msg rate.
  ib=$(awk '$1 == 1048576 {printf "%.1f", $4 * 1e6 / 1048576}' "$T/ibc.out")
  ibc=$(awk -v g="$GIB" '{printf "%.2f", ($1 + $2) / g}' "$T/ibc.cpu")
  ibsv=$(awk -v g="$GIB" '{printf "%.2f", ($1 + $2) / g}' "$T/ibs.cpu")
  echo "ib_write_bw: ${ib} MiB/s; cpu s/GiB: client ${ibc}, server ${ibsv}"

  echo "== run $run/$RUNS: remote_write --size=64MiB --piece=1MiB x $((MIB / 64)) rounds"
  "$B/examples/remote_write/client" --server="$ADDR:$port" --size=67108864 --piece=1048576 --rounds=$((MIB / 64)) \
    | tee "$T/rwc.out"
  rw=$(sed -n 's/.*throughput=\([0-9.]*\)MiB\/s.*/\1/p' "$T/rwc.out" | tail -1)
  rwc=$(sed -n 's/.*client_cpu=[0-9.]*s (\([0-9.]*\) s\/GiB).*/\1/p' "$T/rwc.out" | tail -1)
  rws=$(sed -n 's/.*server_cpu=[0-9.]*s (\([0-9.]*\) s\/GiB).*/\1/p' "$T/rwc.out" | tail -1)
  ratio=$(awk -v a="$rw" -v b="$ib" 'BEGIN { printf "%.2f", a / b }')
  echo "RUN $run: ib_write_bw ${ib} MiB/s (client ${ibc}, server ${ibsv} cpu s/GiB)" \
       "remote_write ${rw} MiB/s (writer ${rwc}, owner ${rws} cpu s/GiB) ratio ${ratio}" | tee -a "$T/runs"
  run=$((run + 1))
done
echo "== all runs"
cat "$T/runs"
sed -n 's/.*ratio \([0-9.]*\)$/\1/p' "$T/runs" | sort -n | awk '{ r[NR] = $1 } END {
  printf "remote_write / ib_write_bw over %d runs: min %.2f median %.2f max %.2f\n", NR, r[1], r[int((NR + 1) / 2)], r[NR] }'
