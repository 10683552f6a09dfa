// rrpc/cxx/channel.h - rrpc::Channel, a google::protobuf::RpcChannel that
// calls protobuf services over baidu_std through the C channel
// (rrpc/channel.h). Owns its C channel.
//
// [thread-safe] once Init() has returned 0: any number of threads may call
// CallMethod (or stubs made on the channel) at the same time.
#ifndef RRPC_CXX_CHANNEL_H
#define RRPC_CXX_CHANNEL_H

#include <google/protobuf/service.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "rrpc/channel.h"
#include "rrpc/cxx/controller.h"

namespace rrpc {

// brpc's RetryPolicy, in rrpc's shape: asked on a loop thread (must not
// block) whether a failed attempt of a cluster call should go to another
// server, only while max_retry and the deadline allow. error_code is
// positive (as Controller::ErrorCode); responded: the server answered.
class RetryPolicy {
 public:
  virtual ~RetryPolicy() = default;
  virtual bool DoRetry(int error_code, bool responded) const = 0;
};

// brpc's connection types (ChannelOptions::connection_type).
enum ConnectionType {
  CONNECTION_TYPE_SINGLE = RRPC_CONNECTION_SINGLE,  // one connection, calls multiplexed
  CONNECTION_TYPE_POOLED = RRPC_CONNECTION_POOLED,  // a connection per call in flight, reused
  CONNECTION_TYPE_SHORT = RRPC_CONNECTION_SHORT,    // a new connection per call
};
// "single", "pooled", "short" (brpc's names) into *out; false for others.
bool ParseConnectionType(const std::string& name, ConnectionType* out);

// The type of ChannelOptions::connection_type, as brpc's: assigned the enum
// or one of brpc's names ("single", "pooled", "short"; "" = single, so a
// string flag left empty keeps the default). Another name makes
// Channel::Init fail and say so.
class AdaptiveConnectionType {
 public:
  AdaptiveConnectionType(ConnectionType type = CONNECTION_TYPE_SINGLE) : type_(type) {}
  AdaptiveConnectionType(const std::string& name) { *this = name; }
  AdaptiveConnectionType(const char* name) { *this = std::string(name ? name : ""); }
  AdaptiveConnectionType& operator=(ConnectionType type) {
    type_ = type;
    unknown_.clear();
    return *this;
  }
  AdaptiveConnectionType& operator=(const std::string& name) {
    unknown_.clear();
    if (!ParseConnectionType(name, &type_)) {
      type_ = CONNECTION_TYPE_SINGLE;
      unknown_ = name;
    }
    return *this;
  }
  AdaptiveConnectionType& operator=(const char* name) { return *this = std::string(name ? name : ""); }
  operator ConnectionType() const { return type_; }
  // The name assigned last if it was none of brpc's, else "".
  const std::string& unknown_name() const { return unknown_; }

 private:
  ConnectionType type_ = CONNECTION_TYPE_SINGLE;
  std::string unknown_;
};

struct ChannelOptions {
  // Defaults: brpc's for the call settings, --max_body_size for the size cap.
  ChannelOptions();

