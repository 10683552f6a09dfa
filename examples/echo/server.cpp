// server.cpp - the smallest rrpc C++ server: echoes each message and its attachment.
#include <gflags/gflags.h>

#include "examples/echo/echo.pb.h"
#include "rrpc/cxx/server.h"

DEFINE_int32(port, 8000, "TCP port to listen on");

class EchoServiceImpl : public example::EchoService {
  void Echo(google::protobuf::RpcController* cntl_base, const example::EchoRequest* req,
            example::EchoResponse* resp, google::protobuf::Closure* done) override {
    auto* cntl = static_cast<rrpc::Controller*>(cntl_base);
    resp->set_message(req->message());
    cntl->response_attachment().append(cntl->request_attachment());  // shared, not copied
    done->Run();  // sends the response; may also be called later, from any thread
  }
};

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  EchoServiceImpl service;
  rrpc::Server server;
  if (server.AddService(&service, rrpc::SERVER_DOESNT_OWN_SERVICE) != 0) return 1;
  if (server.Start(FLAGS_port, nullptr) != 0) return 1;
  server.RunUntilAskedToQuit();  // until Ctrl-C or SIGTERM
  return 0;
}
