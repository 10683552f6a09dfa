// cxx_cluster_unittest.cc - rrpc::Channel::Init(naming_url, lb, opts), the
// C++ face of cluster channels: protobuf calls balanced over 3 loopback
// servers, request_code on the Controller, a RetryPolicy.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rrpc/cxx/rrpc.h"
#include "test/cxx_echo.pb.h"
#include "test/cxx_echo_service.h"

namespace {

using cxxtest::EchoRequest;
using cxxtest::EchoResponse;

struct Servers {
  cxxtest::EchoServiceImpl service;
  std::vector<std::unique_ptr<rrpc::Server>> s;
  explicit Servers(int n) {
    for (int i = 0; i < n; i++) {
      s.emplace_back(new rrpc::Server);
      EXPECT_EQ(0, s.back()->AddService(&service, rrpc::SERVER_DOESNT_OWN_SERVICE));
      EXPECT_EQ(0, s.back()->Start(0, nullptr));
    }
  }
  std::string addr(size_t i) const { return "127.0.0.1:" + std::to_string(s[i]->listen_port()); }
  std::string list() const {
    std::string u = "list://";
    for (size_t i = 0; i < s.size(); i++) u += (i ? "," : "") + addr(i);
    return u;
  }
};

std::string Echo(rrpc::Channel* ch, uint64_t code, int* error = nullptr) {
  cxxtest::EchoService_Stub stub(ch);
  rrpc::Controller cntl;
  cntl.set_request_code(code);
  EXPECT_EQ(code, cntl.request_code());
  EchoRequest req;
  EchoResponse resp;
  req.set_message("hi");
  stub.Echo(&cntl, &req, &resp, nullptr);
  if (error) *error = cntl.ErrorCode();
  EXPECT_TRUE(cntl.Failed() || resp.message() == "hi");
  return cntl.remote_side();
}

TEST(CxxCluster, InitWithNamingUrlBalancesRoundRobin) {
  Servers sv(3);
  rrpc::Channel ch;
  rrpc::ChannelOptions opts;
  opts.timeout_ms = 3000;
  ASSERT_EQ(0, ch.Init(sv.list().c_str(), "rr", &opts));
  std::map<std::string, int> per;
  for (int i = 0; i < 300; i++) {
    int err = 0;
    per[Echo(&ch, 0, &err)]++;
    ASSERT_EQ(0, err);
  }
  ASSERT_EQ(3u, per.size());
  for (auto& kv : per) EXPECT_EQ(100, kv.second) << kv.first;
}

TEST(CxxCluster, RequestCodePinsAServer) {
  Servers sv(3);
  rrpc::Channel ch;
  ASSERT_EQ(0, ch.Init(sv.list().c_str(), "c_murmurhash", nullptr));
  for (uint64_t code = 1; code < 50; code++) {
    std::string first = Echo(&ch, code);
    for (int i = 0; i < 3; i++) EXPECT_EQ(first, Echo(&ch, code));
  }
}

TEST(CxxCluster, BadUrlOrBalancerFailsInit) {
  rrpc::Channel a, b, c;
  EXPECT_EQ(-1, a.Init("list://127.0.0.1:1", "nope", nullptr));
  EXPECT_EQ(-1, b.Init("bogus://x", "rr", nullptr));
  EXPECT_EQ(-1, c.Init("list://", "rr", nullptr));
}

class CountingPolicy : public rrpc::RetryPolicy {
 public:
  bool DoRetry(int error_code, bool responded) const override {
    calls++;
    last_code = error_code;
    return !responded;
  }
  mutable int calls = 0;
  mutable int last_code = 0;
};

TEST(CxxCluster, RetryPolicyIsAskedAndRetriesOnAnotherServer) {
  Servers sv(2);
  // The first server in the list is dead: a closed port.
  int dead_port;
  {
    rrpc::Server tmp;
    ASSERT_EQ(0, tmp.Start(0, nullptr));
    dead_port = tmp.listen_port();
  }
  std::string url = "list://127.0.0.1:" + std::to_string(dead_port) + "," + sv.addr(0);
  CountingPolicy policy;
  rrpc::ChannelOptions opts;
  opts.timeout_ms = 3000;
  opts.retry_policy = &policy;
  rrpc::Channel ch;
  ASSERT_EQ(0, ch.Init(url.c_str(), "rr", &opts));
  int err = -1;
  EXPECT_EQ(sv.addr(0), Echo(&ch, 0, &err));
  EXPECT_EQ(0, err);
  EXPECT_EQ(1, policy.calls);
  EXPECT_EQ(ECONNREFUSED, policy.last_code);
}

}  // namespace
