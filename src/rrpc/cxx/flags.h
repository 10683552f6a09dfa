// rrpc/cxx/flags.h - the gflags of the C++ face, declared for programs that
// want to read or set them before creating servers and channels. Names are
// brpc's where the meaning is the same. The RDMA flags are read once, when
// the first Server or Channel with use_rdma starts the RDMA runtime; the
// others give the defaults of ServerOptions/ChannelOptions at construction.
//
// Two groups (docs/from-brpc.md, "One process with brpc"):
//  - flags brpc also defines, with brpc's types: defined in librrpc_flags.
//    rrpc reads them by name from the gflags registry, so in a process that
//    links brpc (and leaves librrpc_flags out) brpc's definition serves both.
//    There, set them by name (gflags::SetCommandLineOption or the command
//    line): these declarations name rrpc's variables, which brpc's build
//    does not provide.
//  - rrpc's own flags: defined in librrpc_cxx, always present.
#ifndef RRPC_CXX_FLAGS_H
#define RRPC_CXX_FLAGS_H

#include <gflags/gflags.h>

// brpc-named (librrpc_flags).
DECLARE_uint64(max_body_size);
DECLARE_string(rdma_device);
DECLARE_int32(rdma_port);
DECLARE_int32(rdma_gid_index);
DECLARE_int32(rdma_sq_size);
DECLARE_int32(rdma_rq_size);
DECLARE_int32(rdma_memory_pool_initial_size_mb);
DECLARE_int32(rdma_memory_pool_increase_size_mb);
DECLARE_bool(rdma_use_polling);
DECLARE_bool(rdma_trace_verbose);
DECLARE_bool(rdma_recv_zerocopy);
DECLARE_int32(rdma_zerocopy_min_size);
DECLARE_int32(event_dispatcher_num);
DECLARE_bool(usercode_in_pthread);
DECLARE_int64(socket_max_unwritten_bytes);

// rrpc's own (librrpc_cxx).
DECLARE_uint64(rdma_ring_size);
DECLARE_int32(rdma_memory_pool_max_size_mb);
DECLARE_bool(rdma_fallback);
DECLARE_int32(rdma_handshake_timeout_ms);
DECLARE_bool(rdma_use_cm);
DECLARE_int32(rdma_cm_port);
DECLARE_int32(rdma_close_wait_ms);
DECLARE_int32(rdma_bg_queue_max);
DECLARE_int32(rdma_bg_setup_threads);
DECLARE_bool(rdma_elastic);
DECLARE_int32(rdma_ring_idle_ms);
DECLARE_uint64(rdma_retired_max_size);
DECLARE_uint64(rdma_memory_pool_low_water_mb);
DECLARE_int32(rrpc_rdma_tcp_only_ttl_s);
DECLARE_int32(rdma_brpc_ack_settle_us);
DECLARE_string(rdma_dialect);
DECLARE_string(smc_ueid);
DECLARE_string(smc_pnet);
DECLARE_int32(usercode_pool_threads);
DECLARE_bool(usercode_in_loop);
DECLARE_int32(usercode_queue_max);
DECLARE_int32(rrpc_pool_rescue_us);
DECLARE_bool(rrpc_pool_batch_sched);
DECLARE_int32(rrpc_pool_busy_queue);
DECLARE_int32(rrpc_pool_short_task_us);
DECLARE_int32(rrpc_pool_write_flush_us);
// Limits (rrpc/limits.h, docs/security.md). The process-wide ones are applied
// whenever a Server starts or a Channel is created.
DECLARE_int32(rrpc_idle_timeout_second);
DECLARE_int32(rrpc_max_concurrency);
DECLARE_uint64(rrpc_max_unwritten_bytes);
DECLARE_uint64(rrpc_max_input_bytes);
DECLARE_int32(rrpc_clc_sniff_timeout_ms);
DECLARE_int32(rrpc_socket_max_pending_requests);
DECLARE_int32(rrpc_completion_handoff);
DECLARE_bool(enable_metrics);
DECLARE_uint64(builtin_max_request_bytes);
DECLARE_uint64(builtin_max_connections_listed);
DECLARE_uint64(builtin_max_concurrent_listings);
DECLARE_uint64(remote_piece_size);
DECLARE_int32(remote_max_inflight);
DECLARE_int32(remote_max_regions);
DECLARE_int32(remote_bind_wait_ms);

#endif  // RRPC_CXX_FLAGS_H