  // RDMA through the SMC-R handshake (TCP fallback per --rdma_fallback). In a
  // build without RDMA, Init fails and logs how to build with it.
  bool use_rdma = false;
  // With use_rdma: "imm" (rrpc's own) or "brpc" (Apache brpc's RDMA dialect,
  // docs/from-brpc.md) for this channel's connections; "" = --rdma_dialect.
  std::string rdma_dialect;
  // Per call; < 0 = no timeout (0 is taken the same way). Default 500.
  int32_t timeout_ms = 500;
  // Connect timeout; <= 0 = the default, 200.
  int32_t connect_timeout_ms = 200;
  // Single server: extra connect attempts per call (a request that may have
  // reached the server is never resent). Cluster (Init with a naming URL):
  // further attempts on other servers after a connection failure, never
  // after a response, never past the deadline. 0 = none. Default 3.
  int max_retry = 3;
  // Cluster only: send a copy of a call that has not ended after this many
  // ms to another server; the first response wins. <= 0 = off (brpc's -1).
  int32_t backup_request_ms = -1;
  // Cluster only: decides retries instead of the default (connection
  // failures and ELOGOFF). Borrowed; must outlive the channel.
  const RetryPolicy* retry_policy = nullptr;
  // brpc's connection_type. Pooled keeps at most --max_connection_pool_size
  // idle connections.
  AdaptiveConnectionType connection_type = CONNECTION_TYPE_SINGLE;
  // brpc's protocol name: "baidu_std" (or "" for it) is the one rrpc
  // speaks; any other makes Init fail and say so.
  std::string protocol;
  // Largest response body accepted. Default --max_body_size.
  size_t max_body_size;
};

class Channel : public google::protobuf::RpcChannel {
 public:
  Channel();
  ~Channel() override;  // fails the calls in flight (ECLOSE), then closes
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Init - a channel to "ip:port" (or "host:port", resolved once),
  // "[ipv6]:port" or "unix:/path" (never RDMA; see rrpc_channel_new); the
  // (ip, port) form takes a bare IPv6 address too. No
  // connection is made until the first call. opts may be nullptr (defaults).
  // 0, or -1 after logging why (bad address, use_rdma without RDMA, called
  // twice).
  int Init(const char* server_addr, const ChannelOptions* opts);
  int Init(const char* ip, int port, const ChannelOptions* opts);
  // Init - a cluster channel, as brpc's: servers from naming_url
  // ("list://ip:port,ip:port", "file://path", "dns://host:port", or a scheme
  // registered with rrpc_naming_register), each call sent to one chosen by
  // load_balancer_name ("rr", "random", "wrr", "la", "c_murmurhash"; nullptr
  // or "" = "rr"). --health_check_interval and --ns_access_interval (brpc's
  // flags, seconds) apply. Reads the naming source once here (may block).
  // As in brpc, an empty (or nullptr) load_balancer_name with an address
  // that names no scheme ("ip:port") is the single-server Init above.
  // 0, or -1 after logging why.
  int Init(const char* naming_url, const char* load_balancer_name, const ChannelOptions* opts);

  // CallMethod - call method->service()->full_name() / method->name().
  // `controller` must be an rrpc::Controller.
  // - done == nullptr: synchronous; returns when the call is over (check
  //   controller->Failed()). Not from an rrpc event-loop thread (a server
  //   method running in the loop, or a done closure): such a call fails at
  //   once with EDEADLK instead of hanging.
  // - done != nullptr: asynchronous; done->Run() runs exactly once, after the
  //   response was parsed into `response` (or the call failed), normally on
  //   an rrpc loop thread. Calls that cannot even be sent (no rrpc
  //   Controller, channel not initialized, request missing required fields)
  //   run done before CallMethod returns.
  // request is only read during this call (serialized at once); response,
  // controller and done must stay alive until done runs.
  // A response that does not parse makes the call fail with ERESPONSE.
  void CallMethod(const google::protobuf::MethodDescriptor* method,
                  google::protobuf::RpcController* controller,
                  const google::protobuf::Message* request, google::protobuf::Message* response,
                  google::protobuf::Closure* done) override;

  // The C channel, borrowed (nullptr before Init).
  rrpc_channel* c_channel() { return ch_; }
  // Why the last Init failed, as it was logged ("" when none failed). rrpc's
  // own: brpc's Channel::Init only logs it.
  const std::string& init_error() const { return init_error_; }

 private:
  // The C options from opts and the flags; -1 after logging why not.
  int Prepare(const char* what, const ChannelOptions* opts, rrpc_channel_options* c);
  // Logs `why`, keeps it for init_error(); -1.
  int Refuse(const std::string& why);
  rrpc_channel* ch_ = nullptr;
  std::string init_error_;
  // Each method called through this channel, prepared once (rrpc_method:
  // its names encoded for the wire), found by its descriptor's address.
  // Protobuf's generated descriptors live as long as the process; one of a
  // DescriptorPool destroyed while the channel lives must not be replaced
  // at the same address by a method with names of the same lengths.
  class MethodCache;
  std::unique_ptr<MethodCache> methods_;
};

}  // namespace rrpc

#endif  // RRPC_CXX_CHANNEL_H
