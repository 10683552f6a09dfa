// server.cc - rrpc::Server: protobuf services on the C server, one C method
// handler per protobuf method; and the process-wide quit signal. Owns the C
// server, the method table the C server borrows, and the services added
// with SERVER_OWNS_SERVICE.
#include "rrpc/cxx/server.h"

#include <glog/logging.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <semaphore.h>
#include <signal.h>

#include <cerrno>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "rrpc/cxx/controller.h"
#include "rrpc/cxx/detail.h"
#include "rrpc/cxx/flag_value.h"
#include "rrpc/cxx/flags.h"
#include "rrpc/cxx/iobuf.h"
#include "rrpc/errors.h"

namespace rrpc {

// ---- quit signal ---------------------------------------------------------------

namespace {
std::atomic<bool> g_quit{false};  // lock-free, so the signal handler may set it
sem_t g_quit_sem;                 // posted once per quit request; sem_post is async-signal-safe
std::once_flag g_quit_once;

void OnQuitSignal(int sig) {
  g_quit.store(true);
  sem_post(&g_quit_sem);
  // A second Ctrl-C kills the process even if the shutdown hangs.
  signal(sig, SIG_DFL);
}

void InstallQuitHandlers() {
  std::call_once(g_quit_once, [] {
    sem_init(&g_quit_sem, 0, 0);
    struct sigaction sa = {};
    sa.sa_handler = OnQuitSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  });
}

void WaitForQuit() {
  InstallQuitHandlers();
  while (!g_quit.load()) {
    if (sem_wait(&g_quit_sem) != 0 && errno != EINTR) break;
  }
  sem_post(&g_quit_sem);  // pass the wake-up on to any other waiter
}
}  // namespace

bool IsAskedToQuit() {
  InstallQuitHandlers();
  return g_quit.load();
}

void AskToQuit() {
  InstallQuitHandlers();
  g_quit.store(true);
  sem_post(&g_quit_sem);
}

// ---- options -------------------------------------------------------------------

ServerOptions::ServerOptions()
    : num_threads(0),
      handlers_in_pool(detail::FlagBool("usercode_in_pthread", detail::kDefaultUsercodeInPthread)),
      pool_threads(FLAGS_usercode_pool_threads),
      max_body_size(
          static_cast<size_t>(detail::FlagUint64("max_body_size", detail::kDefaultMaxBodySize))),
      handlers_in_loop(FLAGS_usercode_in_loop),
      pool_queue_max(FLAGS_usercode_queue_max),
      idle_timeout_sec(FLAGS_rrpc_idle_timeout_second),
      max_concurrency(FLAGS_rrpc_max_concurrency),
      pool_rescue_us(FLAGS_rrpc_pool_rescue_us),
      pool_batch_sched(FLAGS_rrpc_pool_batch_sched),
      pool_busy_queue(FLAGS_rrpc_pool_busy_queue),
      pool_short_task_us(FLAGS_rrpc_pool_short_task_us),
      pool_write_flush_us(FLAGS_rrpc_pool_write_flush_us) {}

// ---- one served call -----------------------------------------------------------

// What the C server borrows as a handler's arg: one protobuf method.
struct Server::Method {
  Method(Server* srv, google::protobuf::Service* svc, const google::protobuf::MethodDescriptor* d,
         const google::protobuf::Message* req, const google::protobuf::Message* resp)
      : server(srv), service(svc), md(d), request_prototype(req), response_prototype(resp) {}
  Server* server;
  google::protobuf::Service* service;
  const google::protobuf::MethodDescriptor* md;
  const google::protobuf::Message* request_prototype;   // borrowed from the service
  const google::protobuf::Message* response_prototype;  // borrowed from the service
  // Finished calls of this method with their request and response
  // messages, reused by the next calls (no allocation of the call and its
  // two messages per call). At most kSpareCalls; freed with the method.
  static constexpr size_t kSpareCalls = 64;
  // One spare taken and given back without the mutex (an atomic exchange
  // each way): with one call at a time per method, the usual light load,
  // a call costs no lock pair here. The vector holds the rest.
  std::atomic<detail::ServerCall*> one_spare{nullptr};
  std::mutex spare_mu;
  std::vector<detail::ServerCall*> spare;
  ~Method();
};

namespace detail {

// One call from the C handler to the response. It is also the `done`
// closure given to the service method. Two references: the handler's (until
// the method returns) and done's (until done->Run()), so neither the method
// returning early nor done running early frees it under the other.
struct ServerCall final : google::protobuf::Closure {
  ServerCall(Server::Method* m, rrpc_server_call* c)
      : method(m),
        call(c),
        cntl(Controller::Borrow{}, rrpc_server_call_controller(c)),
        request(m->request_prototype->New()),
        response(m->response_prototype->New()) {
    m->server->active_calls_.fetch_add(1);
  }
  ~ServerCall() override {
    delete request;
    delete response;
    // Last: after this the server may be destroyed.
    if (!abandoned) method->server->CallEnded();
  }

