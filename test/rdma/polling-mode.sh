#!/usr/bin/env bash
# test/rdma/polling-mode.sh - RDMA suite binaries again with busy-polling loops
# (RRPC_RDMA_POLLING=1, i.e. --rdma_use_polling): the loops then spin on their completion queues
# instead of sleeping on a completion channel, and an idle spin skips the clock, timers and epoll
# (src/rrpc/core/loop.c). These runs show that calls, timeouts, fds (the TCP side of each handshake,
# fallback), teardown and shared CQs all still work that way. Needs real verbs: run by
# tools/run-rdma-tests (make test-rdma) inside the VM, or on a host with an RDMA port. Each binary
# is bounded.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 2
export RRPC_RDMA_POLLING=1
PASS=polling-mode
. test/rdma/suite-pass.sh
for t in rpc_rdma_test teardown_rdma_test shared_cq_rdma_test callctl_rdma_test; do
  run "$t (RRPC_RDMA_POLLING=1)" "$t" 240 "$DIR/$t"
done
finish
