// client.cpp - the smallest rrpc C++ client: one echo call, sync.
#include <gflags/gflags.h>

#include <cstdio>

#include "examples/echo/echo.pb.h"
#include "rrpc/cxx/channel.h"

DEFINE_string(server, "127.0.0.1:8000", "Server address, ip:port");
DEFINE_string(message, "hello", "Message to echo");
DEFINE_bool(use_rdma, false, "Use RDMA (falls back to TCP if the server cannot)");

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  rrpc::ChannelOptions options;
  options.use_rdma = FLAGS_use_rdma;
  rrpc::Channel channel;
  if (channel.Init(FLAGS_server.c_str(), &options) != 0) return 1;

  example::EchoService_Stub stub(&channel);
  example::EchoRequest request;
  example::EchoResponse response;
  rrpc::Controller cntl;
  request.set_message(FLAGS_message);
  cntl.request_attachment().append("an attachment");
  stub.Echo(&cntl, &request, &response, nullptr);  // nullptr done: a synchronous call
  if (cntl.Failed()) {
    fprintf(stderr, "echo failed: [E%d] %s\n", cntl.ErrorCode(), cntl.ErrorText().c_str());
    return 1;
  }
  printf("%s (attachment: %s) from %s in %lld us over %s\n", response.message().c_str(),
         cntl.response_attachment().to_string().c_str(), cntl.remote_side().c_str(),
         static_cast<long long>(cntl.latency_us()), cntl.used_rdma() ? "RDMA" : "TCP");
  return 0;
}