  // A spare call of the method taken for the C call `c`: as if new.
  void Reuse(rrpc_server_call* c) {
    call = c;
    cntl.Rebind(rrpc_server_call_controller(c));  // borrowed: touches neither the old C call nor c
    request->Clear();
    response->Clear();
    refs.store(2);
    responded.store(false);
    abandoned = false;
    method->server->active_calls_.fetch_add(1);
  }

  static ServerCall* TakeSpare(Server::Method* m) {
    // exchange cannot suffer ABA: it takes whatever is there whole.
    ServerCall* one = m->one_spare.exchange(nullptr, std::memory_order_acquire);
    if (one != nullptr) return one;
    std::lock_guard<std::mutex> lk(m->spare_mu);
    if (m->spare.empty()) return nullptr;
    ServerCall* sc = m->spare.back();
    m->spare.pop_back();
    return sc;
  }

  // The last reference went: back to the method's spares, or freed. An
  // abandoned call is not counted any more and is freed as before.
  void Release() {
    if (abandoned) {
      delete this;
      return;
    }
    Server::Method* m = method;
    ServerCall* none = nullptr;
    bool kept = m->one_spare.compare_exchange_strong(none, this, std::memory_order_release,
                                                     std::memory_order_relaxed);
    if (!kept) {
      try {
        std::lock_guard<std::mutex> lk(m->spare_mu);
        if (m->spare.size() < Server::Method::kSpareCalls) {
          m->spare.push_back(this);
          kept = true;
        }
      } catch (...) {  // push_back's allocation
      }
    }
    if (!kept) {
      delete this;  // counts the end itself
      return;
    }
    // Not `this` any more: another call may be using it already. Last:
    // after this the server may be destroyed.
    m->server->CallEnded();
  }

  // The C handler (rrpc_handler_fn). Runs on a loop or pool thread.
  static void Handle(void* arg, rrpc_server_call* c) {
    auto* m = static_cast<Server::Method*>(arg);
    ServerCall* sc = nullptr;
    try {
      sc = TakeSpare(m);
      if (sc != nullptr) sc->Reuse(c);
      else sc = new ServerCall(m, c);
    } catch (...) {
      rrpc_controller_set_failed(rrpc_server_call_controller(c), RRPC_EINTERNAL,
                                 "out of memory");
      rrpc_server_call_respond(c, nullptr);
      return;
    }
    sc->Dispatch();
  }

  void Dispatch() {
    bool parsed = false;
    try {
      parsed = ParseFromIOBuf(request, rrpc_server_call_request(call));
    } catch (...) {
    }
    if (!parsed) {
      cntl.SetFailed(EREQUEST, "fail to parse the request as %s",
                     request->GetDescriptor()->full_name().c_str());
      Run();
      Unref();
      return;
    }
    try {
      method->service->CallMethod(method->md, &cntl, request, response, this);
    } catch (const std::exception& e) {
      Abandon(e.what());
    } catch (...) {
      Abandon("unknown exception");
    }
    Unref();
  }

