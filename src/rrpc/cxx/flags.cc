// flags.cc - rrpc's own gflags (the brpc-named ones are in librrpc_flags) and
// the one place that turns the rdma_* settings into rrpc_rdma_options and
// starts the RDMA runtime.
#include "rrpc/cxx/flags.h"

#include <glog/logging.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "rrpc/cxx/detail.h"
#include "rrpc/builtin.h"
#include "rrpc/cxx/flag_validators.h"
#include "rrpc/cxx/flag_value.h"
#include "rrpc/errors.h"
#include "rrpc/iobuf.h"
#include "rrpc/limits.h"
#include "rrpc/loops.h"
#include "rrpc/metrics.h"
#include "rrpc/rdma.h"
#include "rrpc/remote.h"
#include "rrpc/version.h"

// The flags brpc also defines (max_body_size, rdma_sq_size, ...) are not
// here: they live in librrpc_flags (src/rrpc/flags/) and are read by name, so
// a process that links brpc as well gets one flag serving both. These are
// rrpc's own; no brpc flag has their names. A new flag whose name brpc also
// uses goes to src/rrpc/flags/ and is read with rrpc/cxx/flag_value.h.
DEFINE_uint64(rdma_ring_size, 1u << 20,
              "Bytes of each RDMA connection's receive ring (16 KiB << n)");
DEFINE_int32(rdma_memory_pool_max_size_mb, 4096, "Cap of the registered memory pool (MB)");
DEFINE_int32(rdma_registered_max_size_mb, 5120,
             "Cap of everything registered at once: pool + connections' rings + CDC slots (MB); "
             "a connection whose ring would pass it falls back to TCP");
DEFINE_bool(rdma_fallback, true,
            "Fall back to TCP when RDMA cannot be set up on a connection (false: fail it)");
DEFINE_int32(rdma_handshake_timeout_ms, 2000, "Timeout of each RDMA handshake step (ms)");
DEFINE_bool(rdma_use_cm, false,
            "Connect a client's QP through rdma_cm instead of by hand (the CLC exchange still decides "
            "and tells the port); always so on iWARP devices");
DEFINE_int32(rdma_cm_port, 0,
             "Port of a server's rdma_cm listener (iWARP's MPA connects to it over TCP); 0 = any free "
             "port, announced in the CLC Accept");
DEFINE_int32(rdma_max_concurrent_handshakes, 64,
             "Server-side RDMA handshakes in progress at once (each holds a QP and a registered ring); "
             "Proposals over it are declined and go on over TCP");
DEFINE_int32(rdma_close_wait_ms, 1000,
             "How long a closed RDMA connection keeps its QP waiting for its close message to leave (ms)");
DEFINE_int32(rdma_cursor_stall_ms, 60000,
             "The cursor RDMA dialect fails a connection whose writes found the peer's ring full and no "
             "consumer-cursor update freed any of it for this long (ms; < 0 = never)");
DEFINE_int32(rdma_bg_queue_max, 4096,
             "Verbs teardown jobs (QP destroy, deregistration) queued for the background verbs thread at "
             "once; over it a job runs on the closing loop (counted)");
DEFINE_int32(rdma_bg_setup_threads, 0,
             "Threads that make new RDMA connections' QPs and rings off the loops (0 = the online CPUs, "
             "at least 2, at most 8)");
DEFINE_bool(rdma_elastic, true,
            "Offer elastic receive rings (docs/elastic-rings.md): an RDMA connection whose peer "
            "offers them too pins granted pieces (an idle one ~5 KiB) instead of a ring; false: "
            "a ring of --rdma_ring_size per connection");
DEFINE_int32(rdma_elastic_sq_size, 31,
             "elastic mode: send queue depth (WRs) of a connection offering or taking up elastic "
             "rings; the peer's 16 receive credits bound its writes, so more costs only memory "
             "(8..4096)");
DEFINE_int32(rdma_ring_idle_ms, 2000,
             "Elastic rings: after this long without data an RDMA connection shrinks to one 4 KiB "
             "piece per direction");
