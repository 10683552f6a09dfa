// cxx_brpc_unittest.cc - the brpc helpers of the C++ face: ClosureGuard,
// NewCallback/NewPermanentCallback/DoNothing, CallId and Join, EndPoint and
// str2endpoint, printing an IOBuf, Controller::local_side, Server::Start with
// an EndPoint, ChannelOptions' connection_type names and protocol,
// Controller::set_after_rpc_resp_fn, and json2pb's ProtoMessageToJson.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/cxx/compat/json2pb/pb_to_json.h"
#include "rrpc/cxx/rrpc.h"
#include "test/cxx_echo.pb.h"
#include "test/cxx_echo_service.h"

namespace {

using cxxtest::EchoRequest;
using cxxtest::EchoResponse;
using cxxtest::EchoServiceImpl;

// ---- ClosureGuard -------------------------------------------------------------

class CountingClosure : public google::protobuf::Closure {
 public:
  void Run() override { runs++; }
  int runs = 0;
};

TEST(ClosureGuard, RunsOnceAtScopeEnd) {
  CountingClosure c;
  {
    rrpc::ClosureGuard g(&c);
    EXPECT_FALSE(g.empty());
    EXPECT_EQ(0, c.runs);
  }
  EXPECT_EQ(1, c.runs);
}

TEST(ClosureGuard, ReleaseHandsItBack) {
  CountingClosure c;
  google::protobuf::Closure* out;
  {
    rrpc::ClosureGuard g(&c);
    out = g.release();
    EXPECT_TRUE(g.empty());
  }
  EXPECT_EQ(&c, out);
  EXPECT_EQ(0, c.runs);
}

TEST(ClosureGuard, ResetRunsTheOldOneAndSwapTrades) {
  CountingClosure a, b;
  {
    rrpc::ClosureGuard g(&a);
    g.reset(&b);
    EXPECT_EQ(1, a.runs);
    EXPECT_EQ(0, b.runs);
    rrpc::ClosureGuard empty;
    empty.swap(g);
    EXPECT_TRUE(g.empty());
    EXPECT_FALSE(empty.empty());
  }
  EXPECT_EQ(1, a.runs);
  EXPECT_EQ(1, b.runs);
  rrpc::ClosureGuard none(nullptr);  // nothing to run, nothing crashes
}

// ---- NewCallback ----------------------------------------------------------------

int g_sum = 0;
std::string g_text;
void Add0() { g_sum += 1; }
void Add1(int a) { g_sum += a; }
void Add2(int a, int b) { g_sum += a * b; }
void Add3(int a, int b, const std::string& s) {
  g_sum += a + b;
  g_text = s;
}
void Keep(std::shared_ptr<int> p) { g_sum += *p; }

struct Target {
  void M0() { n += 1; }
  void M1(int a) { n += a; }
  void M2(int a, int* out) { *out = a + n; }
  void M3(int a, int b, std::string s) {
    n += a * b;
    text = s;
  }
  void C1(int* out) const { *out = n; }
  int n = 0;
  std::string text;
};

TEST(NewCallback, FreeFunctionsWithZeroToThreeArguments) {
  g_sum = 0;
  rrpc::NewCallback(&Add0)->Run();
  rrpc::NewCallback(&Add1, 10)->Run();
  rrpc::NewCallback(&Add2, 3, 4)->Run();
  rrpc::NewCallback(&Add3, 100, 200, "converted")->Run();  // const char* -> std::string
  EXPECT_EQ(1 + 10 + 12 + 300, g_sum);
  EXPECT_EQ("converted", g_text);
}

TEST(NewCallback, MethodsWithZeroToThreeArguments) {
  Target t;
  rrpc::NewCallback(&t, &Target::M0)->Run();
  rrpc::NewCallback(&t, &Target::M1, 5)->Run();
  int out = 0;
  rrpc::NewCallback(&t, &Target::M2, 100, &out)->Run();
  EXPECT_EQ(106, out);
  rrpc::NewCallback(&t, &Target::M3, 2, 3, std::string("m3"))->Run();
  EXPECT_EQ(12, t.n);
  EXPECT_EQ("m3", t.text);
  const Target& ct = t;
  rrpc::NewCallback(&ct, &Target::C1, &out)->Run();
  EXPECT_EQ(12, out);
}

TEST(NewCallback, OnceDeletesItselfAfterRunning) {
  // The closure holds a copy of the shared_ptr until it is deleted.
  auto p = std::make_shared<int>(7);
  g_sum = 0;
  google::protobuf::Closure* c = rrpc::NewCallback(&Keep, p);
  EXPECT_EQ(2, p.use_count());
  c->Run();
  EXPECT_EQ(7, g_sum);
  EXPECT_EQ(1, p.use_count());
}

TEST(NewCallback, PermanentRunsManyTimesUntilDeleted) {
  auto p = std::make_shared<int>(2);
  g_sum = 0;
  google::protobuf::Closure* c = rrpc::NewPermanentCallback(&Keep, p);
  c->Run();
  c->Run();
  c->Run();
  EXPECT_EQ(6, g_sum);
  EXPECT_EQ(2, p.use_count());
  delete c;
  EXPECT_EQ(1, p.use_count());
  Target t;
  google::protobuf::Closure* m = rrpc::NewPermanentCallback(&t, &Target::M1, 4);
  m->Run();
  m->Run();
  delete m;
  EXPECT_EQ(8, t.n);
}

TEST(NewCallback, DoNothingIsOneSharedClosure) {
  google::protobuf::Closure* a = rrpc::DoNothing();
  EXPECT_EQ(a, rrpc::DoNothing());
  a->Run();
  a->Run();  // permanent: still valid
}

// ---- EndPoint -------------------------------------------------------------------

TEST(EndPoint, ParsesAndPrintsIpv4) {
  rrpc::EndPoint p;
  ASSERT_EQ(0, rrpc::str2endpoint("127.0.0.1:8000", &p));
  EXPECT_EQ("127.0.0.1", rrpc::ip2str(p.ip));
  EXPECT_EQ(8000, p.port);
  EXPECT_TRUE(p.extended.empty());
  std::ostringstream os;
  os << p;
  EXPECT_EQ("127.0.0.1:8000", os.str());
  EXPECT_EQ("0.0.0.0:9", rrpc::endpoint2str(rrpc::EndPoint(rrpc::IP_ANY, 9)));
  rrpc::EndPoint q;
  ASSERT_EQ(0, rrpc::str2endpoint("127.0.0.1", 8000, &q));
  EXPECT_EQ(p, q);
  EXPECT_NE(p, rrpc::EndPoint(rrpc::IP_ANY, 8000));
}

TEST(EndPoint, Ipv6AndUnixKeepTheirText) {
  rrpc::EndPoint p;
  ASSERT_EQ(0, rrpc::str2endpoint("[0::0001]:81", &p));
  EXPECT_EQ("[::1]:81", rrpc::endpoint2str(p));  // canonical form
  ASSERT_EQ(0, rrpc::str2endpoint("::1", 82, &p));
  EXPECT_EQ("[::1]:82", rrpc::endpoint2str(p));
  ASSERT_EQ(0, rrpc::str2endpoint("unix:/tmp/x.sock", &p));
  EXPECT_EQ("unix:/tmp/x.sock", rrpc::endpoint2str(p));
}

TEST(EndPoint, RefusesMalformedTextAndLeavesTheOutputAlone) {
  rrpc::EndPoint p(rrpc::IP_ANY, 5);
  for (const char* bad : {"", "1.2.3.4", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:-1", "1.2.3.4:8x",
                          "::1:80", "[zz]:1", "[::1]", "unix:", "host.example:80", "1.2.3:80"}) {
    EXPECT_EQ(-1, rrpc::str2endpoint(bad, &p)) << bad;
  }
  EXPECT_EQ(-1, rrpc::str2endpoint(nullptr, &p));
  EXPECT_EQ(-1, rrpc::str2endpoint("1.2.3.4", 70000, &p));
  EXPECT_EQ(rrpc::EndPoint(rrpc::IP_ANY, 5), p);
}

// ---- printing an IOBuf ----------------------------------------------------------

TEST(IOBufPrinting, WritesEveryBlockInOrder) {
  rrpc::IOBuf a;
  std::string big = cxxtest::Pattern(100000, 3);  // several blocks
  ASSERT_EQ(0, a.append(big));
  rrpc::IOBuf b;
  ASSERT_EQ(0, b.append("head:"));
  ASSERT_EQ(0, b.append(a));  // shared blocks after a copied one
  ASSERT_GT(b.backing_block_num(), 1u);
  std::ostringstream os;
  os << b;
  EXPECT_EQ("head:" + big, os.str());
  std::ostringstream empty;
  empty << rrpc::IOBuf();
  EXPECT_EQ("", empty.str());
}

// ---- against a server -----------------------------------------------------------

// Records what a server method saw of its controller, brpc style (the
// ClosureGuard answers on every return path).
class SideService : public EchoServiceImpl {
 public:
  void Nothing(google::protobuf::RpcController* base, const cxxtest::Empty*, cxxtest::Empty*,
               google::protobuf::Closure* done) override {
    rrpc::ClosureGuard guard(done);
    auto* cntl = static_cast<rrpc::Controller*>(base);
    local = cntl->local_side();
    remote = cntl->remote_side();
    log_id = cntl->log_id();
  }
  std::string local, remote;
  int64_t log_id = -1;
};

class CxxBrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, server_.AddService(&service_, rrpc::SERVER_DOESNT_OWN_SERVICE));
    rrpc::EndPoint point;
    ASSERT_EQ(0, rrpc::str2endpoint("127.0.0.1:0", &point));
    ASSERT_EQ(0, server_.Start(point, nullptr));
    port_ = server_.listen_port();
    ASSERT_GT(port_, 0);
    rrpc::ChannelOptions opts;
    opts.timeout_ms = 10000;
    ASSERT_EQ(0, channel_.Init("127.0.0.1", port_, &opts));
  }
  void TearDown() override {
    service_.ReleaseHeld();
    server_.Stop();
    server_.Join();
  }

  SideService service_;
  rrpc::Server server_;
  rrpc::Channel channel_;
  int port_ = 0;
};

