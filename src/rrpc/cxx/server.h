// rrpc/cxx/server.h - rrpc::Server, serving google::protobuf::Service
// implementations over baidu_std through the C server (rrpc/server.h).
//
// Each method of each added service is registered under the service's full
// name (package.Service) and the method name, as brpc's baidu_std
// dispatches, so brpc clients can call it. A service method runs on an rrpc
// event loop (or a worker pool with handlers_in_pool); it may call
// done->Run() at once or later from any thread, exactly once.
//
// A method that throws: the client gets EINTERNAL with the exception's
// text (nothing unwinds into the C core). rrpc cannot tell whether the method
// kept `done`, so it keeps the call record until done->Run() (which then
// sends nothing); a method that throws and never runs done leaks that record.
// Join() does not wait for such calls.
//
// Not thread-safe: configure, start, stop and join from one thread (Stop
// may also come from another thread, e.g. to end a Join()).
#ifndef RRPC_CXX_SERVER_H
#define RRPC_CXX_SERVER_H

#include <google/protobuf/service.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rrpc/cxx/controller.h"
#include "rrpc/cxx/endpoint.h"
#include "rrpc/server.h"

namespace rrpc {

namespace detail {
struct ServerCall;
}  // namespace detail

struct ServerOptions {
  // Defaults from the flags named below.
  ServerOptions();

  // Offer RDMA (SMC-R handshake); clients that do not ask are served over
  // TCP. In a build without RDMA, Start fails and logs how to build with it.
  bool use_rdma = false;
  // Event-loop threads of this server; 0 = share the process-wide loops
  // (--event_dispatcher_num of them, default one per CPU).
  int num_threads;
  // Kept for compatibility: methods run on a worker pool by default (they
  // may block and call other services synchronously). Default
  // --usercode_in_pthread.
  bool handlers_in_pool;
  // Worker pool size; 0 = the CPU count, at least 4. Default
  // --usercode_pool_threads.
  int pool_threads;
  // Largest request body accepted. Default --max_body_size.
  size_t max_body_size;
  // Run methods on the loop thread that read the request: the fastest mode,
  // for methods that never block (a synchronous call from one fails with
  // EDEADLK). Default --usercode_in_loop.
  bool handlers_in_loop;
  // Requests waiting for a pool thread, at most; one more fails with
  // EOVERCROWDED. 0 = 65536. Default --usercode_queue_max.
  int pool_queue_max;
  // A connection that reads and writes nothing for this many seconds is
  // closed; <= 0 = never (brpc's meaning). Default --rrpc_idle_timeout_second.
  int idle_timeout_sec;
  // Requests running at once; one more fails at once with ELIMIT (2004);
  // 0 = no limit. Default --rrpc_max_concurrency. Per method: MaxConcurrencyOf.
  int max_concurrency;
  // A pool thread that takes a request while more wait leaves them to
  // itself; if none is taken for this long (its handler blocked), an idle
  // thread is woken for them. 0 = 1000 us; negative = wake the next thread
  // at once. Default --rrpc_pool_rescue_us (docs/threads.md).
  int pool_rescue_us;
  // true: pool threads run under SCHED_BATCH - a woken one does not preempt
  // a busy loop, it runs when the loop sleeps or its slice ends (fewer
  // context switches when threads outnumber cores; not with busy-polling
  // loops, --rdma_use_polling). Default --rrpc_pool_batch_sched (false;
  // docs/threads.md).
  bool pool_batch_sched;
  // Positive: requests that arrive while pool threads are busy in short
  // handlers (averaging at most pool_short_task_us) wake no idle thread
  // while at most this many wait per busy one (hosts where idle workers
  // outnumber busy cores; not with busy-polling loops). 0 or negative =
  // off. Default --rrpc_pool_busy_queue (0; docs/threads.md).
  int pool_busy_queue;
  // 0 = 50 us; negative = never leave requests to busy threads. Default
  // --rrpc_pool_short_task_us.
  int pool_short_task_us;
  // Pool threads write their responses themselves, those to a connection
  // with more requests in handlers gathered over a run of requests; one
  // waits at most about this long behind a handler that blocks. 0 = 1000;
  // negative = the connection's loop writes them. Default
  // --rrpc_pool_write_flush_us (docs/threads.md).
  int pool_write_flush_us;
  // Answer HTTP on this port with the builtin pages (/status, /vars,
  // /connections, /rdma, /flags, /metrics); docs/observability.md.
  bool has_builtin_services = true;
};

enum ServiceOwnership {
  SERVER_OWNS_SERVICE,         // the Server deletes the service when it is destroyed
  SERVER_DOESNT_OWN_SERVICE,   // the service must outlive the Server
};

// Process-wide quit request, as brpc has it: the first call installs
// SIGINT/SIGTERM handlers; IsAskedToQuit() is true once one arrived (or
// AskToQuit() was called). Thread-safe.
bool IsAskedToQuit();
void AskToQuit();

class Server {
 public:
  Server();
  ~Server();  // Stop() and Join(), then delete the owned services
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // AddService - serve every method of `service`. Before Start only. 0, or -1
  // after logging why (nullptr, the same full name added twice, started).
  int AddService(google::protobuf::Service* service, ServiceOwnership ownership);