DEFINE_uint64(rdma_piece_cache_size_mb, 8,
              "Elastic rings: cleared, registered pieces kept process-wide for grants (MiB); a "
              "grant past them waits for a refill (counter piece_grant_refused)");
DEFINE_uint64(rdma_memory_pool_low_water_mb, 0,
              "Once less than this is left to carve in the registered pool, its next region is "
              "registered on a background thread ahead of need (MiB; 0 = half of "
              "--rdma_memory_pool_increase_size_mb)");
DEFINE_uint64(rdma_retired_max_size, 0,
              "Elastic rings, per connection: bytes of pieces retired while the application holds "
              "them; past it the stream waits for releases; half of it bounds what zero-copy receive "
              "pins (0 = 4 x --rdma_ring_size)");
DEFINE_int32(rrpc_rdma_tcp_only_ttl_s, 300,
             "An RDMA client whose server closed the connection during the RDMA handshake (a "
             "server that predates it, e.g. brpc) calls it again over TCP and reaches it over "
             "TCP only for so many seconds; <= 0 = never remember");
DEFINE_int32(rdma_brpc_ack_settle_us, 20000,
             "A brpc-dialect client waits so long after its handshake ACK before its first "
             "data over RDMA: a brpc server before apache/brpc#3505 closes the connection when "
             "RDMA bytes reach it before it has parsed the ACK; <= 0 = no wait");
DEFINE_string(rdma_dialect, "auto",
              "RDMA dialect of clients: auto (= imm), imm (rrpc's CLC handshake and "
              "write-with-immediate ring), cursor (SMC-R's RDMA WRITE + CDC cursors, as the Linux "
              "kernel speaks it; also chosen per connection where the device has no immediate "
              "data, e.g. iWARP), brpc (Apache brpc's RDMA hello and SEND data path); "
              "servers understand all of them");
DEFINE_int32(usercode_pool_threads, 0,
             "Worker pool size of each Server; 0 = the CPU count, at least 4");
DEFINE_bool(usercode_in_loop, false,
            "Run server methods on the event loop that read the request (fastest; methods "
            "must never block)");
DEFINE_int32(usercode_queue_max, 0,
             "Requests waiting for a worker, at most, per Server; one more fails with "
             "EOVERCROWDED. 0 = 65536");
DEFINE_int32(rrpc_pool_rescue_us, 0,
             "Default ServerOptions::pool_rescue_us: requests held behind a pool thread's "
             "blocked handler get an idle thread after this long without progress; "
             "0 = 1000, negative = wake the next thread for every request at once");
DEFINE_bool(rrpc_pool_batch_sched, false,
            "Default ServerOptions::pool_batch_sched: pool threads run under SCHED_BATCH, so a "
            "woken one does not preempt a busy event loop (fewer context switches when threads "
            "outnumber cores at saturation); not with --rdma_use_polling (polling loops never "
            "sleep, so woken pool threads wait out whole time slices)");
DEFINE_int32(rrpc_pool_busy_queue, 0,
             "Default ServerOptions::pool_busy_queue: if positive, requests arriving while pool "
             "threads are busy in short handlers wake no idle thread while at most this many "
             "wait per busy one (hosts where idle workers outnumber busy cores; not with "
             "--rdma_use_polling); 0 = off");
DEFINE_int32(rrpc_pool_short_task_us, 0,
             "Default ServerOptions::pool_short_task_us: handlers averaging at most this long "
             "count as short for --rrpc_pool_busy_queue; 0 = 50, negative = never");
DEFINE_int32(rrpc_pool_write_flush_us, 0,
             "Default ServerOptions::pool_write_flush_us: pool threads gather their responses to a "
             "busy connection over a run of requests and write them in one go; a response waits at "
             "most about this long behind a handler that blocks; 0 = 1000, negative = the "
             "connection's loop writes them");
