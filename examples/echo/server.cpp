// server.cpp - the smallest rrpc C++ server: echoes each message and its attachment.
#include <gflags/gflags.h>

#include "examples/echo/echo.pb.h"
#include "rrpc/cxx/server.h"

DEFINE_int32(port, 8000, "TCP port to listen on");
DEFINE_bool(use_rdma, false, "Offer RDMA to clients that ask for it");

class EchoServiceImpl : public example::EchoService {
 public:
  void Echo(google::protobuf::RpcController* cntl_base, const example::EchoRequest* req,
            example::EchoResponse* resp, google::protobuf::Closure* done) override {
    auto* cntl = static_cast<rrpc::Controller*>(cntl_base);
    resp->set_message(req->message());
    cntl->response_attachment().append(cntl->request_attachment());  // shared, not copied
    done->Run();
  }
};

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  EchoServiceImpl service;
  rrpc::Server server;
  rrpc::ServerOptions options;
  options.use_rdma = FLAGS_use_rdma;
  if (server.AddService(&service, rrpc::SERVER_DOESNT_OWN_SERVICE) != 0) return 1;
  if (server.Start(FLAGS_port, &options) != 0) return 1;
  server.RunUntilAskedToQuit();  // until Ctrl-C / SIGTERM
  return 0;
}