  // The method threw. The client gets EINTERNAL (unless done already ran).
  // Whether the method kept `done` is unknown: freeing the call could make a
  // later done->Run() touch freed memory, so the call is kept until done
  // runs (leaked if it never does) but no longer counted as active, so
  // Join() does not wait for it.
  void Abandon(const char* what) {
    Respond(what);
    abandoned = true;
    method->server->CallEnded();
  }

  // done->Run(): respond with the response (or the failure) once.
  void Run() override {
    Respond(nullptr);
    Unref();
  }

  // Hand the response to the C server, once: either done->Run() or an
  // exception out of the method (thrown = its what()) gets here first.
  void Respond(const char* thrown) {
    if (responded.exchange(true)) {
      if (thrown != nullptr) {
        LOG(ERROR) << method->md->full_name() << " threw after done->Run(): " << thrown;
      }
      return;
    }
    rrpc_iobuf* out = nullptr;
    try {
      if (thrown != nullptr) {
        cntl.SetFailed(EINTERNAL, "%s threw: %s", method->md->full_name().c_str(), thrown);
      } else if (!cntl.Failed()) {
        // The response is copied on (small) or SHARED into the C call's
        // frame, so one scratch iobuf per thread does; reuse keeps its
        // block when it was copied (no malloc/free per call). Made inside
        // the try: its first use allocates.
        thread_local IOBuf scratch;
        rrpc_iobuf_reuse(scratch.c_iobuf());
        std::string why;
        int rc = SerializeToIOBuf(*response, scratch.c_iobuf(), &why);
        if (rc == 0) {
          out = scratch.c_iobuf();
        } else {
          cntl.SetFailed(rc == -EINVAL ? ERESPONSE : EINTERNAL, "cannot serialize the response %s: %s",
                         response->GetDescriptor()->full_name().c_str(), why.c_str());
        }
      }
    } catch (...) {
      out = nullptr;
      cntl.SetFailed(EINTERNAL, "out of memory while serializing the response");
    }
    if (cntl.after_rpc_resp_fn_) {
      // The response leaves now; the C call (controller, request) is kept
      // for the function and released after it.
      rrpc_server_call_respond_hold(call, out);
      if (out != nullptr) rrpc_iobuf_reuse(out);
      RunAfterRpcResp();
      rrpc_server_call_release(call);
    } else {
      rrpc_server_call_respond(call, out);  // releases the C call and controller
      if (out != nullptr) rrpc_iobuf_reuse(out);
    }
    call = nullptr;
    try {
      cntl.RunCancelCallback();
    } catch (...) {
      LOG(ERROR) << "a NotifyOnCancel closure threw";
    }
  }

  void Unref() {
    if (refs.fetch_sub(1) == 1) Release();
  }

  // The method's Controller::set_after_rpc_resp_fn, once; nothing unwinds
  // into the C core from here.
  void RunAfterRpcResp() {
    Controller::AfterRpcRespFnType fn;
    fn.swap(cntl.after_rpc_resp_fn_);
    try {
      fn(&cntl, request, response);
    } catch (const std::exception& e) {
      LOG(ERROR) << method->md->full_name() << ": after_rpc_resp_fn threw: " << e.what();
    } catch (...) {
      LOG(ERROR) << method->md->full_name() << ": after_rpc_resp_fn threw";
    }
  }

