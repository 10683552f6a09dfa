// brpc_unused.cc - brpc's well-known deploy flags that mean nothing to rrpc,
// accepted so that a command line or flagfile written for a brpc service does
// not stop the program at "unknown command line flag". Each one set away from
// its default is reported once, when the first Server or Channel starts
// (rrpc/cxx WarnIgnoredBrpcFlags finds them by this file's name), and then
// ignored. Types and defaults are brpc's. In librrpc_flags, like every
// brpc-named flag, so a process that links brpc gets brpc's definitions, which
// brpc honours (and then nothing is reported). docs/from-brpc.md lists them.
#include <gflags/gflags.h>

#define RRPC_IGNORED "brpc flag; no meaning in rrpc: accepted and ignored"

// bthread: rrpc has no M:N threads (docs/threads.md).
DEFINE_int32(bthread_concurrency, 9, RRPC_IGNORED " (rrpc: --event_dispatcher_num, --usercode_pool_threads)");
DEFINE_int32(bthread_min_concurrency, 0, RRPC_IGNORED);
DEFINE_int32(stack_size_normal, 1048576, RRPC_IGNORED);
DEFINE_int32(task_group_runqueue_capacity, 4096, RRPC_IGNORED);
DEFINE_int32(usercode_backup_threads, 5, RRPC_IGNORED);
// Tracing and dumps that rrpc does not implement.
DEFINE_bool(enable_rpcz, false, RRPC_IGNORED " (no /rpcz page)");
DEFINE_bool(rpc_dump, false, RRPC_IGNORED);
DEFINE_bool(bvar_dump, false, RRPC_IGNORED " (rrpc: scrape /metrics or /vars)");
DEFINE_int32(bvar_dump_interval, 10, RRPC_IGNORED);
DEFINE_string(bvar_dump_file, "monitor/bvar.<app>.data", RRPC_IGNORED);
DEFINE_bool(enable_dir_service, false, RRPC_IGNORED);
DEFINE_bool(enable_threads_service, false, RRPC_IGNORED);
// Connection logging and lifetime knobs rrpc spells differently or lacks.
DEFINE_bool(log_connection_close, false, RRPC_IGNORED);
DEFINE_bool(log_connected, false, RRPC_IGNORED);
DEFINE_bool(log_error_text, false, RRPC_IGNORED);
DEFINE_int32(idle_timeout_second, 10,
             RRPC_IGNORED " (rrpc: ServerOptions::idle_timeout_sec, --rrpc_idle_timeout_second)");
DEFINE_int32(defer_close_second, 0, RRPC_IGNORED);
DEFINE_int32(health_check_timeout_ms, 500, RRPC_IGNORED);
DEFINE_bool(socket_keepalive, false, RRPC_IGNORED);
// Formatting and process knobs of brpc's own libraries.
DEFINE_bool(http_verbose, false, RRPC_IGNORED);
DEFINE_bool(pb_enum_as_number, false, RRPC_IGNORED);
DEFINE_bool(crash_on_fatal_log, false, RRPC_IGNORED);
DEFINE_int32(free_memory_to_system_interval, 0, RRPC_IGNORED);