  // Start - listen on `port` (0 picks a free one, see listen_port()) or on
  // "ip:port" / ":port" / "[ipv6]:port" / "unix:/path" (see rrpc_server_start).
  // opts may be nullptr (defaults). 0, or -1 after
  // logging why (address in use, no services, use_rdma without RDMA, ...).
  int Start(int port, const ServerOptions* opts);
  int Start(const char* addr, const ServerOptions* opts);
  // brpc's form: Start(EndPoint(IP_ANY, port), ...) or a str2endpoint result.
  int Start(const EndPoint& point, const ServerOptions* opts);

  // MaxConcurrencyOf - the limit of one method ("package.Service.Method" or
  // "package.Service/Method"), 0 = none of its own; set it before Start.
  // Calls over it fail at once with ELIMIT (2004), as brpc's does.
  int& MaxConcurrencyOf(const std::string& full_method_name);

  // Stop - stop accepting; requests that arrive from now on get ELOGOFF
  // (2003: not executed, retriable elsewhere); methods already running may
  // finish and their responses go out, for at most closewait_ms; then every
  // connection is closed (calls still pending then fail with ECLOSE at the
  // clients). Idempotent; any thread but an rrpc loop thread.
  int Stop(int closewait_ms = 0);
  // Join - wait until Stop() was called (by any thread) and every method
  // that is still running has called done->Run() and returned. After Join
  // the server may be started again. 0.
  int Join();
  // RunUntilAskedToQuit - block until SIGINT/SIGTERM (or AskToQuit()), then
  // Stop() and Join().
  void RunUntilAskedToQuit();

  // The bound port, or -1 when not started.
  int listen_port() const;
  // true between a successful Start and Stop.
  bool IsRunning() const;

  // The C server, borrowed (nullptr when not started).
  rrpc_server* c_server() { return server_; }

 private:
  friend struct detail::ServerCall;
  struct Method;
  struct ServiceEntry {
    google::protobuf::Service* service;
    ServiceOwnership ownership;
  };

  void CallEnded();
  int ApplyMethodLimits(rrpc_server* s);

  std::vector<ServiceEntry> services_;
  std::vector<std::unique_ptr<Method>> methods_;  // borrowed by the C server as handler args
  std::vector<std::pair<std::string, std::unique_ptr<int>>> method_limits_;  // MaxConcurrencyOf
  rrpc_server* server_ = nullptr;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;  // guarded by mu_
  // Calls whose method has not both returned and called done->Run().
  std::atomic<long> active_calls_{0};
  std::atomic<bool> joining_{false};  // a Join waits for active_calls_ to reach 0
};

}  // namespace rrpc

#endif  // RRPC_CXX_SERVER_H
