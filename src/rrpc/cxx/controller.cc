// controller.cc - rrpc::Controller over the C controller (rrpc/controller.h).
// Owns the C controller on the client side, borrows the call's on the server.
#include "rrpc/cxx/controller.h"

#include <cstdarg>
#include <cstdio>
#include <new>

namespace rrpc {

namespace {
rrpc_controller* NewCController() {
  rrpc_controller* c = nullptr;
  if (rrpc_controller_new(&c) != 0) throw std::bad_alloc();
  return c;
}
}  // namespace

Controller::Controller()
    : c_(NewCController()),
      owned_(true),
      request_attachment_(IOBuf::Borrow{}, rrpc_controller_request_attachment(c_)),
      response_attachment_(IOBuf::Borrow{}, rrpc_controller_response_attachment(c_)) {}

Controller::Controller(Borrow, rrpc_controller* c)
    : c_(c),
      owned_(false),
      request_attachment_(IOBuf::Borrow{}, rrpc_controller_request_attachment(c)),
      response_attachment_(IOBuf::Borrow{}, rrpc_controller_response_attachment(c)) {}

Controller::~Controller() {
  // A server-side closure that was never run (the call object went away
  // without responding) still must run once.
  RunCancelCallback();
  detail::DeleteAsyncCall(async_);
  DropCallId();
  if (owned_) rrpc_controller_free(c_);
}

void Controller::Rebind(rrpc_controller* c) {
  // What the destructor would do: the closure still runs once, an async
  // record made on this controller goes.
  if (cancel_callback_ != nullptr) RunCancelCallback();
  if (async_ != nullptr) {
    detail::DeleteAsyncCall(async_);
    async_ = nullptr;
  }
  DropCallId();
  after_rpc_resp_fn_ = nullptr;
  c_ = c;
  request_attachment_.buf_ = rrpc_controller_request_attachment(c);
  response_attachment_.buf_ = rrpc_controller_response_attachment(c);
}

void Controller::Reset() {
  rrpc_controller_reset(c_);
  DropCallId();
  // The C controller keeps its attachment iobufs across a reset; fetching
  // them again costs nothing and does not depend on that.
  request_attachment_.buf_ = rrpc_controller_request_attachment(c_);
  response_attachment_.buf_ = rrpc_controller_response_attachment(c_);
}

bool Controller::Failed() const { return rrpc_controller_failed(c_) != 0; }

std::string Controller::ErrorText() const { return rrpc_controller_error_text(c_); }

void Controller::StartCancel() {
  if (owned_) rrpc_controller_cancel(c_);
}

bool Controller::IsCanceled() const { return owned_ && rrpc_controller_is_canceled(c_) != 0; }

void Controller::NotifyOnCancel(google::protobuf::Closure* callback) {
  if (callback == nullptr) return;
  if (owned_) {
    // Client side: a cancelled call is told through its own completion
    // (ECANCELED), so there is nothing further to wait for here.
    callback->Run();
    return;
  }
  RunCancelCallback();  // a second registration replaces (and ends) the first
  cancel_callback_ = callback;
}

void Controller::RunCancelCallback() {
  google::protobuf::Closure* cb = cancel_callback_;
  cancel_callback_ = nullptr;
  if (cb != nullptr) cb->Run();
}

void Controller::SetFailed(const std::string& reason) {
  rrpc_controller_set_failed(c_, RRPC_EINTERNAL, reason.c_str());
}

void Controller::SetFailed(int code, const char* fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  rrpc_controller_set_failed(c_, code, text);
}

int Controller::ErrorCode() const { return -rrpc_controller_error_code(c_); }

void Controller::set_timeout_ms(int32_t ms) { rrpc_controller_set_timeout_ms(c_, ms); }
int32_t Controller::timeout_ms() const { return rrpc_controller_timeout_ms(c_); }
void Controller::set_log_id(int64_t id) { rrpc_controller_set_log_id(c_, id); }
int64_t Controller::log_id() const { return rrpc_controller_log_id(c_); }
void Controller::set_request_code(uint64_t code) { rrpc_controller_set_request_code(c_, code); }
uint64_t Controller::request_code() const { return rrpc_controller_request_code(c_); }
int64_t Controller::remaining_ms() const { return rrpc_controller_remaining_ms(c_); }
void Controller::InheritDeadline(const Controller& parent) {
  rrpc_controller_inherit_deadline(c_, parent.c_);
}
int64_t Controller::latency_us() const { return rrpc_controller_latency_us(c_); }

std::string Controller::remote_side() const {
  char buf[64];
  rrpc_controller_remote_side(c_, buf, sizeof buf);
  return buf;
}

std::string Controller::local_side() const {
  char buf[64];
  rrpc_controller_local_side(c_, buf, sizeof buf);
  return buf;
}

CallId Controller::call_id() {
  uint64_t v = call_id_.load(std::memory_order_acquire);
  if (v != 0) return CallId{v & ~kCallEndedBit};
  uint64_t id = detail::NewCallId();
  if (call_id_.compare_exchange_strong(v, id, std::memory_order_acq_rel)) return CallId{id};
  // The call ended meanwhile, no id had been handed out: nothing to wait for.
  detail::EndCallId(id);
  return CallId{v & ~kCallEndedBit};
}

namespace detail {

// A call starts on `cntl`. Reused without Reset: the ended call's id is not
// the new call's.
void BeginCallId(Controller* cntl) {
  if (cntl->call_id_.load(std::memory_order_relaxed) & Controller::kCallEndedBit)
    cntl->call_id_.store(0, std::memory_order_relaxed);
}

// The call on `cntl` ended: the id to pass to EndCallId once its done
// returned, or 0 if none was handed out.
uint64_t EndCallIdOfCall(Controller* cntl) {
  uint64_t v = cntl->call_id_.fetch_or(Controller::kCallEndedBit, std::memory_order_acq_rel);
  return v & Controller::kCallEndedBit ? 0 : v;
}

}  // namespace detail

void Controller::DropCallId() {
  uint64_t v = call_id_.exchange(0, std::memory_order_acq_rel);
  if (v != 0 && !(v & kCallEndedBit)) detail::EndCallId(v);
}

bool Controller::used_rdma() const { return rrpc_controller_used_rdma(c_) != 0; }

}  // namespace rrpc