  Server::Method* method;
  rrpc_server_call* call;  // owned by rrpc until respond
  Controller cntl;         // borrows the call's C controller
  google::protobuf::Message* request;   // owned
  google::protobuf::Message* response;  // owned
  std::atomic<int> refs{2};
  std::atomic<bool> responded{false};
  bool abandoned = false;  // written before the handler's Unref, read after the last
};

}  // namespace detail

// Spares are finished calls: freed without counting an end again.
Server::Method::~Method() {
  if (detail::ServerCall* one = one_spare.load()) {
    one->abandoned = true;
    delete one;
  }
  for (detail::ServerCall* sc : spare) {
    sc->abandoned = true;
    delete sc;
  }
}

// ---- server ----------------------------------------------------------------------

Server::Server() { detail::InitRuntimeOnce(); }

Server::~Server() {
  Stop(0);
  Join();
  for (ServiceEntry& e : services_) {
    if (e.ownership == SERVER_OWNS_SERVICE) delete e.service;
  }
}

int Server::AddService(google::protobuf::Service* service, ServiceOwnership ownership) {
  if (service == nullptr) {
    LOG(ERROR) << "rrpc::Server::AddService: service is nullptr";
    return -1;
  }
  if (server_ != nullptr) {
    LOG(ERROR) << "rrpc::Server::AddService: the server is already started";
    return -1;
  }
  const google::protobuf::ServiceDescriptor* sd = service->GetDescriptor();
  for (const ServiceEntry& e : services_) {
    if (e.service->GetDescriptor()->full_name() == sd->full_name()) {
      LOG(ERROR) << "rrpc::Server::AddService: " << sd->full_name() << " was already added";
      return -1;
    }
  }
  services_.push_back({service, ownership});
  for (int i = 0; i < sd->method_count(); i++) {
    const google::protobuf::MethodDescriptor* md = sd->method(i);
    methods_.push_back(std::unique_ptr<Method>(new Method(
        this, service, md, &service->GetRequestPrototype(md), &service->GetResponsePrototype(md))));
  }
  return 0;
}

int Server::Start(int port, const ServerOptions* opts) {
  if (port < 0 || port > 65535) {
    LOG(ERROR) << "rrpc::Server::Start: bad port " << port;
    return -1;
  }
  return Start(std::to_string(port).c_str(), opts);
}

int Server::Start(const EndPoint& point, const ServerOptions* opts) {
  return Start(endpoint2str(point).c_str(), opts);
}

int Server::Start(const char* addr, const ServerOptions* opts) {
  if (server_ != nullptr) {
    LOG(ERROR) << "rrpc::Server::Start: already started";
    return -1;
  }
  if (addr == nullptr) {
    LOG(ERROR) << "rrpc::Server::Start: no address";
    return -1;
  }
  ServerOptions o = opts ? *opts : ServerOptions();
  if (o.use_rdma && detail::PrepareRdma() != 0) return -1;
  // brpc's flag: SIGTERM becomes a quit request from the start, not only
  // once the program waits in RunUntilAskedToQuit or asks IsAskedToQuit.
  if (detail::FlagBool("graceful_quit_on_sigterm", false)) InstallQuitHandlers();
  detail::ApplyLoopFlags();
  detail::ApplyObservabilityFlags();

  rrpc_server_options c{};
  c.no_builtin_services = o.has_builtin_services ? 0 : 1;
  c.num_threads = o.num_threads;
  c.use_rdma = o.use_rdma ? 1 : 0;
  c.handlers_in_pool = o.handlers_in_pool ? 1 : 0;
  c.pool_threads = o.pool_threads;
  c.max_body_size = o.max_body_size;
  c.handlers_in_loop = o.handlers_in_loop ? 1 : 0;
  c.pool_queue_max = o.pool_queue_max;
  c.idle_timeout_s = o.idle_timeout_sec > 0 ? o.idle_timeout_sec : 0;
  c.max_concurrency = o.max_concurrency;
  c.pool_rescue_us = o.pool_rescue_us;
  c.pool_batch_sched = o.pool_batch_sched ? 1 : -1;
  c.pool_busy_queue = o.pool_busy_queue;
  c.pool_short_task_us = o.pool_short_task_us;
  c.pool_write_flush_us = o.pool_write_flush_us;
  detail::ApplyLimitFlags();
  rrpc_server* s = nullptr;
  int rc = rrpc_server_new(&c, &s);
  if (rc != 0) {
    LOG(ERROR) << "rrpc::Server::Start: " << rrpc_strerror(rc);
    return -1;
  }
  for (const std::unique_ptr<Method>& m : methods_) {
    rc = rrpc_server_add_method(s, m->md->service()->full_name().c_str(), m->md->name().c_str(),
                                &detail::ServerCall::Handle, m.get());
    if (rc != 0) {
      LOG(ERROR) << "rrpc::Server::Start: cannot add " << m->md->full_name() << ": "
                 << rrpc_strerror(rc);
      rrpc_server_free(s);
      return -1;
    }
  }
  if (ApplyMethodLimits(s) != 0) {
    rrpc_server_free(s);
    return -1;
  }
  rc = rrpc_server_start(s, addr);
  if (rc != 0) {
    LOG(ERROR) << "rrpc::Server::Start(\"" << addr << "\"): " << rrpc_strerror(rc);
    rrpc_server_free(s);
    return -1;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    server_ = s;
    stopped_ = false;
  }
  return 0;
}

int& Server::MaxConcurrencyOf(const std::string& full_method_name) {
  for (auto& e : method_limits_)
    if (e.first == full_method_name) return *e.second;
  method_limits_.emplace_back(full_method_name, std::make_unique<int>(0));
  return *method_limits_.back().second;
}

int Server::ApplyMethodLimits(rrpc_server* s) {
  for (const auto& e : method_limits_) {
    size_t cut = e.first.find_last_of("./");
    int rc = cut == std::string::npos
                 ? -ENOENT
                 : rrpc_server_set_method_max_concurrency(s, e.first.substr(0, cut).c_str(),
                                                          e.first.substr(cut + 1).c_str(), *e.second);
    if (rc != 0) {
      LOG(ERROR) << "rrpc::Server::Start: MaxConcurrencyOf(\"" << e.first << "\"): " << rrpc_strerror(rc);
      return -1;
    }
  }
  return 0;
}

int Server::Stop(int closewait_ms) {
  rrpc_server* s;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (server_ == nullptr || stopped_) return 0;
    s = server_;
  }
  // Outside mu_: stopping waits for loop threads, which may be ending calls
  // (CallEnded takes mu_).
  rrpc_server_shutdown(s, closewait_ms);
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  return 0;
}

