#!/bin/sh
# vs-ib-write-bw.sh - examples/remote_write beside perftest's ib_write_bw, 1 MiB
# writes, in one boot of the Soft-RoCE VM (run it through tools/rxe-vm, or
# `make remote-write-bench`). Prints each tool's bandwidth and the CPU
# seconds both sides spent (from /usr/bin/time), then the ratio.
# Env: RRPC_BUILD (build), RW_MIB (bytes per run in MiB, 256), RW_ADDR
# (the VM's address, 10.99.0.1), RW_DEV (rxe0).
set -eu
B=${RRPC_BUILD:-build}
MIB=${RW_MIB:-256}
ADDR=${RW_ADDR:-${RRPC_TEST_RDMA_ADDR:-10.99.0.1}}
DEV=${RW_DEV:-${RRPC_TEST_RDMA_DEV:-rxe0}}
T=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT

echo "== ib_write_bw -s 1048576 -n $MIB on $DEV"
/usr/bin/time -f "%U %S" -o "$T/ibs.cpu" ib_write_bw -d "$DEV" -s 1048576 -n "$MIB" -F >"$T/ibs.out" 2>&1 &
sleep 1
/usr/bin/time -f "%U %S" -o "$T/ibc.cpu" ib_write_bw -d "$DEV" -s 1048576 -n "$MIB" -F "$ADDR" >"$T/ibc.out" 2>&1
wait
# The result row: bytes, iterations, peak, average (MB/s = 10^6 B/s), msg rate.
ib_avg=$(awk '$1 == 1048576 {print $4}' "$T/ibc.out")
echo "ib_write_bw: average ${ib_avg} MB/s; cpu s user+sys: client $(awk '{print $1+$2}' "$T/ibc.cpu"), server $(awk '{print $1+$2}' "$T/ibs.cpu")"

echo "== remote_write --size=64MiB --piece=1MiB x $((MIB / 64)) rounds"
"$B/examples/remote_write/server" --port=0 --ip="$ADDR" >"$T/rws.out" 2>&1 &
i=0
while ! grep -q "listening on port" "$T/rws.out" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$T/rws.out")
"$B/examples/remote_write/client" --server="$ADDR:$port" --size=67108864 --piece=1048576 --rounds=$((MIB / 64)) | tee "$T/rwc.out"
rw=$(sed -n 's/.*throughput=\([0-9.]*\)MiB\/s.*/\1/p' "$T/rwc.out" | tail -1)
# ib_write_bw's MB are 10^6 bytes; remote_write's MiB 2^20.
awk -v rw="$rw" -v ib="$ib_avg" 'BEGIN { ibm = ib * 1e6 / 1048576; printf "remote_write / ib_write_bw = %.1f / %.1f MiB/s = %.2f\n", rw, ibm, rw / ibm }'