DEFINE_int32(rrpc_idle_timeout_second, 0,
             "Default ServerOptions::idle_timeout_sec: a server connection that reads and writes "
             "nothing for so many seconds is closed; <= 0 = never (brpc's idle_timeout_second "
             "is its client connection pools' setting, a different one)");
DEFINE_int32(rrpc_max_concurrency, 0,
             "Default ServerOptions::max_concurrency: requests running at once per server; one "
             "more fails with ELIMIT; 0 = no limit");
DEFINE_uint64(rrpc_max_unwritten_bytes, 1u << 30,
              "Bytes queued for writing over all connections of the process");
DEFINE_uint64(rrpc_max_input_bytes, 1u << 30,
              "Bytes of unfinished messages buffered over all connections of the process; the "
              "connection that passes it is closed");
DEFINE_int32(rrpc_socket_max_pending_requests, 1024,
             "Requests read from one server connection and not answered yet; at it the server "
             "stops reading that connection until half are answered");
DEFINE_uint64(remote_piece_size, 1u << 20,
              "Remote memory: bytes per piece a transfer is split into (one frame over TCP, one "
              "work request over RDMA); 4096..1048576, taken by links made after it is set");
DEFINE_int32(remote_max_inflight, 8,
             "Remote memory: pieces of one link sent and not completed; more wait in the link's "
             "queue (1..8: an RDMA QP reserves send entries for 8)");
DEFINE_int32(remote_max_regions, 4096,
             "Remote memory: live regions per link and table; a registration over it fails with "
             "-ENOSPC and an announcement over it fails the connection (counter refused_full; "
             "1..1048576; give both sides the same value)");
DEFINE_int32(remote_bind_wait_ms, 10000,
             "Remote memory over RDMA: how long a registration waits for its window's bind to "
             "complete before failing with -ETIMEDOUT (counter bind_timeouts; 1..600000 ms)");
DEFINE_int32(rrpc_completion_handoff, 0,
             "Client completions of one busy connection: at least this many from one read "
             "(>= 2) and half run on another, sleeping process-wide loop; 0 = off (the default)");
DEFINE_int32(rrpc_clc_sniff_timeout_ms, 2000,
             "A TCP server connection whose first bytes may be SMC-R CLC must complete the "
             "message within this time");
DEFINE_string(smc_ueid, "",
              "Kernel SMC-R peers: user EIDs rrpc offers and accepts in SMC-Rv2 CLC (comma-separated, "
              "at most 4, A-Z 0-9 . -; the peer kernel needs one in common); empty = none");
DEFINE_string(smc_pnet, "",
              "Kernel SMC-R peers: pnet table, NETDEV=IBDEV[:PORT] comma-separated (the RDMA "
              "device and port for connections routed over NETDEV); empty = --rdma_device");
DEFINE_uint32(rrpc_iobuf_block_cache_per_thread, RRPC_IOBUF_BLOCK_CACHE_PER_THREAD,
              "Default-size (8 KiB) iobuf blocks each thread keeps for reuse instead of freeing them; "
              "0 = none; at most 65536");
DEFINE_uint32(rrpc_iobuf_block_cache_shared, RRPC_IOBUF_BLOCK_CACHE_SHARED,
              "Default-size iobuf blocks kept process-wide for threads whose own cache ran dry "
              "(the overflow of threads that free more than they allocate); 0 = none; at most 65536");
DEFINE_bool(enable_metrics, true,
            "Record per-method, per-server and per-channel call figures (QPS, errors, latency "
            "percentiles) shown on the builtin pages");
DEFINE_uint64(builtin_max_request_bytes, 8192,
              "Largest HTTP request head the builtin pages accept (larger: 413); at most 65536");
DEFINE_uint64(builtin_max_connections_listed, 10000, "Rows of the /connections builtin page");
DEFINE_uint64(builtin_max_concurrent_listings, 4,
              "/connections and /rdma pages built at once (more get 503)");

