// flags_coexist_test.cc - rrpc in one process with a library that defines
// brpc's flags (fake_brpc.cc, standing in for brpc). Linked without
// librrpc_flags, statically (flags_static_test) and against shared libraries
// (flags_shared_test); see coexist.mk. Before rrpc read its settings by name,
// the static link failed with "multiple definition of FLAGS_max_body_size"
// and the shared one exited at start with "flag 'max_body_size' was defined
// more than once".
#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rrpc/cxx/channel.h"
#include "rrpc/cxx/controller.h"
#include "rrpc/cxx/server.h"
#include "rrpc/errors.h"
#include "rrpc/loops.h"
#include "test/cxx_echo.pb.h"

extern "C" {
uint64_t fake_brpc_max_body_size();
int32_t fake_brpc_event_dispatcher_num();
bool fake_brpc_usercode_in_pthread();
}

namespace {

// Definitions of `name` in the registry, and the file of the last one.
int CountDefinitions(const std::string& name, std::string* file) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  int n = 0;
  for (const auto& f : all) {
    if (f.name != name) continue;
    n++;
    *file = f.filename;
  }
  return n;
}

TEST(FlagsCoexist, EachSharedFlagIsDefinedOnceByTheOtherLibrary) {
  // The other library's default is the one in force: brpc's
  // event_dispatcher_num is 1 where rrpc's is 0.
  EXPECT_EQ("1", gflags::GetCommandLineFlagInfoOrDie("event_dispatcher_num").current_value);
  for (const char* name : {"max_body_size", "event_dispatcher_num", "usercode_in_pthread",
                           "rdma_sq_size", "rdma_zerocopy_min_size",
                           "socket_max_unwritten_bytes"}) {
    std::string file;
    EXPECT_EQ(1, CountDefinitions(name, &file)) << name;
    EXPECT_NE(std::string::npos, file.find("fake_brpc.cc")) << name << " from " << file;
  }
  // rrpc's own flags are still there, defined by librrpc_cxx.
  std::string file;
  EXPECT_EQ(1, CountDefinitions("rdma_ring_size", &file));
  EXPECT_NE(std::string::npos, file.find("src/rrpc/cxx/flags.cc")) << file;
}

// Runs first (gtest keeps declaration order): no channel has started the
// process-wide loops yet, so the loop count still follows the flag.
TEST(FlagsCoexist, OneValueServesBoth) {
  gflags::FlagSaver saver;
  ASSERT_NE("", gflags::SetCommandLineOption("max_body_size", "4096"));
  ASSERT_NE("", gflags::SetCommandLineOption("event_dispatcher_num", "3"));
  ASSERT_NE("", gflags::SetCommandLineOption("usercode_in_pthread", "true"));
  EXPECT_EQ(4096u, fake_brpc_max_body_size());
  EXPECT_EQ(3, fake_brpc_event_dispatcher_num());
  EXPECT_TRUE(fake_brpc_usercode_in_pthread());
  rrpc::ServerOptions s;
  EXPECT_EQ(4096u, s.max_body_size);
  EXPECT_TRUE(s.handlers_in_pool);
  EXPECT_EQ(4096u, rrpc::ChannelOptions().max_body_size);
  // The first channel sizes the process-wide loops from the shared flag.
  rrpc::Channel ch;
  ASSERT_EQ(0, ch.Init("127.0.0.1:1", nullptr));
  EXPECT_EQ(3, rrpc_event_dispatcher_num());
}

// The shared value is the limit a real server enforces.
TEST(FlagsCoexist, ServerEnforcesTheSharedMaxBodySize) {
  gflags::FlagSaver saver;
  ASSERT_NE("", gflags::SetCommandLineOption("max_body_size", "4096"));
  class EchoImpl : public cxxtest::EchoService {
    void Echo(google::protobuf::RpcController*, const cxxtest::EchoRequest* req,
              cxxtest::EchoResponse* resp, google::protobuf::Closure* done) override {
      resp->set_message(req->message());
      done->Run();
    }
  } service;
  rrpc::Server server;
  ASSERT_EQ(0, server.AddService(&service, rrpc::SERVER_DOESNT_OWN_SERVICE));
  ASSERT_EQ(0, server.Start(0, nullptr));
  // The client's own limit is raised so only the server's can refuse.
  rrpc::ChannelOptions copts;
  copts.max_body_size = 1 << 20;
  copts.timeout_ms = 5000;
  rrpc::Channel ch;
  ASSERT_EQ(0, ch.Init("127.0.0.1", server.listen_port(), &copts));
  cxxtest::EchoService_Stub stub(&ch);
  {
    rrpc::Controller cntl;
    cxxtest::EchoRequest req;
    cxxtest::EchoResponse resp;
    req.set_message("small");
    stub.Echo(&cntl, &req, &resp, nullptr);
    ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
    EXPECT_EQ("small", resp.message());
  }
  {
    rrpc::Controller cntl;
    cxxtest::EchoRequest req;
    cxxtest::EchoResponse resp;
    req.set_message(std::string(8192, 'x'));
    stub.Echo(&cntl, &req, &resp, nullptr);
    EXPECT_TRUE(cntl.Failed());
  }
}

}  // namespace
