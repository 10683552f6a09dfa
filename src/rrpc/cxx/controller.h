// rrpc/cxx/controller.h - rrpc::Controller, the google::protobuf::RpcController
// of rrpc: a C++ handle on a C rrpc_controller (rrpc/controller.h).
//
// A Controller made by the user OWNS its C controller (client side). The
// controller a service method receives on the server BORROWS the call's C
// controller; it is valid until done->Run().
//
// [thread-compatible]: one call at a time; do not touch it while a call that
// uses it is in flight, except from that call's done closure or the server
// method that owns it.
#ifndef RRPC_CXX_CONTROLLER_H
#define RRPC_CXX_CONTROLLER_H

#include <google/protobuf/service.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "rrpc/controller.h"
#include "rrpc/cxx/call_id.h"
#include "rrpc/cxx/iobuf.h"
#include "rrpc/errors.h"

namespace rrpc {

namespace detail {
struct ServerCall;
struct AsyncCall;
void DeleteAsyncCall(AsyncCall* call);
// The channel's side of call ids (Controller::call_id_).
void BeginCallId(Controller* cntl);
uint64_t EndCallIdOfCall(Controller* cntl);
}  // namespace detail

class Controller : public google::protobuf::RpcController {
 public:
  // An idle controller for one call at a time. Throws std::bad_alloc if the C
  // controller cannot be allocated.
  Controller();
  ~Controller() override;
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // ---- google::protobuf::RpcController --------------------------------------
  // Back to the state of a new controller (attachments emptied, timeout back
  // to the channel's) so it can carry another call.
  void Reset() override;
  // After the call: true if it failed. ErrorText() says why ("" if not).
  bool Failed() const override;
  std::string ErrorText() const override;
  // Client: StartCancel ends the call in flight at once with ECANCELED (a
  // sync CallMethod returns, an async done runs exactly once, on an rrpc
  // loop thread, never inside StartCancel); a late response is dropped.
  // Any thread, any time while the controller lives; a finished call, or no
  // call, makes it a no-op (rrpc_controller_cancel). On a server method's
  // controller it does nothing. IsCanceled: client, true if the last call
  // ended by StartCancel; server, always false. NotifyOnCancel's closure
  // runs once: server side after the response is handed to rrpc; client
  // side at once (rrpc tells a cancelled call through its done/ErrorCode).
  void StartCancel() override;
  bool IsCanceled() const override;
  void NotifyOnCancel(google::protobuf::Closure* callback) override;
  // Server side: fail the call with EINTERNAL and this text.
  void SetFailed(const std::string& reason) override;

