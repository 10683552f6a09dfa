// server.cpp - the smallest rrpc C++ server: echoes each message and its attachment.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "examples/echo/echo.pb.h"
#include "rrpc/cxx/server.h"

DEFINE_int32(port, 8000, "TCP port to listen on");
DEFINE_bool(use_rdma, false, "Offer RDMA; clients that do not ask for it are served over TCP");

class EchoServiceImpl : public example::EchoService {
  void Echo(google::protobuf::RpcController* cntl_base, const example::EchoRequest* req,
            example::EchoResponse* resp, google::protobuf::Closure* done) override {
    auto* cntl = static_cast<rrpc::Controller*>(cntl_base);
    resp->set_message(req->message());
    cntl->response_attachment().append(cntl->request_attachment());  // shared, not copied
    done->Run();  // may also run later, from any thread
  }
};

int main(int argc, char* argv[]) {
  FLAGS_logtostderr = true;  // glog to stderr, not to files (--logtostderr=false overrides)
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);  // before any LOG, so glog does not warn about it
  EchoServiceImpl service;
  rrpc::Server server;
  rrpc::ServerOptions options;
  options.use_rdma = FLAGS_use_rdma;  // clients that do not ask for RDMA are served over TCP
  if (server.AddService(&service, rrpc::SERVER_DOESNT_OWN_SERVICE) != 0) return 1;
  if (server.Start(FLAGS_port, &options) != 0) return 1;
  printf("echo server on port %d%s; Ctrl-C to stop\n", server.listen_port(),
         FLAGS_use_rdma ? " (RDMA offered)" : "");
  fflush(stdout);
  server.RunUntilAskedToQuit();  // until Ctrl-C or SIGTERM
  return 0;
}