int Server::Join() {
  rrpc_server* s;
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (server_ == nullptr) return 0;
    cv_.wait(lk, [this] { return stopped_; });
    s = server_;
  }
  // Waits until every call the C server handed out was responded to.
  rrpc_server_free(s);
  {
    std::unique_lock<std::mutex> lk(mu_);
    // ...and until the methods that responded early have returned too.
    joining_.store(true);
    cv_.wait(lk, [this] { return active_calls_.load() == 0; });
    joining_.store(false);
    server_ = nullptr;
  }
  return 0;
}

void Server::CallEnded() {
  // Lock and wake only when a Join is waiting: with one call in flight the
  // count reaches zero on every call. Both atomics are seq_cst: if this load
  // misses Join's store, Join's later load of the count sees this decrement.
  if (active_calls_.fetch_sub(1) == 1 && joining_.load()) {
    std::lock_guard<std::mutex> lk(mu_);
    cv_.notify_all();
  }
}

void Server::RunUntilAskedToQuit() {
  WaitForQuit();
  Stop(0);
  Join();
}

int Server::listen_port() const {
  std::lock_guard<std::mutex> lk(mu_);
  if (server_ == nullptr) return -1;
  int port = rrpc_server_port(server_);
  return port < 0 ? -1 : port;
}

bool Server::IsRunning() const {
  std::lock_guard<std::mutex> lk(mu_);
  return server_ != nullptr && !stopped_;
}

}  // namespace rrpc
