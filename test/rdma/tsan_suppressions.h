// tsan_suppressions.h - what ThreadSanitizer cannot see in a verbs program,
// for the RDMA test binaries (make TSAN=1 test-rdma-tsan). Include it in
// exactly one file of each binary (its test .cc).
#ifndef RRPC_TEST_RDMA_TSAN_SUPPRESSIONS_H
#define RRPC_TEST_RDMA_TSAN_SUPPRESSIONS_H

#if defined(__SANITIZE_THREAD__)
extern "C" const char *__tsan_default_suppressions() {
  // transport/rdma/device.c on_async reads qp_num from the QP an async event
  // names, and ibv_ack_async_event locks that QP's mutex. The provider wrote
  // that struct in ibv_create_qp on another thread; the ordering runs
  // through the kernel (the event is read from the device's async fd),
  // which TSan does not model. Nothing else is hidden.
  return "race:on_async\nrace:ibv_ack_async_event\n";
}
#endif

#endif  // RRPC_TEST_RDMA_TSAN_SUPPRESSIONS_H
