// client.cpp - the smallest rrpc C++ client: one synchronous echo call.
#include <gflags/gflags.h>

#include <cstdio>

#include "examples/echo/echo.pb.h"
#include "rrpc/cxx/channel.h"

DEFINE_string(server, "127.0.0.1:8000", "Server address, ip:port");

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  rrpc::Channel channel;
  if (channel.Init(FLAGS_server.c_str(), nullptr) != 0) return 1;
  example::EchoService_Stub stub(&channel);
  example::EchoRequest req;
  example::EchoResponse resp;
  rrpc::Controller cntl;
  req.set_message("hello");
  cntl.request_attachment().append("an attachment");
  stub.Echo(&cntl, &req, &resp, nullptr);  // done == nullptr: wait for the response
  if (cntl.Failed()) {
    fprintf(stderr, "[E%d] %s\n", cntl.ErrorCode(), cntl.ErrorText().c_str());
    return 1;
  }
  printf("%s + %s from %s in %lld us\n", resp.message().c_str(),
         cntl.response_attachment().to_string().c_str(), cntl.remote_side().c_str(),
         static_cast<long long>(cntl.latency_us()));
  return 0;
}
