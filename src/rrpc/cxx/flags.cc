// flags.cc - the gflags of the C++ face and the one place that turns the
// rdma_* flags into rrpc_rdma_options and starts the RDMA runtime.
#include "rrpc/cxx/flags.h"

#include <glog/logging.h>

#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "rrpc/cxx/detail.h"
#include "rrpc/builtin.h"
#include "rrpc/errors.h"
#include "rrpc/metrics.h"
#include "rrpc/rdma.h"

DEFINE_string(rdma_device, "", "RDMA device (HCA) name; empty = the first with an ACTIVE port");
DEFINE_int32(rdma_port, 1, "Port number of the RDMA device");
DEFINE_int32(rdma_gid_index, -1,
             "GID index to use; -1 = auto (the RoCE v2 GID that maps the TCP local address, "
             "then any v2, then v1)");
DEFINE_int32(rdma_sq_size, 128, "Send queue depth of each RDMA connection");
DEFINE_int32(rdma_rq_size, 128, "Receive queue depth (pre-posted receives) of each RDMA connection");
DEFINE_uint64(rdma_ring_size, 1u << 20,
              "Bytes of each RDMA connection's receive ring (16 KiB << n)");
DEFINE_int32(rdma_memory_pool_initial_size_mb, 64, "First region of the registered memory pool (MB)");
DEFINE_int32(rdma_memory_pool_increase_size_mb, 64, "Size of each region added to the pool (MB)");
DEFINE_int32(rdma_memory_pool_max_size_mb, 4096, "Cap of the registered memory pool (MB)");
DEFINE_bool(rdma_use_polling, false, "Busy-poll completion queues instead of waiting for events");
DEFINE_bool(rdma_trace_verbose, false, "Log every step of the RDMA handshake");
DEFINE_bool(rdma_fallback, true,
            "Fall back to TCP when RDMA cannot be set up on a connection (false: fail it)");
DEFINE_int32(rdma_handshake_timeout_ms, 2000, "Timeout of each RDMA handshake step (ms)");
DEFINE_bool(rdma_recv_zerocopy, false,
            "Hand large received RDMA pieces to the application as slices of the receive ring "
            "instead of copies. A slice holds ring space until dropped and the ring drains in "
            "order, so only for applications that drop received iobufs promptly");
DEFINE_uint64(rdma_zerocopy_min_size, 64u << 10,
              "With rdma_recv_zerocopy: received pieces at least this large reference the "
              "receive ring; smaller ones are copied");
DEFINE_uint64(max_body_size, 64u << 20, "Largest message body (meta+message+attachment) accepted");
DEFINE_int32(event_dispatcher_num, 0,
             "Event loop threads of each Server; 0 = share the process-wide loops "
             "(one per CPU, at most 4)");
DEFINE_bool(usercode_in_pthread, false,
            "Run server methods on a worker pool instead of the event loop (for methods that "
            "block)");
DEFINE_int32(usercode_pool_threads, 0, "Worker pool size for usercode_in_pthread; 0 = 4");
DEFINE_bool(enable_metrics, true,
            "Record per-method, per-server and per-channel call figures (QPS, errors, latency "
            "percentiles) shown on the builtin pages");
DEFINE_uint64(builtin_max_request_bytes, 8192,
              "Largest HTTP request head the builtin pages accept (larger: 413); at most 65536");
DEFINE_uint64(builtin_max_connections_listed, 10000, "Rows of the /connections builtin page");
DEFINE_uint64(builtin_max_concurrent_listings, 4,
              "/connections and /rdma pages built at once (more get 503)");

namespace {

bool NonNegative(const char* name, int32_t v) {
  if (v >= 0) return true;
  fprintf(stderr, "--%s must be >= 0, got %d\n", name, static_cast<int>(v));
  return false;
}
bool ValidGidIndex(const char*, int32_t v) {
  if (v >= -1) return true;
  fprintf(stderr, "--rdma_gid_index must be -1 (auto) or an index, got %d\n", static_cast<int>(v));
  return false;
}
bool ValidRingSize(const char*, uint64_t v) {
  // 16 KiB << n: a power of two of at least 16 KiB.
  if (v >= (16u << 10) && (v & (v - 1)) == 0) return true;
  fprintf(stderr, "--rdma_ring_size must be 16 KiB << n, got %llu\n",
          static_cast<unsigned long long>(v));
  return false;
}
bool Positive64(const char* name, uint64_t v) {
  if (v > 0) return true;
  fprintf(stderr, "--%s must be > 0\n", name);
  return false;
}

const bool g_validators_registered =
    gflags::RegisterFlagValidator(&FLAGS_rdma_port, NonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_gid_index, ValidGidIndex) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_sq_size, NonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_rq_size, NonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_ring_size, ValidRingSize) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_memory_pool_initial_size_mb, NonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_memory_pool_increase_size_mb, NonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_memory_pool_max_size_mb, NonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_handshake_timeout_ms, NonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_max_body_size, Positive64) &&
    gflags::RegisterFlagValidator(&FLAGS_event_dispatcher_num, NonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_usercode_pool_threads, NonNegative);

}  // namespace

