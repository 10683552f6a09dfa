#!/usr/bin/env bash
# test/rdma/ring-mode.sh - the RDMA suite's core binaries again with a ring per connection
# (RRPC_RDMA_ELASTIC=0). Elastic receive rings are the default, so the rest of
# `make test-rdma` runs them; this keeps the ring mode (--rdma_elastic=false, and what an elastic
# client gets from a server that does not offer elastic rings) under the same tests: sizes, wrap,
# slow receiver, kill -9, 100 connections, hostile peers, teardown, shared CQs, fallback, the
# legacy and brpc peers. Binaries that pin their mode themselves (copy_counters, registered_cap,
# held_attachments, elastic_rogue) are not repeated. Needs real verbs: run by tools/run-rdma-tests
# (make test-rdma) inside the VM, or on a host with an RDMA port. Each binary is bounded.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 2
export RRPC_RDMA_ELASTIC=0
PASS=ring-mode
. test/rdma/suite-pass.sh
for t in rpc_rdma_test adversarial_rdma_test teardown_rdma_test shared_cq_rdma_test oom_rdma_test \
    legacy_peer_rdma_test brpc_peer_rdma_test callctl_rdma_test cluster_rdma_test builtin_rdma_test \
    zerocopy_forward_test app_allocator_test; do
  run "$t (RRPC_RDMA_ELASTIC=0)" "$t" 240 "$DIR/$t"
done
# Zero-copy slices from 4 KiB: the slow-receiver case again, where a test (or an application) that
# keeps received slices would stall the ring (a past one did; it failed here
# every time, where the sizes above only made it intermittent).
RRPC_TEST_ZC_MIN=4096 run "rpc_rdma_test SlowReceiver (RRPC_RDMA_ELASTIC=0 RRPC_TEST_ZC_MIN=4096)" zc 120 \
  "$DIR/rpc_rdma_test" --gtest_filter='*SlowReceiver*'
finish
