#!/usr/bin/env bash
# test/rdma/cm-mode.sh - RDMA suite binaries again with every QP connected through rdma_cm
# (RRPC_RDMA_USE_CM=1, i.e. --rdma_use_cm; transport/rdma/cm/): the CLC exchange still decides,
# rdma_cm connects the QP instead of INIT/RTR/RTS by hand. These runs show that calls of every
# size, the ring and elastic pieces, fallback, teardown, kill -9 and shared CQs all still work
# that way, and the check at the end that the connections really went through rdma_cm. Needs
# real verbs and rdma_ucm: run by tools/run-rdma-tests (make test-rdma) inside the VM, or on a
# host with an RDMA port. Each binary is bounded.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 2
export RRPC_RDMA_USE_CM=1
PASS=cm-mode
. test/rdma/suite-pass.sh
for t in rpc_rdma_test teardown_rdma_test shared_cq_rdma_test callctl_rdma_test; do
  run "$t (RRPC_RDMA_USE_CM=1)" "$t" 240 "$DIR/$t"
done
# The pass above would also pass by hand-driven setup: the rdma_cm test itself counts the cm
# connects and accepts and reads setup "rdma_cm" off /connections.
run "cm_rdma_test" cm_rdma_test 120 "$DIR/cm_rdma_test"
finish