namespace {

// gflags' --version prints the program name and this string; a program that
// sets its own (gflags::SetVersionString in main) replaces it.
const bool g_version_set = (gflags::SetVersionString("(rrpc " RRPC_VERSION_STRING ")"), true);

bool ValidRingSize(const char*, uint64_t v) {
  // 16 KiB << n, n <= 15: what a CLC Accept can announce.
  if (v >= (16u << 10) && v <= (uint64_t{512} << 20) && (v & (v - 1)) == 0) return true;
  fprintf(stderr, "--rdma_ring_size must be 16 KiB << n (at most 512 MiB), got %llu\n",
          static_cast<unsigned long long>(v));
  return false;
}

bool ValidCmPort(const char*, int32_t v) {
  if (v >= 0 && v <= 65535) return true;
  fprintf(stderr, "--rdma_cm_port must be 0 .. 65535, got %d\n", static_cast<int>(v));
  return false;
}

// The RRPC_RDMA_DIALECT_x that --rdma_dialect=name means ("" and "auto":
// AUTO); -1 with *why for a name this rrpc does not have.
int RdmaDialectByName(const std::string& name, std::string* why) {
  if (name.empty() || name == "auto") return RRPC_RDMA_DIALECT_AUTO;
  if (name == "imm") return RRPC_RDMA_DIALECT_IMM;
  if (name == "brpc") return RRPC_RDMA_DIALECT_BRPC;
  if (name == "cursor") return RRPC_RDMA_DIALECT_CURSOR;
  *why = "unknown (auto, imm, cursor or brpc)";
  return -1;
}

// --smc_ueid / --smc_pnet: checked and stored in the process-wide SMC
// configuration as they are set (parsed or changed), so a later CLC v2
// handshake reads the current value.
bool SetSmcUeids(const char*, const std::string& v) {
  const char* why = nullptr;
  if (rrpc_smc_set_ueids(v.c_str(), &why) == 0) return true;
  fprintf(stderr, "--smc_ueid=%s: %s\n", v.c_str(), why);
  return false;
}

bool SetSmcPnet(const char*, const std::string& v) {
  const char* why = nullptr;
  if (rrpc_smc_set_pnet(v.c_str(), &why) == 0) return true;
  fprintf(stderr, "--smc_pnet=%s: %s\n", v.c_str(), why);
  return false;
}

// Refused when parsed (a typo used to pass until the first use_rdma Server
// or Channel started the RDMA runtime).
bool ValidRdmaDialect(const char*, const std::string& v) {
  std::string why;
  if (RdmaDialectByName(v, &why) >= 0) return true;
  fprintf(stderr, "--rdma_dialect=%s: %s\n", v.c_str(), why.c_str());
  return false;
}

// --remote_*: checked and stored in the process-wide remote-memory limits as
// they are set (parsed or changed), so the next link takes them; a value
// out of range is refused and the previous one stays.
bool SetRemoteLimit(const char* name, void (*put)(rrpc_remote_limits*, uint64_t), uint64_t v,
                    bool in_range) {
  rrpc_remote_limits l;
  rrpc_remote_limits_get(&l);
  if (in_range) put(&l, v);
  if (in_range && rrpc_remote_limits_set(&l) == 0) return true;
  fprintf(stderr, "--%s=%llu: out of range (see --help)\n", name, static_cast<unsigned long long>(v));
  return false;
}

bool SetRemotePieceSize(const char* name, uint64_t v) {
  return SetRemoteLimit(name, [](rrpc_remote_limits* l, uint64_t x) { l->piece_size = x; }, v,
                        v >= 4096 && v <= (1u << 20));
}

bool SetRemoteMaxInflight(const char* name, int32_t v) {
  return SetRemoteLimit(name, [](rrpc_remote_limits* l, uint64_t x) { l->max_inflight = static_cast<int>(x); },
                        static_cast<uint64_t>(v), v >= 1 && v <= 8);
}

bool SetRemoteBindWaitMs(const char* name, int32_t v) {
  return SetRemoteLimit(name, [](rrpc_remote_limits* l, uint64_t x) { l->bind_wait_ms = static_cast<int>(x); },
                        static_cast<uint64_t>(v), v >= 1 && v <= 600000);
}

bool SetRemoteMaxRegions(const char* name, int32_t v) {
  return SetRemoteLimit(name, [](rrpc_remote_limits* l, uint64_t x) { l->max_regions = static_cast<uint32_t>(x); },
                        static_cast<uint64_t>(v), v >= 1 && v <= (1 << 20));
}

const bool g_validators_registered =
    gflags::RegisterFlagValidator(&FLAGS_rdma_dialect, ValidRdmaDialect) &&
    gflags::RegisterFlagValidator(&FLAGS_smc_ueid, SetSmcUeids) &&
    gflags::RegisterFlagValidator(&FLAGS_smc_pnet, SetSmcPnet) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_ring_size, ValidRingSize) &&
    gflags::RegisterFlagValidator(&FLAGS_remote_piece_size, SetRemotePieceSize) &&
    gflags::RegisterFlagValidator(&FLAGS_remote_max_inflight, SetRemoteMaxInflight) &&
    gflags::RegisterFlagValidator(&FLAGS_remote_max_regions, SetRemoteMaxRegions) &&
    gflags::RegisterFlagValidator(&FLAGS_remote_bind_wait_ms, SetRemoteBindWaitMs) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_memory_pool_max_size_mb, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_registered_max_size_mb, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_handshake_timeout_ms, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_close_wait_ms, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_cm_port, ValidCmPort) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_bg_queue_max, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rdma_bg_setup_threads, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_usercode_pool_threads, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_usercode_queue_max, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rrpc_max_concurrency, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rrpc_max_unwritten_bytes, rrpc::detail::FlagPositive64) &&
    gflags::RegisterFlagValidator(&FLAGS_rrpc_max_input_bytes, rrpc::detail::FlagPositive64) &&
    gflags::RegisterFlagValidator(&FLAGS_rrpc_clc_sniff_timeout_ms, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rrpc_socket_max_pending_requests, rrpc::detail::FlagNonNegative) &&
    gflags::RegisterFlagValidator(&FLAGS_rrpc_completion_handoff, rrpc::detail::FlagNonNegative);

}  // namespace

