// channel.cc - rrpc::Channel: protobuf calls over the C channel. Owns the C
// channel and, per async call, a small record that lives from CallMethod to
// the completion callback.
#include "rrpc/cxx/channel.h"

#include <glog/logging.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <cstring>
#include <string>
#include <typeinfo>
#include <vector>

#include "rrpc/cxx/detail.h"
#include "rrpc/cxx/flag_value.h"
#include "rrpc/errors.h"
#include "rrpc/rdma.h"

namespace rrpc {

ChannelOptions::ChannelOptions()
    : max_body_size(
          static_cast<size_t>(detail::FlagUint64("max_body_size", detail::kDefaultMaxBodySize))) {}

// The prepared methods of one channel. A call looks in one of kSlots
// direct-mapped slots (a load and a compare); a miss prepares the method
// under the mutex, keeps it until the channel goes, and points the slot at
// it. Entries are never freed before the channel, so a slot read without
// the mutex always points at a live entry; there is one per distinct
// method called, which a program's descriptors bound.
class Channel::MethodCache {
 public:
  ~MethodCache() {
    for (Entry* e : all_) {
      rrpc_method_free(e->m);
      delete e;
    }
  }

  // The prepared method, or nullptr when it cannot be made (out of memory,
  // a name over RRPC_METHOD_NAME_MAX): the caller then passes the names.
  const rrpc_method* Get(const google::protobuf::MethodDescriptor* md) {
    std::atomic<Entry*>& slot = slots_[Slot(md)];
    Entry* e = slot.load(std::memory_order_acquire);
    if (e != nullptr && e->key == md && e->method_len == md->name().size() &&
        e->service_len == md->service()->full_name().size())
      return e->m;
    return Miss(md, &slot);
  }

 private:
  struct Entry {
    const google::protobuf::MethodDescriptor* key;
    size_t service_len, method_len;
    rrpc_method* m;
  };
  static constexpr size_t kSlots = 8;

  static size_t Slot(const google::protobuf::MethodDescriptor* md) {
    uintptr_t a = reinterpret_cast<uintptr_t>(md);
    return ((a >> 4) ^ (a >> 10)) % kSlots;
  }

  const rrpc_method* Miss(const google::protobuf::MethodDescriptor* md, std::atomic<Entry*>* slot) {
    const std::string& service = md->service()->full_name();
    const std::string& method = md->name();
    std::lock_guard<std::mutex> lk(mu_);
    for (Entry* e : all_) {
      if (e->key == md && service == rrpc_method_service(e->m) && method == rrpc_method_name(e->m)) {
        slot->store(e, std::memory_order_release);
        return e->m;
      }
    }
    rrpc_method* m = nullptr;
    if (rrpc_method_new(service.c_str(), method.c_str(), &m) != 0) return nullptr;
    Entry* e = new (std::nothrow) Entry{md, service.size(), method.size(), m};
    if (e == nullptr) {
      rrpc_method_free(m);
      return nullptr;
    }
    all_.push_back(e);
    slot->store(e, std::memory_order_release);
    return m;
  }

