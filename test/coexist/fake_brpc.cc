// fake_brpc.cc - stands in for brpc in the flag-coexistence test: it defines
// the gflags that brpc defines and rrpc also uses, with brpc's types and at
// global scope (the spelling that collides at link time with a second
// definition), and reads them as brpc's own code would: through the
// FLAGS_ variables.
#include <gflags/gflags.h>

#include <cstdint>

DEFINE_uint64(max_body_size, 64 * 1024 * 1024, "stand-in for brpc's max_body_size");
DEFINE_string(rdma_device, "", "stand-in");
DEFINE_int32(rdma_port, 1, "stand-in");
DEFINE_int32(rdma_gid_index, -1, "stand-in");
DEFINE_int32(rdma_sq_size, 128, "stand-in");
DEFINE_int32(rdma_rq_size, 128, "stand-in");
DEFINE_int32(rdma_memory_pool_initial_size_mb, 1024, "stand-in");
DEFINE_int32(rdma_memory_pool_increase_size_mb, 1024, "stand-in");
DEFINE_bool(rdma_use_polling, false, "stand-in");
DEFINE_bool(rdma_trace_verbose, false, "stand-in");
DEFINE_bool(rdma_recv_zerocopy, true, "stand-in");
DEFINE_int32(rdma_zerocopy_min_size, 512, "stand-in");
DEFINE_int32(event_dispatcher_num, 1, "stand-in for brpc's event_dispatcher_num");
DEFINE_bool(usercode_in_pthread, false, "stand-in for brpc's usercode_in_pthread");
DEFINE_int64(socket_max_unwritten_bytes, 64 * 1024 * 1024, "stand-in for brpc's socket_max_unwritten_bytes");

extern "C" {
uint64_t fake_brpc_max_body_size() { return FLAGS_max_body_size; }
int32_t fake_brpc_event_dispatcher_num() { return FLAGS_event_dispatcher_num; }
bool fake_brpc_usercode_in_pthread() { return FLAGS_usercode_in_pthread; }
}