TEST_F(CxxBrpcTest, LocalAndRemoteSidesMirrorEachOther) {
  cxxtest::Empty req, resp;
  rrpc::Controller cntl;
  EXPECT_EQ("", cntl.local_side());
  cntl.set_log_id(4242);
  cxxtest::EchoService_Stub(&channel_).Nothing(&cntl, &req, &resp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ("127.0.0.1:" + std::to_string(port_), cntl.remote_side());
  EXPECT_EQ(0u, cntl.local_side().rfind("127.0.0.1:", 0)) << cntl.local_side();
  EXPECT_NE("127.0.0.1:0", cntl.local_side());
  EXPECT_EQ(cntl.remote_side(), service_.local);
  EXPECT_EQ(cntl.local_side(), service_.remote);
  EXPECT_EQ(4242, service_.log_id);
  cntl.Reset();
  EXPECT_EQ("", cntl.local_side());
}

struct AsyncDone {
  std::atomic<int> ran{0};
};

// brpc's callback shape: the callback owns and deletes the controller and
// the response.
void OnEcho(rrpc::Controller* cntl, EchoResponse* resp, AsyncDone* state, std::string* seen) {
  std::unique_ptr<rrpc::Controller> cntl_guard(cntl);
  std::unique_ptr<EchoResponse> resp_guard(resp);
  *seen = cntl->Failed() ? "failed: " + cntl->ErrorText() : resp->message();
  state->ran.fetch_add(1);
}

TEST_F(CxxBrpcTest, JoinWaitsUntilTheCallbackReturned) {
  auto* cntl = new rrpc::Controller;
  auto* resp = new EchoResponse;
  EchoRequest req;
  req.set_message("held");
  req.set_hold(true);  // the server answers only when the test releases it
  AsyncDone state;
  std::string seen;
  const rrpc::CallId id = cntl->call_id();  // before the call: done deletes cntl
  ASSERT_NE(0u, id.value);
  cxxtest::EchoService_Stub(&channel_).Echo(cntl, &req, resp,
                                            rrpc::NewCallback(&OnEcho, cntl, resp, &state, &seen));
  std::atomic<int> ran_when_joined{-1};
  std::thread joiner([&] {
    rrpc::Join(id);
    ran_when_joined = state.ran.load();
  });
  service_.WaitHeld(1);
  EXPECT_EQ(0, state.ran.load());
  service_.ReleaseHeld();
  joiner.join();
  EXPECT_EQ(1, ran_when_joined.load());
  EXPECT_EQ("held", seen);
  rrpc::Join(id);  // an ended id: at once, any number of times
}

TEST_F(CxxBrpcTest, JoinAfterTheCallWithDoNothing) {
  // brpc's other shape: controller on the stack, id taken after the call.
  for (int i = 0; i < 20; i++) {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("n" + std::to_string(i));
    cxxtest::EchoService_Stub(&channel_).Echo(&cntl, &req, &resp, rrpc::DoNothing());
    rrpc::Join(cntl.call_id());
    ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
    EXPECT_EQ(req.message(), resp.message());
  }
}

TEST_F(CxxBrpcTest, ManyAsyncCallsJoinedFromOneThread) {
  constexpr int kCalls = 64;
  std::vector<rrpc::CallId> ids;
  std::vector<std::string> seen(kCalls);
  AsyncDone state;
  for (int i = 0; i < kCalls; i++) {
    auto* cntl = new rrpc::Controller;
    auto* resp = new EchoResponse;
    EchoRequest req;
    req.set_message("m" + std::to_string(i));
    req.set_respond_from_thread(i % 2 == 0);
    ids.push_back(cntl->call_id());
    cxxtest::EchoService_Stub(&channel_).Echo(
        cntl, &req, resp, rrpc::NewCallback(&OnEcho, cntl, resp, &state, &seen[i]));
  }
  for (const rrpc::CallId& id : ids) rrpc::Join(id);
  EXPECT_EQ(kCalls, state.ran.load());
  for (int i = 0; i < kCalls; i++) EXPECT_EQ("m" + std::to_string(i), seen[i]);
}

TEST_F(CxxBrpcTest, IdsOfSyncFailedUnusedAndResetControllersJoinAtOnce) {
  rrpc::Join(rrpc::CallId{0});
  {
    rrpc::Controller unused;
    rrpc::CallId id = unused.call_id();
    rrpc::Controller* gone = new rrpc::Controller;
    rrpc::CallId gone_id = gone->call_id();
    delete gone;
    rrpc::Join(gone_id);
    unused.Reset();
    rrpc::Join(id);
    EXPECT_NE(id.value, unused.call_id().value);  // a new id after Reset
  }
  rrpc::Controller cntl;
  rrpc::CallId sync_id = cntl.call_id();
  EchoRequest req;
  EchoResponse resp;
  req.set_message("sync");
  cxxtest::EchoService_Stub(&channel_).Echo(&cntl, &req, &resp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  rrpc::Join(sync_id);
  EXPECT_EQ(sync_id.value, cntl.call_id().value);  // the ended call's id until Reset

  rrpc::Channel never;  // not initialized: done runs inside CallMethod
  rrpc::Controller failed;
  rrpc::CallId failed_id = failed.call_id();
  CountingClosure done;
  cxxtest::EchoService_Stub(&never).Echo(&failed, &req, &resp, &done);
  rrpc::Join(failed_id);
  EXPECT_TRUE(failed.Failed());
  EXPECT_EQ(1, done.runs);
}

TEST_F(CxxBrpcTest, ConnectionTypeNamesAndProtocol) {
  EchoRequest req;
  req.set_message("x");
  for (const char* name : {"", "single", "pooled", "short"}) {
    rrpc::ChannelOptions o;
    o.connection_type = name;
    o.protocol = "baidu_std";
    rrpc::Channel ch;
    ASSERT_EQ(0, ch.Init("127.0.0.1", port_, &o)) << name;
    rrpc::Controller cntl;
    EchoResponse resp;
    cxxtest::EchoService_Stub(&ch).Echo(&cntl, &req, &resp, nullptr);
    EXPECT_FALSE(cntl.Failed()) << name << ": " << cntl.ErrorText();
  }
  rrpc::ChannelOptions pooled;
  pooled.connection_type = std::string("pooled");
  EXPECT_EQ(rrpc::CONNECTION_TYPE_POOLED, pooled.connection_type);
  pooled.connection_type = rrpc::CONNECTION_TYPE_SHORT;
  EXPECT_EQ(rrpc::CONNECTION_TYPE_SHORT, pooled.connection_type);

  rrpc::ChannelOptions bad_type;
  bad_type.connection_type = "persistent";
  rrpc::Channel ch1;
  EXPECT_EQ(-1, ch1.Init("127.0.0.1", port_, &bad_type));
  rrpc::ChannelOptions http;
  http.protocol = "http";
  rrpc::Channel ch2;
  EXPECT_EQ(-1, ch2.Init("127.0.0.1", port_, &http));
}

TEST(ServerEndPoint, StartsOnIpAnyWithAPortFromTheEndPoint) {
  EchoServiceImpl service;
  rrpc::Server server;
  ASSERT_EQ(0, server.AddService(&service, rrpc::SERVER_DOESNT_OWN_SERVICE));
  ASSERT_EQ(0, server.Start(rrpc::EndPoint(rrpc::IP_ANY, 0), nullptr));
  EXPECT_GT(server.listen_port(), 0);
  rrpc::Channel ch;
  ASSERT_EQ(0, ch.Init("127.0.0.1", server.listen_port(), nullptr));
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("any");
  cxxtest::EchoService_Stub(&ch).Echo(&cntl, &req, &resp, nullptr);
  EXPECT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ("any", resp.message());
  server.Stop();
  server.Join();
}

// ---- after_rpc_resp_fn ------------------------------------------------------------

// A one-shot flag to wait on.
class Flag {
 public:
  void Set() {
    std::lock_guard<std::mutex> lk(mu_);
    set_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return set_; });
  }
  bool IsSet() {
    std::lock_guard<std::mutex> lk(mu_);
    return set_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

// Echo whose after_rpc_resp_fn records what it sees and then waits until the
// test lets it finish, so the client's answer provably came first.
class AfterService : public EchoServiceImpl {
 public:
  void Echo(google::protobuf::RpcController* base, const EchoRequest* req, EchoResponse* resp,
            google::protobuf::Closure* done) override {
    rrpc::ClosureGuard guard(done);
    auto* cntl = static_cast<rrpc::Controller*>(base);
    resp->set_message("re:" + req->message());
    cntl->response_attachment().append("att");
    cntl->set_after_rpc_resp_fn(
        [this](rrpc::Controller* c, const google::protobuf::Message* rq,
               const google::protobuf::Message* rs) {
          log_id = c->log_id();
          remote = c->remote_side();
          request = static_cast<const EchoRequest*>(rq)->message();
          response = static_cast<const EchoResponse*>(rs)->message();
          attachment = c->response_attachment().to_string();
          may_finish.Wait();
          finished.Set();
        });
  }
  int64_t log_id = -1;
  std::string remote, request, response, attachment;
  Flag may_finish, finished;
};

TEST(AfterRpcRespFn, RunsAfterTheResponseLeftWithEverythingStillValid) {
  AfterService service;
  rrpc::Server server;
  ASSERT_EQ(0, server.AddService(&service, rrpc::SERVER_DOESNT_OWN_SERVICE));
  ASSERT_EQ(0, server.Start("127.0.0.1:0", nullptr));
  rrpc::Channel ch;
  rrpc::ChannelOptions opts;
  opts.timeout_ms = 10000;
  ASSERT_EQ(0, ch.Init("127.0.0.1", server.listen_port(), &opts));
  rrpc::Controller cntl;
  cntl.set_log_id(77);
  EchoRequest req;
  EchoResponse resp;
  req.set_message("q");
  // Returns while the server's function still waits: the answer went first.
  cxxtest::EchoService_Stub(&ch).Echo(&cntl, &req, &resp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ("re:q", resp.message());
  EXPECT_FALSE(service.finished.IsSet());
  service.may_finish.Set();
  service.finished.Wait();
  EXPECT_EQ(77, service.log_id);
  EXPECT_EQ(cntl.local_side(), service.remote);
  EXPECT_EQ("q", service.request);
  EXPECT_EQ("re:q", service.response);
  EXPECT_EQ("att", service.attachment);
  server.Stop();
  server.Join();
}

// ---- json2pb ----------------------------------------------------------------------

TEST(Json2pb, PrintsProtoFieldNames) {
  EchoResponse resp;
  resp.set_message("hi");
  resp.set_attachment_ok(true);
  resp.set_remote_side("1.2.3.4:5");
  std::string json, error;
  ASSERT_TRUE(json2pb::ProtoMessageToJson(resp, &json, &error)) << error;
  EXPECT_EQ("{\"message\":\"hi\",\"attachment_ok\":true,\"remote_side\":\"1.2.3.4:5\"}", json);
  ASSERT_TRUE(json2pb::ProtoMessageToJson(resp, &json, nullptr));
}

}  // namespace