namespace rrpc {
namespace detail {

namespace {
// /flags lists every gflag with its current value. Runs on a loop thread;
// reading flags neither blocks nor changes them.
void VisitAllFlags(void*, rrpc_flag_visit_fn visit, void* ctx) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  for (const gflags::CommandLineFlagInfo& f : all)
    visit(ctx, f.name.c_str(), f.current_value.c_str(), f.description.c_str());
}
}  // namespace

void ApplyObservabilityFlags() {
  rrpc_metrics_set_enabled(FLAGS_enable_metrics ? 1 : 0);
  rrpc_builtin_options o{};
  o.max_request_bytes = static_cast<size_t>(FLAGS_builtin_max_request_bytes);
  o.max_connections_listed = static_cast<size_t>(FLAGS_builtin_max_connections_listed);
  o.max_concurrent_listings = static_cast<size_t>(FLAGS_builtin_max_concurrent_listings);
  if (rrpc_builtin_set_options(&o) != 0)
    LOG(WARNING) << "--builtin_max_request_bytes=" << FLAGS_builtin_max_request_bytes
                 << " is above 65536; the previous limit stays";
  rrpc_builtin_set_flags_source(VisitAllFlags, nullptr);
}

int PrepareRdma() {
  static std::once_flag once;
  static int init_rc;
  // The options hold a pointer to the device name; keep it for the process.
  static std::string device;
  std::call_once(once, [] {
    device = FLAGS_rdma_device;
    rrpc_rdma_options o;
    rrpc_rdma_options_init(&o);
    o.device = device.empty() ? nullptr : device.c_str();
    o.port = FLAGS_rdma_port;
    o.gid_index_plus1 = FLAGS_rdma_gid_index + 1;
    o.sq_size = FLAGS_rdma_sq_size;
    o.rq_size = FLAGS_rdma_rq_size;
    o.ring_size = static_cast<size_t>(FLAGS_rdma_ring_size);
    o.pool_initial_size_mb = static_cast<size_t>(FLAGS_rdma_memory_pool_initial_size_mb);
    o.pool_increase_size_mb = static_cast<size_t>(FLAGS_rdma_memory_pool_increase_size_mb);
    o.pool_max_size_mb = static_cast<size_t>(FLAGS_rdma_memory_pool_max_size_mb);
    o.use_polling = FLAGS_rdma_use_polling ? 1 : 0;
    o.trace_verbose = FLAGS_rdma_trace_verbose ? 1 : 0;
    o.no_fallback = FLAGS_rdma_fallback ? 0 : 1;
    o.handshake_timeout_ms = FLAGS_rdma_handshake_timeout_ms;
    // 0 would mean "the default"; a flag of 0 means "always zero-copy".
    o.zerocopy_min_size = FLAGS_rdma_zerocopy_min_size > 0
                              ? static_cast<size_t>(FLAGS_rdma_zerocopy_min_size)
                              : 1;
    o.recv_zerocopy = FLAGS_rdma_recv_zerocopy ? 1 : 0;
    init_rc = rrpc_rdma_global_init(&o);
    // Someone (the application, through the C API) started it first: their
    // settings stand, which is what they asked for.
    if (init_rc == -EALREADY) init_rc = 0;
  });
  if (init_rc == 0) return 0;
  if (init_rc == -RRPC_ENORDMA) {
    LOG(ERROR) << "use_rdma=true, but " << rrpc_strerror(init_rc);
  } else {
    LOG(ERROR) << "cannot start the RDMA runtime: " << rrpc_strerror(init_rc) << " ("
               << rrpc_err_name(init_rc) << ")";
  }
  return -1;
}

}  // namespace detail
}  // namespace rrpc
