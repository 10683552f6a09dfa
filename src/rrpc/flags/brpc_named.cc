// brpc_named.cc - librrpc_flags: the gflags rrpc shares with brpc, by name,
// type and meaning. It is a library of its own so that a process which also
// links brpc leaves it out: brpc's definitions then serve both, because rrpc
// reads these settings from the gflags registry by name (rrpc/cxx/flag_value.h)
// and never refers to the variables below. Linking both definitions would
// fail ("multiple definition" statically, "defined more than once" at start
// with shared libraries).
#include <gflags/gflags.h>

#include <cstdint>
#include <cstdio>

#include "rrpc/cxx/flag_validators.h"
#include "rrpc/cxx/flag_value.h"

using namespace rrpc::detail;  // the k* defaults

DEFINE_uint64(max_body_size, kDefaultMaxBodySize,
              "Largest message body (meta+message+attachment) accepted");
DEFINE_string(rdma_device, "", "RDMA device (HCA) name; empty = the first with an ACTIVE port");
DEFINE_int32(rdma_port, kDefaultRdmaPort, "Port number of the RDMA device");
DEFINE_int32(rdma_gid_index, kDefaultRdmaGidIndex,
             "GID index to use; -1 = auto (the RoCE v2 GID that maps the TCP local address, "
             "then any v2, then v1)");
DEFINE_int32(rdma_sq_size, kDefaultRdmaSqSize, "Send queue depth of each RDMA connection");
DEFINE_int32(rdma_rq_size, kDefaultRdmaRqSize,
             "Receive queue depth (pre-posted receives) of each RDMA connection");
DEFINE_int32(rdma_memory_pool_initial_size_mb, kDefaultRdmaPoolInitialMb,
             "First region of the registered memory pool (MB)");
DEFINE_int32(rdma_memory_pool_increase_size_mb, kDefaultRdmaPoolIncreaseMb,
             "Size of each region added to the pool (MB)");
DEFINE_bool(rdma_use_polling, kDefaultRdmaUsePolling,
            "Busy-poll completion queues instead of waiting for events");
DEFINE_bool(rdma_trace_verbose, kDefaultRdmaTraceVerbose, "Log every step of the RDMA handshake");
DEFINE_bool(rdma_recv_zerocopy, kDefaultRdmaRecvZerocopy,
            "Hand large received RDMA pieces to the application as slices of the receive ring "
            "instead of copies. A slice holds ring space until dropped and the ring drains in "
            "order, so only for applications that drop received iobufs promptly");
DEFINE_int32(rdma_zerocopy_min_size, kDefaultRdmaZerocopyMinSize,
             "With rdma_recv_zerocopy: received pieces at least this large reference the "
             "receive ring; smaller ones are copied");
DEFINE_int32(event_dispatcher_num, kDefaultEventDispatcherNum,
             "Process-wide event loop threads shared by channels and servers; 0 = one per CPU. "
             "Read when the first Channel or Server starts them");
DEFINE_bool(usercode_in_pthread, kDefaultUsercodeInPthread,
            "Kept for brpc compatibility: server methods run on a worker pool by default");
DEFINE_int64(socket_max_unwritten_bytes, kDefaultSocketMaxUnwrittenBytes,
             "Bytes queued for writing on one connection; a write past it fails with "
             "EOVERCROWDED, and a server stops reading a connection over half of it");
DEFINE_int32(health_check_interval, kDefaultHealthCheckIntervalS,
             "Seconds before a cluster channel probes a server whose connection failed "
             "(then doubling, up to 8x); it takes calls again once a probe connects");
DEFINE_int32(max_connection_pool_size, kDefaultMaxConnectionPoolSize,
             "Idle connections a pooled channel keeps per server; one more is closed");
DEFINE_bool(graceful_quit_on_sigterm, false,
            "SIGTERM asks the process to quit (rrpc::IsAskedToQuit, RunUntilAskedToQuit returns and "
            "the server stops) instead of killing it; installed when a Server starts");
DEFINE_int32(ns_access_interval, kDefaultNsAccessIntervalS,
             "Seconds between fetches of periodic naming services (file://, dns://)");

namespace {

bool ValidGidIndex(const char*, int32_t v) {
  if (v >= -1) return true;
  fprintf(stderr, "--rdma_gid_index must be -1 (auto) or an index, got %d\n", static_cast<int>(v));
  return false;
}

const bool g_validators_registered =
    gflags::RegisterFlagValidator(&FLAGS_rdma_port, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_gid_index, ValidGidIndex) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_sq_size, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_rq_size, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_memory_pool_initial_size_mb, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_memory_pool_increase_size_mb, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_zerocopy_min_size, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_max_body_size, rrpc::detail::FlagPositive64) &&
    gflags::RegisterFlagValidator(&FLAGS_event_dispatcher_num, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_health_check_interval, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_ns_access_interval, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_max_connection_pool_size, rrpc::detail::FlagNonNegative);

}  // namespace

// Nothing in rrpc refers to this file's symbols, so a static archive member
// would never be pulled in: consumers link with -Wl,-u,rrpc_flags_anchor
// (rrpc.pc and the CMake package add it; Bazel uses alwayslink).
extern "C" {
extern const int rrpc_flags_anchor;
const int rrpc_flags_anchor = 1;
}