namespace rrpc {
namespace detail {

namespace {
bool FlagSet(const char* name) { return !gflags::GetCommandLineFlagInfoOrDie(name).is_default; }
// /flags lists every gflag with its current value. Runs on a loop thread;
// reading flags neither blocks nor changes them.
void VisitAllFlags(void*, rrpc_flag_visit_fn visit, void* ctx) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  for (const gflags::CommandLineFlagInfo& f : all)
    visit(ctx, f.name.c_str(), f.current_value.c_str(), f.description.c_str());
}
}  // namespace

namespace {

// brpc's flags rrpc accepts and ignores are the ones src/rrpc/flags/
// brpc_unused.cc defines: found by that file's name, so when brpc's own
// definitions were linked instead (brpc honours them) nothing is reported.
// Each one set explicitly is reported once per process.
void WarnIgnoredBrpcFlags() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<gflags::CommandLineFlagInfo> all;
    gflags::GetAllFlags(&all);
    const std::string file = "brpc_unused.cc";
    for (const gflags::CommandLineFlagInfo& f : all) {
      if (f.is_default || f.filename.size() < file.size() ||
          f.filename.compare(f.filename.size() - file.size(), file.size(), file) != 0)
        continue;
      LOG(WARNING) << "--" << f.name << "=" << f.current_value
                   << " is a brpc flag with no meaning in rrpc: ignored (docs/from-brpc.md, "
                      "\"brpc flags rrpc accepts\")";
    }
  });
}

}  // namespace