  // ---- rrpc additions (brpc names) --------------------------------------------
  // Fail the call with `code` (a positive brpc/rrpc code such as
  // rrpc::EREQUEST, or an errno value) and a printf-style text (cut at 512
  // bytes). The client sees the same code in ErrorCode().
  void SetFailed(int code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  // 0 if the call succeeded, else the POSITIVE code (ERPCTIMEDOUT = 1008,
  // ENOSERVICE = 1001, ECONNREFUSED, ...), as brpc reports it.
  int ErrorCode() const;

  // Attachments: raw bytes after the message, never serialized or copied on
  // send. Client: fill the request one before the call, read the response
  // one after. Server: read the request one, fill the response one before
  // done->Run(). The IOBufs BORROW the C controller's iobufs.
  IOBuf& request_attachment() { return request_attachment_; }
  IOBuf& response_attachment() { return response_attachment_; }

  // Timeout of the next call: > 0 overrides the channel's, < 0 = none,
  // 0 = the channel's (the default).
  void set_timeout_ms(int32_t ms);
  int32_t timeout_ms() const;
  // Carried to the server in RpcMeta.log_id; a server method reads it here.
  void set_log_id(int64_t id);
  int64_t log_id() const;
  // brpc's request_code: the key c_murmurhash balancing hashes (calls with
  // the same code go to the same server of a cluster channel).
  void set_request_code(uint64_t code);
  uint64_t request_code() const;
  // Deadlines (docs/client.md): a server method's controller knows how long
  // its caller still waits: remaining_ms() is that many milliseconds, 0 once
  // passed, -1 if the caller sent no timeout. InheritDeadline(parent) caps
  // every call made with this controller at `parent`'s deadline (pass the
  // server method's controller to a nested call); a call with nothing left
  // fails at once with ERPCTIMEDOUT.
  int64_t remaining_ms() const;
  void InheritDeadline(const Controller& parent);
  // Client: from issuing the call to its completion. Server: from receiving
  // the request to responding.
  int64_t latency_us() const;
  // "ip:port" of the peer ("" before the call was sent).
  std::string remote_side() const;
  // "ip:port" of this end of the call's connection (client: "" until the
  // response arrived; server: the address the request came in on).
  std::string local_side() const;
  // Client: the id of this controller's call, for Join (rrpc/cxx/call_id.h):
  // take it before the call (or, if the controller outlives the call,
  // after). A controller carries a new id after Reset().
  CallId call_id();
  // true if the call's connection used RDMA (false over TCP, including a
  // fallback from RDMA).
  bool used_rdma() const;

  // Server side, brpc's: `fn` runs once after the response was handed to
  // the connection, on the thread that ran done->Run(), with this
  // controller, the request and the response still valid (for logging that
  // should not delay the answer). The call counts as running until it
  // returns. Set before done->Run().
  using AfterRpcRespFnType = std::function<void(
      Controller*, const google::protobuf::Message*, const google::protobuf::Message*)>;
  void set_after_rpc_resp_fn(AfterRpcRespFnType fn) { after_rpc_resp_fn_ = std::move(fn); }

  // The C controller, borrowed.
  rrpc_controller* c_controller() { return c_; }
  const rrpc_controller* c_controller() const { return c_; }

 private:
  friend struct detail::ServerCall;
  friend class Channel;
  friend void detail::BeginCallId(Controller* cntl);
  friend uint64_t detail::EndCallIdOfCall(Controller* cntl);
  struct Borrow {};
  // Server side: borrows the call's C controller.
  Controller(Borrow, rrpc_controller* c);
  // Server side: runs and forgets the NotifyOnCancel closure.
  void RunCancelCallback();
  // Server side, a reused call: borrows `c` from now on, as if destroyed and
  // made again with Controller(Borrow{}, c) (a destructor and a constructor
  // chain per call cost ~90 instructions).
  void Rebind(rrpc_controller* c);

  rrpc_controller* c_;
  bool owned_;
  IOBuf request_attachment_;
  IOBuf response_attachment_;
  google::protobuf::Closure* cancel_callback_ = nullptr;
  // Client side: the record of an async call (Channel::CallMethod), made on
  // this controller's first async call and reused by the next ones (one call
  // at a time), so an async call allocates nothing per call.
  detail::AsyncCall* async_ = nullptr;
  AfterRpcRespFnType after_rpc_resp_fn_;  // server side; see set_after_rpc_resp_fn
  // The call id (call_id.h): 0 = none handed out for this call; an id; or
  // kCallEndedBit | the id (or 0) once the call ended (its done started).
  // The channel reads it with one atomic operation as the call ends, since
  // call_id() may be asked from another thread while the call is in flight.
  static constexpr uint64_t kCallEndedBit = uint64_t{1} << 63;
  std::atomic<uint64_t> call_id_{0};
  // Reset/destruction: an id handed out for a call never made ends now.
  void DropCallId();
};

// brpc-style positive error codes, for SetFailed/ErrorCode comparisons
// (rrpc::ERPCTIMEDOUT == 1008, as in brpc). The same values as the C
// RRPC_E... codes; RRPC_ENODEV has no alias here because ENODEV is an errno
// macro.
enum : int {
  ENOSERVICE = RRPC_ENOSERVICE,
  ENOMETHOD = RRPC_ENOMETHOD,
  EREQUEST = RRPC_EREQUEST,
  ERPCAUTH = RRPC_ERPCAUTH,
  ERPCTIMEDOUT = RRPC_ERPCTIMEDOUT,
  EOVERCROWDED = RRPC_EOVERCROWDED,
  EINTERNAL = RRPC_EINTERNAL,
  ERESPONSE = RRPC_ERESPONSE,
  ELOGOFF = RRPC_ELOGOFF,
  ELIMIT = RRPC_ELIMIT,
  ECLOSE = RRPC_ECLOSE,
  ERDMA = RRPC_ERDMA,
  ERDMAMEM = RRPC_ERDMAMEM,
  EPARSE = RRPC_EPARSE,
  ETOOBIG = RRPC_ETOOBIG,
  ENORDMA = RRPC_ENORDMA,
  EDECLINED = RRPC_EDECLINED,
  EHANDSHAKE = RRPC_EHANDSHAKE,
  ENOTREADY = RRPC_ENOTREADY,
  EPOOL = RRPC_EPOOL,
};

}  // namespace rrpc

#endif  // RRPC_CXX_CONTROLLER_H