  std::atomic<Entry*> slots_[kSlots] = {};
  std::mutex mu_;
  std::vector<Entry*> all_;  // guarded by mu_
};

Channel::Channel() : methods_(new MethodCache) {
  detail::InitRuntimeOnce();
  detail::ApplyLimitFlags();
}

Channel::~Channel() {
  if (ch_ != nullptr) rrpc_channel_free(ch_);
}

int Channel::Init(const char* ip, int port, const ChannelOptions* opts) {
  std::string host = ip ? ip : "";
  // An IPv6 literal goes in brackets, so its colons are not the port's.
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  std::string addr = host + ":" + std::to_string(port);
  return Init(addr.c_str(), opts);
}

namespace {

// The C retry hook over a RetryPolicy. Runs on a loop thread; nothing may
// unwind into C.
int CallRetryPolicy(void* arg, int code, int responded) {
  try {
    return static_cast<const RetryPolicy*>(arg)->DoRetry(-code, responded != 0) ? 1 : 0;
  } catch (...) {
    LOG(ERROR) << "a RetryPolicy threw; not retrying";
    return 0;
  }
}

int32_t FlagSecondsAsMs(const char* name, int32_t fallback_s) {
  int64_t s = detail::FlagInt64(name, fallback_s);
  return s > 0 && s < INT32_MAX / 1000 ? static_cast<int32_t>(s * 1000) : 0;
}

}  // namespace

bool ParseConnectionType(const std::string& name, ConnectionType* out) {
  if (name == "single" || name.empty()) {
    *out = CONNECTION_TYPE_SINGLE;
  } else if (name == "pooled") {
    *out = CONNECTION_TYPE_POOLED;
  } else if (name == "short") {
    *out = CONNECTION_TYPE_SHORT;
  } else {
    return false;
  }
  return true;
}

int Channel::Refuse(const std::string& why) {
  LOG(ERROR) << why;
  init_error_ = why;
  return -1;
}

int Channel::Prepare(const char* what, const ChannelOptions* opts, rrpc_channel_options* c) {
  if (ch_ != nullptr) return Refuse("rrpc::Channel::Init called twice");
  init_error_.clear();
  if (what == nullptr) return Refuse("rrpc::Channel::Init: no server address");
  ChannelOptions o = opts ? *opts : ChannelOptions();
  // PrepareRdma logs its reason; kept here too.
  if (o.use_rdma && detail::PrepareRdma(&init_error_) != 0) return -1;
  if (!o.rdma_dialect.empty() && o.rdma_dialect != "imm" && o.rdma_dialect != "brpc" && o.rdma_dialect != "cursor") {
    return Refuse("rrpc::Channel::Init: rdma_dialect \"" + o.rdma_dialect + "\": unknown (imm, cursor or brpc)");
  }
  if (!o.connection_type.unknown_name().empty())
    return Refuse("rrpc::Channel::Init: connection_type \"" + o.connection_type.unknown_name() +
                  "\": unknown (single, pooled or short)");
  if (!o.protocol.empty() && o.protocol != "baidu_std")
    return Refuse("rrpc::Channel::Init: protocol \"" + o.protocol +
                  "\": rrpc speaks baidu_std only (docs/from-brpc.md)");
  detail::ApplyLoopFlags();
  detail::ApplyObservabilityFlags();
  *c = rrpc_channel_options{};
  c->timeout_ms = o.timeout_ms > 0 ? o.timeout_ms : -1;
  c->connect_timeout_ms = o.connect_timeout_ms > 0 ? o.connect_timeout_ms : 0;
  c->max_retry = o.max_retry > 0 ? o.max_retry : -1;
  c->use_rdma = o.use_rdma ? 1 : 0;
  c->rdma_dialect = o.rdma_dialect == "brpc" ? RRPC_RDMA_DIALECT_BRPC
                    : o.rdma_dialect == "imm" ? RRPC_RDMA_DIALECT_IMM
                    : o.rdma_dialect == "cursor" ? RRPC_RDMA_DIALECT_CURSOR
                                              : 0;
  c->max_body_size = o.max_body_size;
  c->backup_request_ms = o.backup_request_ms > 0 ? o.backup_request_ms : 0;
  if (o.retry_policy != nullptr) {
    c->retry_policy = CallRetryPolicy;
    c->retry_policy_arg = const_cast<RetryPolicy*>(o.retry_policy);
  }
  c->connection_type = static_cast<int>(o.connection_type);
  c->max_connection_pool_size = static_cast<int>(
      detail::FlagInt64("max_connection_pool_size", detail::kDefaultMaxConnectionPoolSize));
  c->health_check_interval_ms = FlagSecondsAsMs("health_check_interval", detail::kDefaultHealthCheckIntervalS);
  c->ns_access_interval_ms = FlagSecondsAsMs("ns_access_interval", detail::kDefaultNsAccessIntervalS);
  return 0;
}

int Channel::Init(const char* server_addr, const ChannelOptions* opts) {
  rrpc_channel_options c;
  if (Prepare(server_addr, opts, &c) != 0) return -1;
  int rc = rrpc_channel_new(server_addr, &c, &ch_);
  if (rc != 0) {
    ch_ = nullptr;
    return Refuse("rrpc::Channel::Init(\"" + std::string(server_addr) + "\"): " + rrpc_strerror(rc));
  }
  return 0;
}

int Channel::Init(const char* naming_url, const char* load_balancer_name, const ChannelOptions* opts) {
  // brpc: no load balancer and no naming scheme is the single-server form.
  bool no_lb = load_balancer_name == nullptr || load_balancer_name[0] == '\0';
  if (no_lb && naming_url != nullptr && std::strstr(naming_url, "://") == nullptr)
    return Init(naming_url, opts);
  rrpc_channel_options c;
  if (Prepare(naming_url, opts, &c) != 0) return -1;
  int rc = rrpc_channel_new_lb(naming_url, load_balancer_name, &c, &ch_);
  if (rc != 0) {
    ch_ = nullptr;
    return Refuse("rrpc::Channel::Init(\"" + std::string(naming_url) + "\", \"" +
                  (load_balancer_name ? load_balancer_name : "") + "\"): " + rrpc_strerror(rc));
  }
  return 0;
}

namespace {

// The request goes to the C call SHARED and may be dropped as soon as the
// call returns, so each thread keeps one scratch iobuf for it.
// The request's bytes are copied on (small) or shared into the frame, so one
// scratch per thread does; reuse keeps its block when the frame copied the
// bytes, so a call neither mallocs nor frees one.
rrpc_iobuf* ScratchRequest() {
  thread_local IOBuf scratch;
  rrpc_iobuf_reuse(scratch.c_iobuf());
  return scratch.c_iobuf();
}

// After the C call completed: parse the response unless the call failed.
void ParseResponse(Controller* cntl, const rrpc_iobuf* bytes,
                   google::protobuf::Message* response) {
  if (cntl->Failed() || response == nullptr) return;
  if (!detail::ParseFromIOBuf(response, bytes)) {
    cntl->SetFailed(ERESPONSE, "fail to parse the response as %s",
                    response->GetDescriptor()->full_name().c_str());
  }
}

// The caller's controller as ours. Its exact class, the usual case, is told
// by comparing types (a few instructions); dynamic_cast walks the class
// hierarchy at ~85 instructions a call, so only a class derived from ours,
// or another class (nullptr), goes that way.
Controller* AsController(google::protobuf::RpcController* base) {
  if (base != nullptr && typeid(*base) == typeid(Controller)) return static_cast<Controller*>(base);
  return dynamic_cast<Controller*>(base);
}

void RunDone(google::protobuf::Closure* done) {
  try {
    done->Run();
  } catch (const std::exception& e) {
    LOG(ERROR) << "a done closure threw: " << e.what();
  } catch (...) {
    LOG(ERROR) << "a done closure threw";
  }
}

// The call on `cntl` ended: run `done` (if any), then wake the joiners of
// its id (call_id.h) - after done, which may have deleted cntl.
void EndCall(Controller* cntl, google::protobuf::Closure* done) {
  uint64_t id = detail::EndCallIdOfCall(cntl);
  if (done != nullptr) RunDone(done);
  if (id != 0) detail::EndCallId(id);
}

}  // namespace

namespace detail {

// One async call in flight. Owned by its Controller (Controller::async_),
// which carries one call at a time: made on its first async call, reused by
// the next ones, deleted with the Controller.
struct AsyncCall {
  Controller* cntl;                     // the owner
  google::protobuf::Message* response;  // borrowed from the caller
  google::protobuf::Closure* done;      // borrowed; runs once
  IOBuf response_bytes;                 // owned; empty between calls
};

void DeleteAsyncCall(AsyncCall* call) { delete call; }

}  // namespace detail

namespace {

using detail::AsyncCall;

// The C completion: runs exactly once on a loop thread. Nothing may unwind
// into C from here.
void OnAsyncDone(void* arg, rrpc_controller* /*c*/) {
  auto* call = static_cast<AsyncCall*>(arg);
  try {
    ParseResponse(call->cntl, call->response_bytes.c_iobuf(), call->response);
  } catch (const std::exception& e) {
    call->cntl->SetFailed(ERESPONSE, "parsing the response threw: %s", e.what());
  } catch (...) {
    call->cntl->SetFailed(ERESPONSE, "parsing the response threw");
  }
  // The record stays with the controller; `done` may reuse or delete both.
  google::protobuf::Closure* done = call->done;
  call->done = nullptr;
  call->response_bytes.clear();
  EndCall(call->cntl, done);
}

}  // namespace

void Channel::CallMethod(const google::protobuf::MethodDescriptor* method,
                         google::protobuf::RpcController* controller_base,
                         const google::protobuf::Message* request,
                         google::protobuf::Message* response, google::protobuf::Closure* done) {
  Controller* cntl = AsController(controller_base);
  if (cntl == nullptr) {
    LOG(ERROR) << "rrpc::Channel::CallMethod needs an rrpc::Controller";
    if (controller_base != nullptr) controller_base->SetFailed("not an rrpc::Controller");
    if (done != nullptr) RunDone(done);
    return;
  }
  detail::BeginCallId(cntl);
  if (ch_ == nullptr) {
    cntl->SetFailed(ENOTREADY, "rrpc::Channel is not initialized");
    EndCall(cntl, done);
    return;
  }

  rrpc_iobuf* req = ScratchRequest();
  if (request != nullptr) {
    std::string why;
    int rc = detail::SerializeToIOBuf(*request, req, &why);
    if (rc != 0) {
      cntl->SetFailed(rc == -ENOMEM ? ENOMEM : EREQUEST, "cannot serialize the request %s: %s",
                      request->GetDescriptor()->full_name().c_str(), why.c_str());
      rrpc_iobuf_clear(req);
      EndCall(cntl, done);
      return;
    }
  }
  const rrpc_method* prepared = methods_->Get(method);
  // The C call: through the prepared method, or with the names when it
  // could not be prepared.
  auto call = [&](rrpc_iobuf* resp, rrpc_call_done cb, void* arg) {
    if (prepared != nullptr)
      return rrpc_channel_call_method(ch_, prepared, cntl->c_controller(), req, resp, cb, arg);
    return rrpc_channel_call(ch_, method->service()->full_name().c_str(), method->name().c_str(),
                             cntl->c_controller(), req, resp, cb, arg);
  };

  if (done == nullptr) {
    thread_local IOBuf response_bytes;
    response_bytes.clear();
    // The code is also in the controller, which ParseResponse reads.
    (void)call(response ? response_bytes.c_iobuf() : nullptr, nullptr, nullptr);
    rrpc_iobuf_reuse(req);
    ParseResponse(cntl, response_bytes.c_iobuf(), response);
    response_bytes.clear();
    EndCall(cntl, nullptr);
    return;
  }

  if (cntl->async_ == nullptr) cntl->async_ = new AsyncCall{cntl, nullptr, nullptr, IOBuf()};
  AsyncCall* async = cntl->async_;
  async->response = response;
  async->done = done;
  int rc = call(response ? async->response_bytes.c_iobuf() : nullptr, OnAsyncDone, async);
  rrpc_iobuf_reuse(req);
  if (rc != 0) {
    // The C channel refused the call outright, so its callback will not run.
    async->done = nullptr;
    if (!cntl->Failed()) cntl->SetFailed(-rc, "%s", rrpc_strerror(rc));
    EndCall(cntl, done);
  }
}

}  // namespace rrpc
