// client.cpp - the smallest rrpc C++ client: one synchronous echo call.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "examples/echo/echo.pb.h"
#include "rrpc/cxx/channel.h"

DEFINE_string(server, "127.0.0.1:8000", "Server address, ip:port");
DEFINE_bool(use_rdma, false, "Use RDMA; falls back to TCP when it cannot be set up");

int main(int argc, char* argv[]) {
  FLAGS_logtostderr = true;  // glog to stderr, not to files (--logtostderr=false overrides)
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);  // before any LOG, so glog does not warn about it
  rrpc::ChannelOptions options;
  options.use_rdma = FLAGS_use_rdma;  // falls back to TCP when RDMA cannot be set up
  rrpc::Channel channel;
  if (channel.Init(FLAGS_server.c_str(), &options) != 0) return 1;
  example::EchoService_Stub stub(&channel);
  example::EchoRequest req;
  example::EchoResponse resp;
  rrpc::Controller cntl;
  req.set_message("hello");
  cntl.request_attachment().append("an attachment");
  stub.Echo(&cntl, &req, &resp, nullptr);  // nullptr: synchronous
  if (cntl.Failed()) {
    fprintf(stderr, "[E%d] %s\n", cntl.ErrorCode(), cntl.ErrorText().c_str());
    return 1;
  }
  printf("%s + %s from %s in %lld us (over %s)\n", resp.message().c_str(),
         cntl.response_attachment().to_string().c_str(), cntl.remote_side().c_str(),
         static_cast<long long>(cntl.latency_us()), cntl.used_rdma() ? "RDMA" : "TCP");
  return 0;
}
