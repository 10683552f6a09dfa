// brpc_style.cc - an out-of-tree program written as brpc programs are, built
// against an installed rrpc with pkg-config rrpc-brpc-compat (brpc's header
// names; tools/check-install). A server (ClosureGuard, done_guard.release()
// for answers from another thread, butil::EndPoint) and a client (brpc's
// string options, sync calls, async calls with NewCallback whose callback
// deletes the controller, Join by CallId) in one process on loopback; the
// server also logs each call after its response left (set_after_rpc_resp_fn,
// json2pb).
// Exit status 0 only if every call came back right.
#include <gflags/gflags.h>
#include <butil/logging.h>
#include <butil/endpoint.h>
#include <butil/time.h>
#include <brpc/server.h>
#include <brpc/channel.h>
#include <json2pb/pb_to_json.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "brpc_echo.pb.h"

DEFINE_string(connection_type, "", "Connection type. Available values: single, pooled, short");
DEFINE_string(protocol, "baidu_std", "Protocol type");
DEFINE_int32(calls, 50, "Async calls (and as many sync ones)");

static std::atomic<int> g_after_ok{0};

namespace example {
class EchoServiceImpl : public EchoService {
 public:
  void Echo(google::protobuf::RpcController* cntl_base, const EchoRequest* request,
            EchoResponse* response, google::protobuf::Closure* done) override {
    brpc::ClosureGuard done_guard(done);
    brpc::Controller* cntl = static_cast<brpc::Controller*>(cntl_base);
    response->set_message(request->message());
    response->set_log_id(cntl->log_id());
    response->set_client_side(cntl->remote_side());
    cntl->response_attachment().append(cntl->request_attachment());
    cntl->set_after_rpc_resp_fn(&EchoServiceImpl::CallAfterRpc);
    if (request->answer_later()) {
      // Answer from another thread: the guard lets go of done.
      std::lock_guard<std::mutex> lk(mu_);
      threads_.emplace_back([d = done_guard.release()] { d->Run(); });
    }
  }
  static void CallAfterRpc(brpc::Controller* cntl, const google::protobuf::Message* req,
                           const google::protobuf::Message* res) {
    std::string req_str, res_str;
    json2pb::ProtoMessageToJson(*req, &req_str, nullptr);
    json2pb::ProtoMessageToJson(*res, &res_str, nullptr);
    const std::string& text = static_cast<const EchoRequest*>(req)->message();
    if (req_str.find("\"" + text + "\"") != std::string::npos &&
        res_str.find("\"log_id\":\"" + std::to_string(cntl->log_id()) + "\"") != std::string::npos) {
      g_after_ok++;
    } else {
      LOG(ERROR) << "after_rpc_resp_fn saw req:" << req_str << " res:" << res_str;
    }
  }
  ~EchoServiceImpl() override {
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};
}  // namespace example

static std::atomic<int> g_ok{0};
static std::atomic<int> g_bad{0};

static void HandleEchoResponse(brpc::Controller* cntl, example::EchoResponse* response,
                               std::string expect) {
  std::unique_ptr<brpc::Controller> cntl_guard(cntl);
  std::unique_ptr<example::EchoResponse> response_guard(response);
  if (cntl->Failed() || response->message() != expect || response->log_id() != cntl->log_id() ||
      cntl->response_attachment().to_string() != "att:" + expect ||
      response->client_side() != cntl->local_side()) {
    LOG(ERROR) << "bad async response: " << cntl->ErrorText() << " message=" << response->message()
               << " attached=" << cntl->response_attachment() << " from " << cntl->remote_side();
    g_bad++;
    return;
  }
  g_ok++;
}

int main(int argc, char* argv[]) {
  GFLAGS_NAMESPACE::ParseCommandLineFlags(&argc, &argv, true);

  brpc::Server server;
  example::EchoServiceImpl echo_service_impl;
  if (server.AddService(&echo_service_impl, brpc::SERVER_DOESNT_OWN_SERVICE) != 0) {
    LOG(ERROR) << "Fail to add service";
    return 1;
  }
  butil::EndPoint point;
  if (butil::str2endpoint("127.0.0.1:0", &point) < 0) return 1;
  brpc::ServerOptions options;
  options.idle_timeout_sec = 30;
  if (server.Start(point, &options) != 0) {
    LOG(ERROR) << "Fail to start EchoServer";
    return 1;
  }
  point.port = server.listen_port();

  brpc::Channel channel;
  brpc::ChannelOptions copts;
  copts.protocol = FLAGS_protocol;
  copts.connection_type = FLAGS_connection_type;
  copts.timeout_ms = 10000;
  if (channel.Init(butil::endpoint2str(point).c_str(), &copts) != 0) {
    LOG(ERROR) << "Fail to initialize channel";
    return 1;
  }
  example::EchoService_Stub stub(&channel);

  const int64_t start_us = butil::monotonic_time_us();
  std::vector<brpc::CallId> ids;
  for (int i = 0; i < FLAGS_calls; ++i) {
    std::string text = "async-" + std::to_string(i);
    auto* response = new example::EchoResponse();
    auto* cntl = new brpc::Controller();
    example::EchoRequest request;
    request.set_message(text);
    request.set_answer_later(i % 2 == 1);
    cntl->set_log_id(1000 + i);
    cntl->request_attachment().append("att:" + text);
    ids.push_back(cntl->call_id());  // before the call: the callback deletes cntl
    stub.Echo(cntl, &request, response,
              brpc::NewCallback(&HandleEchoResponse, cntl, response, text));
  }
  for (int i = 0; i < FLAGS_calls; ++i) {
    example::EchoRequest request;
    example::EchoResponse response;
    brpc::Controller cntl;
    request.set_message("sync-" + std::to_string(i));
    cntl.set_log_id(i);
    stub.Echo(&cntl, &request, &response, nullptr);
    if (cntl.Failed() || response.message() != request.message() || response.log_id() != i) {
      LOG(ERROR) << "bad sync response: " << cntl.ErrorText();
      g_bad++;
    } else {
      g_ok++;
    }
  }
  for (const brpc::CallId& id : ids) brpc::Join(id);

  const int want = 2 * FLAGS_calls;
  const long long took_us = butil::monotonic_time_us() - start_us;
  server.Stop();
  server.Join();  // every after_rpc_resp_fn has returned
  printf("brpc_style: %d of %d calls right, %d logged after the response (connection_type=%s) "
         "to %s in %lld us\n", g_ok.load(), want, g_after_ok.load(), FLAGS_connection_type.c_str(),
         butil::endpoint2str(point).c_str(), took_us);
  return g_ok.load() == want && g_bad.load() == 0 && g_after_ok.load() == want ? 0 : 1;
}
