#!/usr/bin/env bash
# test/kernel-smc/run.sh - the kernel SMC-R suite (make test-kernel-smc, docs/kernel-smc.md):
# two guests (tools/rxe-vm --peers 2 --rxe-fixed, one vCPU and 1.5 GiB each, as the spec
# measured), kernel AF_SMC server in one, client in the other; test/kernel-smc/guest.sh holds
# the cases. Ends with the line "N passed, M failed"; exit status 0 only when nothing failed.
# Needs: build/test/kernel-smc/smc_pingpong, rrpc_clc_client and build/tools/smc_nl (make builds them), the
# rxe-vm packages, linux-source-6.1 and linux-headers-6.1.0-56-amd64 (the patched rdma_rxe).

set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 125
OUT=$ROOT/build/kernel-smc/out
for f in build/test/kernel-smc/smc_pingpong build/tools/smc_nl build/test/kernel-smc/rrpc_clc_client build/test/kernel-smc/rrpc_smc_client build/test/kernel-smc/rrpc_smc_server; do
    [ -x "$f" ] || { echo "kernel-smc: $f is missing (make test-kernel-smc builds it)" >&2
                     echo "0 passed, 1 failed"; exit 1; }
done
rm -rf "$OUT" && mkdir -p "$OUT" || exit 125
start=$(date +%s)
tools/rxe-vm --peers 2 --rxe-fixed --smp 1 --mem 1536M --timeout "${KSMC_TIMEOUT:-900}" \
    --env KSMC_WAIT_S --env KSMC_CASES --env KSMC_REPEAT --env KSMC_KEEP_GOING \
    --out "$OUT" -- test/kernel-smc/guest.sh
rc=$?
echo "kernel-smc: whole run $(( $(date +%s) - start )) s (boot of both guests included), rxe-vm status $rc"
if [ -s "$OUT/summary" ]; then
    summary=$(cat "$OUT/summary")
    echo "kernel-smc: $summary"
    echo "${summary%% (*}"
    [ "$rc" = 0 ]
    exit $?
fi
echo "kernel-smc: no summary from the client guest (rig failure, status $rc)"
echo "0 passed, 1 failed"
exit 1
