#!/usr/bin/env bash
# test/rdma/cursor-mode.sh - RDMA suite binaries again in the cursor dialect (RRPC_RDMA_DIALECT=cursor,
# i.e. --rdma_dialect=cursor for every process they start): plain RDMA WRITEs into the peer's ring
# and 44-byte CDCs with SMC-R's producer/consumer cursors, as the Linux kernel speaks it, in place
# of write-with-immediate. These runs show calls of every size (the ring wraps), a slow receiver,
# kill -9, fallback, teardown and shared CQs all work that way. Needs real verbs: run by
# tools/run-rdma-tests (make test-rdma) inside the VM, or on a host with an RDMA port. Each binary
# is bounded; the pass is kept under about two minutes in the VM.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 2
export RRPC_RDMA_DIALECT=cursor
PASS=cursor-mode
. test/rdma/suite-pass.sh
for t in rpc_rdma_test teardown_rdma_test shared_cq_rdma_test callctl_rdma_test held_close_rdma_test; do
  run "$t (RRPC_RDMA_DIALECT=cursor)" "$t" 240 "$DIR/$t"
done
finish