void ApplyObservabilityFlags() {
  WarnIgnoredBrpcFlags();
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

// Only flags given on the command line (or set by the program) override: a
// program that set limits through the C API keeps them otherwise.
void ApplyLimitFlags() {
  rrpc_limits l;
  rrpc_limits_get(&l);
  if (FlagSet("rrpc_max_input_bytes")) l.max_input_bytes = static_cast<size_t>(FLAGS_rrpc_max_input_bytes);
  // brpc-named: read by name (brpc's definition serves when brpc is linked).
  int64_t unwritten = FlagInt64("socket_max_unwritten_bytes", kDefaultSocketMaxUnwrittenBytes);
  if (unwritten > 0 && unwritten != kDefaultSocketMaxUnwrittenBytes)
    l.socket_max_unwritten_bytes = static_cast<size_t>(unwritten);
  if (FlagSet("rrpc_max_unwritten_bytes"))
    l.max_unwritten_bytes = static_cast<size_t>(FLAGS_rrpc_max_unwritten_bytes);
  if (FlagSet("rrpc_clc_sniff_timeout_ms")) l.clc_sniff_timeout_ms = FLAGS_rrpc_clc_sniff_timeout_ms;
  if (FlagSet("rrpc_socket_max_pending_requests"))
    l.socket_max_pending_requests = FLAGS_rrpc_socket_max_pending_requests;
  rrpc_limits_set(&l);
  if ((FlagSet("rrpc_iobuf_block_cache_per_thread") || FlagSet("rrpc_iobuf_block_cache_shared")) &&
      rrpc_iobuf_set_block_cache(FLAGS_rrpc_iobuf_block_cache_per_thread, FLAGS_rrpc_iobuf_block_cache_shared) != 0)
    LOG(WARNING) << "--rrpc_iobuf_block_cache_per_thread/_shared above 65536 ignored";
}

void ApplyLoopFlags() {
  // By name: with brpc linked, its event_dispatcher_num (same meaning) rules.
  const int n =
      static_cast<int>(FlagInt64("event_dispatcher_num", kDefaultEventDispatcherNum));
  // Only when set, so rrpc_set_completion_handoff from C stays in force.
  if (FlagSet("rrpc_completion_handoff") && rrpc_set_completion_handoff(FLAGS_rrpc_completion_handoff) != 0)
    LOG(WARNING) << "--rrpc_completion_handoff=" << FLAGS_rrpc_completion_handoff << " ignored (1 is refused)";
  int rc = rrpc_set_event_dispatcher_num(n);
  static std::once_flag warned;
  if (rc == -EBUSY && n != 0) {
    std::call_once(warned, [n] {
      LOG(WARNING) << "--event_dispatcher_num=" << n
                   << " ignored: the process-wide loops already run with "
                   << rrpc_event_dispatcher_num();
    });
  }
}

int PrepareRdma(std::string* why) {
  static std::once_flag once;
  static int init_rc;
  static std::string refused;  // why the flags were refused, before the runtime saw them
  // The options hold a pointer to the device name; keep it for the process.
  static std::string device;
  std::call_once(once, [] {
    device = FlagString("rdma_device", "");
    rrpc_rdma_options o;
    rrpc_rdma_options_init(&o);
    o.device = device.empty() ? nullptr : device.c_str();
    o.port = static_cast<int>(FlagInt64("rdma_port", kDefaultRdmaPort));
    o.gid_index_plus1 = static_cast<int>(FlagInt64("rdma_gid_index", kDefaultRdmaGidIndex)) + 1;
    o.sq_size = static_cast<int>(FlagInt64("rdma_sq_size", kDefaultRdmaSqSize));
    o.rq_size = static_cast<int>(FlagInt64("rdma_rq_size", kDefaultRdmaRqSize));
    o.ring_size = static_cast<size_t>(FLAGS_rdma_ring_size);
    o.pool_initial_size_mb = static_cast<size_t>(
        FlagUint64("rdma_memory_pool_initial_size_mb", kDefaultRdmaPoolInitialMb));
    o.pool_increase_size_mb = static_cast<size_t>(
        FlagUint64("rdma_memory_pool_increase_size_mb", kDefaultRdmaPoolIncreaseMb));
    o.pool_max_size_mb = static_cast<size_t>(FLAGS_rdma_memory_pool_max_size_mb);
    o.registered_max_size_mb = static_cast<size_t>(FLAGS_rdma_registered_max_size_mb);
    o.use_polling = FlagBool("rdma_use_polling", kDefaultRdmaUsePolling) ? 1 : 0;
    o.trace_verbose = FlagBool("rdma_trace_verbose", kDefaultRdmaTraceVerbose) ? 1 : 0;
    o.no_fallback = FLAGS_rdma_fallback ? 0 : 1;
    o.use_cm = FLAGS_rdma_use_cm ? 1 : 0;
    o.cm_port = FLAGS_rdma_cm_port;
    o.handshake_timeout_ms = FLAGS_rdma_handshake_timeout_ms;
    // 0 would mean "the default"; a flag of 0 means "always zero-copy".
    uint64_t zc_min = FlagUint64("rdma_zerocopy_min_size", kDefaultRdmaZerocopyMinSize);
    o.zerocopy_min_size = zc_min > 0 ? static_cast<size_t>(zc_min) : 1;
    o.recv_zerocopy = FlagBool("rdma_recv_zerocopy", kDefaultRdmaRecvZerocopy) ? 1 : 0;
    o.max_handshakes = FLAGS_rdma_max_concurrent_handshakes;
    o.close_wait_ms = FLAGS_rdma_close_wait_ms;
    o.cursor_stall_ms = FLAGS_rdma_cursor_stall_ms;
    o.bg_queue_max = FLAGS_rdma_bg_queue_max;
    o.bg_setup_threads = FLAGS_rdma_bg_setup_threads;
    o.elastic = FLAGS_rdma_elastic ? RRPC_RDMA_ELASTIC_ON : RRPC_RDMA_ELASTIC_OFF;
    o.ring_idle_ms = FLAGS_rdma_ring_idle_ms;
    o.elastic_sq_size = FLAGS_rdma_elastic_sq_size;
    o.retired_max_size = static_cast<size_t>(FLAGS_rdma_retired_max_size);
    o.piece_cache_size_mb = static_cast<size_t>(FLAGS_rdma_piece_cache_size_mb);
    o.pool_low_water_mb = static_cast<size_t>(FLAGS_rdma_memory_pool_low_water_mb);
    o.tcp_only_ttl_s = FLAGS_rrpc_rdma_tcp_only_ttl_s != 0 ? FLAGS_rrpc_rdma_tcp_only_ttl_s : -1;
    o.brpc_ack_settle_us = FLAGS_rdma_brpc_ack_settle_us != 0 ? FLAGS_rdma_brpc_ack_settle_us : -1;
    // The validator refuses a bad name when parsed; a program may still
    // assign FLAGS_rdma_dialect directly. -1 is refused below, with the rest.
    std::string why;
    o.dialect = RdmaDialectByName(FLAGS_rdma_dialect, &why);
    if (o.dialect < 0) refused = "--rdma_dialect=" + FLAGS_rdma_dialect + ": " + why;
    init_rc = rrpc_rdma_global_init(&o);
    // Someone (the application, through the C API) started it first: their
    // settings stand, which is what they asked for.
    if (init_rc == -EALREADY) init_rc = 0;
  });
  if (init_rc == 0) return 0;
  std::string text;
  if (init_rc == -RRPC_ENORDMA) {
    text = std::string("use_rdma=true, but ") + rrpc_strerror(init_rc);
  } else {
    text = "cannot start the RDMA runtime: " +
           (refused.empty() ? std::string(rrpc_strerror(init_rc)) + " (" + rrpc_err_name(init_rc) + ")"
                            : refused);
  }
  LOG(ERROR) << text;
  if (why != nullptr) *why = text;
  return -1;
}

}  // namespace detail
}  // namespace rrpc
