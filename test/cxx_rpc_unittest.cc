// cxx_rpc_unittest.cc - rrpc::Server, rrpc::Channel and rrpc::Controller end
// to end on loopback TCP: sync/async calls, attachments, timeouts, error
// codes, unknown services/methods, many threads on one channel.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/stubs/callback.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/cxx/rrpc.h"
#include "rrpc/rdma.h"
#include "test/cxx_echo.pb.h"
#include "test/cxx_echo_service.h"

namespace {

using cxxtest::EchoRequest;
using cxxtest::EchoResponse;
using cxxtest::EchoServiceImpl;
using cxxtest::Pattern;

// Counts down to zero; Wait blocks until then.
class Latch {
 public:
  explicit Latch(int n) : n_(n) {}
  void CountDown() {
    std::lock_guard<std::mutex> lk(mu_);
    if (--n_ == 0) cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return n_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
};

class CxxRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, server_.AddService(&service_, rrpc::SERVER_DOESNT_OWN_SERVICE));
    ASSERT_EQ(0, server_.Start(0, nullptr));
    port_ = server_.listen_port();
    ASSERT_GT(port_, 0);
    rrpc::ChannelOptions opts;
    opts.timeout_ms = 5000;
    ASSERT_EQ(0, channel_.Init("127.0.0.1", port_, &opts));
  }

  EchoServiceImpl service_;
  rrpc::Server server_;
  rrpc::Channel channel_;
  int port_ = 0;
};

TEST_F(CxxRpcTest, SyncEcho) {
  cxxtest::EchoService_Stub stub(&channel_);
  for (int i = 0; i < 3; i++) {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("hello " + std::to_string(i));
    stub.Echo(&cntl, &req, &resp, nullptr);
    ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
    EXPECT_EQ(0, cntl.ErrorCode());
    EXPECT_EQ("", cntl.ErrorText());
    EXPECT_EQ(req.message(), resp.message());
    EXPECT_EQ("127.0.0.1:" + std::to_string(port_), cntl.remote_side());
    EXPECT_GT(cntl.latency_us(), 0);
    EXPECT_FALSE(cntl.used_rdma());
    // The server saw us from 127.0.0.1 on some port.
    EXPECT_EQ(0u, resp.remote_side().rfind("127.0.0.1:", 0)) << resp.remote_side();
  }
}

// brpc's examples call the cluster form with an empty load balancer for one
// server (echo_c++: Init(FLAGS_server, FLAGS_load_balancer = "", &options));
// brpc treats it as the single-server form, and so must rrpc.
TEST_F(CxxRpcTest, InitWithEmptyLoadBalancerIsTheSingleServerForm) {
  rrpc::ChannelOptions opts;
  opts.timeout_ms = 5000;
  const std::string addr = "127.0.0.1:" + std::to_string(port_);
  for (const char* lb : {"", static_cast<const char*>(nullptr)}) {
    rrpc::Channel ch;
    ASSERT_EQ(0, ch.Init(addr.c_str(), lb, &opts)) << (lb ? "\"\"" : "nullptr");
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("single");
    cxxtest::EchoService_Stub(&ch).Echo(&cntl, &req, &resp, nullptr);
    ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
    EXPECT_EQ("single", resp.message());
  }
}

// Records what reaches glog, to read the reason a call logged.
class TextSink : public google::LogSink {
 public:
  void send(google::LogSeverity, const char*, const char*, int, const struct ::tm*, const char* msg,
            size_t len) override {
    std::lock_guard<std::mutex> g(mu_);
    text_.append(msg, len).append("\n");
  }
  std::string text() {
    std::lock_guard<std::mutex> g(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::string text_;
};

// A wildcard address (echo_c++'s default server flag is 0.0.0.0:8000) is
// refused, and the log says why rather than a bare "Invalid argument".
TEST_F(CxxRpcTest, WildcardAddressIsRefusedSayingWhy) {
  TextSink sink;
  google::AddLogSink(&sink);
  rrpc::Channel a, b;
  int ra = a.Init(("0.0.0.0:" + std::to_string(port_)).c_str(), nullptr);
  int rb = b.Init(("[::]:" + std::to_string(port_)).c_str(), "", nullptr);
  google::RemoveLogSink(&sink);
  EXPECT_EQ(-1, ra);
  EXPECT_EQ(-1, rb);
  std::string text = sink.text();
  EXPECT_NE(std::string::npos, text.find("0.0.0.0:" + std::to_string(port_) + " is a wildcard address")) << text;
  EXPECT_NE(std::string::npos, text.find("is a wildcard address", text.find("[::]"))) << text;
}

// brpc's --graceful_quit_on_sigterm: once a Server started, SIGTERM is a
// quit request (IsAskedToQuit) rather than the end of the process, even
// before the program waits in RunUntilAskedToQuit. Run in a child (this
// binary again, this test alone): without the flag it dies of the signal.
TEST(CxxGracefulQuit, SigtermAfterStartIsAQuitRequestWithTheFlag) {
  const char* mode = getenv("RRPC_TEST_GRACEFUL_CHILD");
  if (mode != nullptr) {  // the child
    gflags::SetCommandLineOption("graceful_quit_on_sigterm", mode);
    EchoServiceImpl service;
    rrpc::Server server;
    ASSERT_EQ(0, server.AddService(&service, rrpc::SERVER_DOESNT_OWN_SERVICE));
    ASSERT_EQ(0, server.Start(0, nullptr));
    raise(SIGTERM);  // the handler, if any, has run when raise returns
    EXPECT_TRUE(rrpc::IsAskedToQuit());
    return;
  }
  // This binary, this test only, its output discarded; the exit status.
  auto run_child = [](const char* flag) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    std::string filter = "--gtest_filter=CxxGracefulQuit.SigtermAfterStartIsAQuitRequestWithTheFlag";
    std::string env = std::string("RRPC_TEST_GRACEFUL_CHILD=") + flag;
    char* argv[] = {self, filter.data(), nullptr};
    char* envp[] = {env.data(), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, self, &fa, nullptr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    if (rc != 0 || waitpid(pid, &status, 0) != pid) return -2;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  };
  EXPECT_EQ(0, run_child("true"));
  EXPECT_EQ(-SIGTERM, run_child("false")) << "without the flag SIGTERM kills, as before";
}

// A controller of a class derived from rrpc::Controller is still ours
// (CallMethod tells its own class by type and the rest by dynamic_cast); a
// controller of another RpcController class is refused, failed, and done
// still runs once.
class DerivedController : public rrpc::Controller {
 public:
  int extra = 7;
};

class ForeignController : public google::protobuf::RpcController {
 public:
  void Reset() override { failed_.clear(); }
  bool Failed() const override { return !failed_.empty(); }
  std::string ErrorText() const override { return failed_; }
  void StartCancel() override {}
  void SetFailed(const std::string& reason) override { failed_ = reason; }
  bool IsCanceled() const override { return false; }
  void NotifyOnCancel(google::protobuf::Closure*) override {}

 private:
  std::string failed_;
};

TEST_F(CxxRpcTest, DerivedControllersWorkForeignOnesAreRefused) {
  cxxtest::EchoService_Stub stub(&channel_);
  DerivedController derived;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("derived");
  stub.Echo(&derived, &req, &resp, nullptr);
  ASSERT_FALSE(derived.Failed()) << derived.ErrorText();
  EXPECT_EQ("derived", resp.message());
  EXPECT_EQ(7, derived.extra);

  ForeignController foreign;
  std::atomic<int> done_runs{0};
  std::unique_ptr<google::protobuf::Closure> done(
      google::protobuf::NewPermanentCallback(+[](std::atomic<int>* r) { (*r)++; }, &done_runs));
  resp.Clear();
  stub.Echo(&foreign, &req, &resp, done.get());
  EXPECT_TRUE(foreign.Failed());
  EXPECT_EQ("not an rrpc::Controller", foreign.ErrorText());
  EXPECT_EQ(1, done_runs.load());
  EXPECT_EQ("", resp.message());
}

// The server reuses a finished call's request and response messages for
// the next call of the method: nothing of one call may show in the next.
TEST_F(CxxRpcTest, ReusedCallsStartWithEmptyMessages) {
  cxxtest::EchoService_Stub stub(&channel_);
  for (int i = 0; i < 6; i++) {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("m" + std::to_string(i));
    if (i % 2 == 0) req.set_payload("payload of call " + std::to_string(i));
    if (i % 3 == 1) req.set_fail_code(rrpc::EREQUEST);
    stub.Echo(&cntl, &req, &resp, nullptr);
    if (i % 3 == 1) {
      EXPECT_TRUE(cntl.Failed()) << i;
      continue;
    }
    ASSERT_FALSE(cntl.Failed()) << i << ": " << cntl.ErrorText();
    EXPECT_EQ(req.message(), resp.message());
    EXPECT_EQ(req.has_payload(), resp.has_payload()) << "call " << i << " saw an earlier call's payload";
    if (req.has_payload()) {
      EXPECT_EQ(req.payload(), resp.payload());
    }
  }
}

TEST_F(CxxRpcTest, EmptyRequestAndResponseMessages) {
  cxxtest::EchoService_Stub stub(&channel_);
  rrpc::Controller cntl;
  cxxtest::Empty req, resp;
  stub.Nothing(&cntl, &req, &resp, nullptr);
  EXPECT_FALSE(cntl.Failed()) << cntl.ErrorText();
}

TEST_F(CxxRpcTest, AsyncEchoRunsDoneOnceAfterParsing) {
  constexpr int kCalls = 64;
  struct Slot {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    std::atomic<int> runs{0};
    std::string seen;  // the response as done saw it
  };
  std::vector<std::unique_ptr<Slot>> slots;
  Latch latch(kCalls);
  cxxtest::EchoService_Stub stub(&channel_);
  for (int i = 0; i < kCalls; i++) {
    slots.emplace_back(new Slot);
    Slot* s = slots.back().get();
    s->req.set_message("async " + std::to_string(i));
    s->req.set_respond_from_thread(i % 2 == 1);  // half answered from another thread
    google::protobuf::Closure* done = google::protobuf::NewCallback(
        +[](Slot* s, Latch* l) {
          s->runs++;
          s->seen = s->resp.message();
          l->CountDown();
        },
        s, &latch);
    stub.Echo(&s->cntl, &s->req, &s->resp, done);
  }
  latch.Wait();
  for (int i = 0; i < kCalls; i++) {
    Slot* s = slots[i].get();
    EXPECT_FALSE(s->cntl.Failed()) << s->cntl.ErrorText();
    EXPECT_EQ(1, s->runs.load());
    EXPECT_EQ(s->req.message(), s->seen);
  }
}

// An async call's records live in its Controller (C and C++) and are reused
// by the next call on it: a chain of calls on one Controller, each issued
// from the previous one's done, every third failing in the handler, sees
// each response and error as its own (nothing left over from the call
// before); a done may then delete its Controller (ASan would catch a touch
// after that).
TEST_F(CxxRpcTest, AsyncCallsReuseTheirControllerAndDoneMayDeleteIt) {
  constexpr int kCalls = 60;
  struct Chain {
    cxxtest::EchoService_Stub* stub;
    std::unique_ptr<rrpc::Controller> cntl{new rrpc::Controller};
    EchoRequest req;
    EchoResponse resp;
    int issued = 0;
    std::vector<std::string> seen;  // "ok:<message>" or "err:<code>:<text>"
    Latch* latch;
    void Issue() {
      cntl->Reset();
      req.Clear();
      resp.Clear();
      req.set_message("chain " + std::to_string(issued));
      if (issued % 3 == 2) {
        req.set_fail_code(rrpc::EINTERNAL);
        req.set_fail_text("no " + std::to_string(issued));
      }
      issued++;
      stub->Echo(cntl.get(), &req, &resp, google::protobuf::NewCallback(this, &Chain::Done));
    }
    void Done() {
      seen.push_back(cntl->Failed() ? "err:" + std::to_string(cntl->ErrorCode()) + ":" + cntl->ErrorText()
                                    : "ok:" + resp.message());
      if (issued < kCalls) {
        Issue();
        return;
      }
      cntl.reset();  // the last done deletes the Controller that carried it
      latch->CountDown();
    }
  };
  cxxtest::EchoService_Stub stub(&channel_);
  Latch latch(1);
  Chain chain;
  chain.stub = &stub;
  chain.latch = &latch;
  chain.Issue();
  latch.Wait();
  ASSERT_EQ(static_cast<size_t>(kCalls), chain.seen.size());
  for (int i = 0; i < kCalls; i++) {
    std::string want = i % 3 == 2 ? "err:" + std::to_string(rrpc::EINTERNAL) + ":no " + std::to_string(i)
                                  : "ok:chain " + std::to_string(i);
    EXPECT_EQ(want, chain.seen[i]) << "call " << i;
  }
  EXPECT_EQ(nullptr, chain.cntl.get());
}

// Attachments of many sizes in both directions, checked byte by byte on
// both sides.
TEST_F(CxxRpcTest, AttachmentsBothWays) {
  const size_t sizes[] = {0, 1, 100, 4095, 8192, 8193, 65536, 1u << 20, 3u << 20, 8u << 20};
  cxxtest::EchoService_Stub stub(&channel_);
  uint32_t seed = 1;
  for (size_t n : sizes) {
    for (bool echo : {false, true}) {
      rrpc::Controller cntl;
      EchoRequest req;
      EchoResponse resp;
      req.set_message("att");
      req.set_expect_attachment_size(static_cast<int64_t>(n));
      req.set_attachment_seed(seed);
      std::string att = Pattern(n, seed);
      ASSERT_EQ(0, cntl.request_attachment().append(att));
      if (echo) {
        req.set_echo_attachment(true);
      } else {
        // A response attachment of another size, made by the server.
        req.set_response_attachment_size(static_cast<int64_t>(n / 2 + 3));
      }
      stub.Echo(&cntl, &req, &resp, nullptr);
      ASSERT_FALSE(cntl.Failed()) << n << ": " << cntl.ErrorText();
      EXPECT_TRUE(resp.attachment_ok()) << "server saw a bad request attachment of " << n;
      if (echo) {
        EXPECT_TRUE(cxxtest::MatchesPattern(cntl.response_attachment(), n, seed)) << n;
      } else {
        EXPECT_TRUE(cxxtest::MatchesPattern(cntl.response_attachment(), n / 2 + 3, seed + 1)) << n;
      }
      seed++;
    }
  }
}

// A large message body goes through the zero-copy streams on both sides.
TEST_F(CxxRpcTest, LargeMessageBody) {
  cxxtest::EchoService_Stub stub(&channel_);
  for (size_t n : {size_t(5000), size_t(100000), size_t(3) << 20}) {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("big");
    req.set_payload(Pattern(n, 9));
    stub.Echo(&cntl, &req, &resp, nullptr);
    ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
    EXPECT_EQ(req.payload(), resp.payload());
  }
}

TEST_F(CxxRpcTest, TimeoutThenLateResponseIsDropped) {
  cxxtest::EchoService_Stub stub(&channel_);
  rrpc::Controller cntl;
  cntl.set_timeout_ms(50);
  EXPECT_EQ(50, cntl.timeout_ms());
  EchoRequest req;
  EchoResponse resp;
  req.set_message("slow");
  req.set_hold(true);
  stub.Echo(&cntl, &req, &resp, nullptr);
  EXPECT_TRUE(cntl.Failed());
  EXPECT_EQ(rrpc::ERPCTIMEDOUT, cntl.ErrorCode());
  EXPECT_EQ(1008, cntl.ErrorCode());
  EXPECT_GE(cntl.latency_us(), 50000);
  EXPECT_FALSE(resp.has_message());
  // Now the server answers; the response is late and dropped, and the
  // channel keeps working.
  service_.WaitHeld(1);
  service_.ReleaseHeld();
  cntl.Reset();
  EXPECT_EQ(0, cntl.timeout_ms());
  req.set_hold(false);
  req.set_message("after");
  stub.Echo(&cntl, &req, &resp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ("after", resp.message());
}

TEST_F(CxxRpcTest, ChannelTimeoutOption) {
  rrpc::ChannelOptions opts;
  opts.timeout_ms = 30;
  rrpc::Channel ch;
  ASSERT_EQ(0, ch.Init(("127.0.0.1:" + std::to_string(port_)).c_str(), &opts));
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("slow");
  req.set_hold(true);
  cxxtest::EchoService_Stub(&ch).Echo(&cntl, &req, &resp, nullptr);
  EXPECT_EQ(rrpc::ERPCTIMEDOUT, cntl.ErrorCode());
  service_.WaitHeld(1);
  service_.ReleaseHeld();
}

TEST_F(CxxRpcTest, SetFailedCodesReachTheClient) {
  cxxtest::EchoService_Stub stub(&channel_);
  {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("x");
    req.set_fail_code(12345);
    req.set_fail_text("boom 7");
    stub.Echo(&cntl, &req, &resp, nullptr);
    EXPECT_TRUE(cntl.Failed());
    EXPECT_EQ(12345, cntl.ErrorCode());
    EXPECT_NE(std::string::npos, cntl.ErrorText().find("boom 7")) << cntl.ErrorText();
  }
  {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("x");
    req.set_fail_code(rrpc::ELIMIT);
    req.set_fail_text("too busy");
    stub.Echo(&cntl, &req, &resp, nullptr);
    EXPECT_EQ(rrpc::ELIMIT, cntl.ErrorCode());
    EXPECT_EQ(2004, cntl.ErrorCode());
  }
  {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("x");
    req.set_fail_with_string(true);
    req.set_fail_text("plain reason");
    stub.Echo(&cntl, &req, &resp, nullptr);
    EXPECT_EQ(rrpc::EINTERNAL, cntl.ErrorCode());
    EXPECT_NE(std::string::npos, cntl.ErrorText().find("plain reason"));
  }
}

TEST_F(CxxRpcTest, MethodThatThrowsFailsWithEINTERNAL) {
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("x");
  req.set_throw_exception(true);
  cxxtest::EchoService_Stub(&channel_).Echo(&cntl, &req, &resp, nullptr);
  EXPECT_EQ(rrpc::EINTERNAL, cntl.ErrorCode());
  EXPECT_NE(std::string::npos, cntl.ErrorText().find("echo threw on purpose")) << cntl.ErrorText();
  // The method kept done; running it now sends nothing more and frees the
  // call (the sanitizer build checks that nothing leaks).
  service_.WaitHeld(1);
  service_.ReleaseHeld();
  cntl.Reset();
  req.set_throw_exception(false);
  cxxtest::EchoService_Stub(&channel_).Echo(&cntl, &req, &resp, nullptr);
  EXPECT_FALSE(cntl.Failed()) << cntl.ErrorText();
}

TEST_F(CxxRpcTest, ResponseMissingRequiredFieldsIsERESPONSE) {
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("x");
  req.set_leave_response_empty(true);
  cxxtest::EchoService_Stub(&channel_).Echo(&cntl, &req, &resp, nullptr);
  EXPECT_EQ(rrpc::ERESPONSE, cntl.ErrorCode()) << cntl.ErrorText();
}

TEST_F(CxxRpcTest, UnparsableRequestIsEREQUEST) {
  // Empty serializes to nothing, which lacks EchoRequest's required field.
  const google::protobuf::MethodDescriptor* echo =
      cxxtest::EchoService::descriptor()->FindMethodByName("Echo");
  rrpc::Controller cntl;
  cxxtest::Empty req;
  EchoResponse resp;
  channel_.CallMethod(echo, &cntl, &req, &resp, nullptr);
  EXPECT_EQ(rrpc::EREQUEST, cntl.ErrorCode()) << cntl.ErrorText();
}

TEST_F(CxxRpcTest, UnknownServiceAndMethod) {
  {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("x");
    cxxtest::UnregisteredService_Stub(&channel_).Echo(&cntl, &req, &resp, nullptr);
    EXPECT_EQ(rrpc::ENOSERVICE, cntl.ErrorCode()) << cntl.ErrorText();
  }
  {
    // The same service with one more method, built in a pool of its own.
    google::protobuf::FileDescriptorProto fdp;
    cxxtest::EchoService::descriptor()->file()->CopyTo(&fdp);
    for (auto& svc : *fdp.mutable_service()) {
      if (svc.name() != "EchoService") continue;
      auto* m = svc.add_method();
      m->set_name("Missing");
      m->set_input_type(".cxxtest.EchoRequest");
      m->set_output_type(".cxxtest.EchoResponse");
    }
    google::protobuf::DescriptorPool pool;
    const google::protobuf::FileDescriptor* fd = pool.BuildFile(fdp);
    ASSERT_NE(nullptr, fd);
    const google::protobuf::MethodDescriptor* missing =
        fd->FindServiceByName("EchoService")->FindMethodByName("Missing");
    ASSERT_NE(nullptr, missing);
    EXPECT_EQ("cxxtest.EchoService", missing->service()->full_name());
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("x");
    channel_.CallMethod(missing, &cntl, &req, &resp, nullptr);
    EXPECT_EQ(rrpc::ENOMETHOD, cntl.ErrorCode()) << cntl.ErrorText();
  }
}

// The channel prepares each method once and finds it by its descriptor in
// a few slots: many methods (more than slots) called from many threads at
// once each reach the server under their own names - the real ones answer,
// the missing ones fail with ENOMETHOD naming themselves.
TEST_F(CxxRpcTest, ManyMethodsFromManyThreadsEachKeepTheirNames) {
  google::protobuf::FileDescriptorProto fdp;
  cxxtest::EchoService::descriptor()->file()->CopyTo(&fdp);
  constexpr int kMissing = 40;
  for (auto& svc : *fdp.mutable_service()) {
    if (svc.name() != "EchoService") continue;
    for (int i = 0; i < kMissing; i++) {
      auto* m = svc.add_method();
      m->set_name("Missing" + std::to_string(i));
      m->set_input_type(".cxxtest.EchoRequest");
      m->set_output_type(".cxxtest.EchoResponse");
    }
  }
  google::protobuf::DescriptorPool pool;
  const google::protobuf::FileDescriptor* fd = pool.BuildFile(fdp);
  ASSERT_NE(nullptr, fd);
  const google::protobuf::ServiceDescriptor* svc = fd->FindServiceByName("EchoService");
  std::vector<const google::protobuf::MethodDescriptor*> methods;
  for (int i = 0; i < svc->method_count(); i++) methods.push_back(svc->method(i));
  methods.push_back(cxxtest::EchoService::descriptor()->FindMethodByName("Echo"));  // generated pool

  constexpr int kThreads = 6, kRounds = 3;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; r++) {
        for (size_t k = 0; k < methods.size(); k++) {
          const google::protobuf::MethodDescriptor* md = methods[(k + static_cast<size_t>(t) * 7) % methods.size()];
          rrpc::Controller cntl;
          EchoRequest req;
          EchoResponse resp;
          req.set_message(md->name() + "/" + std::to_string(t));
          channel_.CallMethod(md, &cntl, &req, &resp, nullptr);
          bool ok;
          if (md->name() == "Echo") {
            ok = !cntl.Failed() && resp.message() == req.message();
          } else if (md->name() == "Nothing") {
            ok = !cntl.Failed() || cntl.ErrorCode() == rrpc::ERESPONSE;  // Empty into EchoResponse
          } else {
            ok = cntl.ErrorCode() == rrpc::ENOMETHOD &&
                 cntl.ErrorText().find("no method '" + md->name() + "'") != std::string::npos;
          }
          if (!ok) failures++;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(0, failures.load());
}

TEST_F(CxxRpcTest, RequestMissingRequiredFieldsFailsBeforeSending) {
  cxxtest::EchoService_Stub stub(&channel_);
  rrpc::Controller cntl;
  EchoRequest req;  // no message
  EchoResponse resp;
  stub.Echo(&cntl, &req, &resp, nullptr);
  EXPECT_EQ(rrpc::EREQUEST, cntl.ErrorCode());
  // Async: done still runs exactly once.
  cntl.Reset();
  int runs = 0;
  stub.Echo(&cntl, &req, &resp, google::protobuf::NewCallback(+[](int* r) { (*r)++; }, &runs));
  EXPECT_EQ(1, runs);
  EXPECT_EQ(rrpc::EREQUEST, cntl.ErrorCode());
}

TEST_F(CxxRpcTest, ManyThreadsOnOneChannel) {
  constexpr int kThreads = 8;
  constexpr int kSyncCalls = 300;
  constexpr int kAsyncCalls = 100;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      cxxtest::EchoService_Stub stub(&channel_);
      for (int i = 0; i < kSyncCalls; i++) {
        rrpc::Controller cntl;
        EchoRequest req;
        EchoResponse resp;
        req.set_message("t" + std::to_string(t) + "-" + std::to_string(i));
        std::string att = Pattern(static_cast<size_t>(i * 37 % 5000), static_cast<uint32_t>(t));
        cntl.request_attachment().append(att);
        req.set_echo_attachment(true);
        stub.Echo(&cntl, &req, &resp, nullptr);
        if (cntl.Failed() || resp.message() != req.message() ||
            !cntl.response_attachment().equals(att)) {
          failures++;
        }
      }
      // Then a burst of async calls from the same thread.
      struct Slot {
        rrpc::Controller cntl;
        EchoRequest req;
        EchoResponse resp;
      };
      std::vector<std::unique_ptr<Slot>> slots;
      Latch latch(kAsyncCalls);
      for (int i = 0; i < kAsyncCalls; i++) {
        slots.emplace_back(new Slot);
        Slot* s = slots.back().get();
        s->req.set_message("a" + std::to_string(t) + "-" + std::to_string(i));
        stub.Echo(&s->cntl, &s->req, &s->resp,
                  google::protobuf::NewCallback(&latch, &Latch::CountDown));
      }
      latch.Wait();
      for (auto& s : slots) {
        if (s->cntl.Failed() || s->resp.message() != s->req.message()) failures++;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(0, failures.load());
}

TEST_F(CxxRpcTest, SyncCallFromDoneFailsWithEDEADLK) {
  cxxtest::EchoService_Stub stub(&channel_);
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("outer");
  struct Inner {
    rrpc::Channel* ch;
    int code = -1;
    Latch latch{1};
  } inner;
  inner.ch = &channel_;
  stub.Echo(&cntl, &req, &resp, google::protobuf::NewCallback(+[](Inner* in) {
              rrpc::Controller c2;
              EchoRequest r2;
              EchoResponse p2;
              r2.set_message("inner");
              cxxtest::EchoService_Stub(in->ch).Echo(&c2, &r2, &p2, nullptr);
              in->code = c2.ErrorCode();
              in->latch.CountDown();
            }, &inner));
  inner.latch.Wait();
  EXPECT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ(EDEADLK, inner.code);
}

TEST_F(CxxRpcTest, NotifyOnCancelRunsOnce) {
  // Client side: runs at once (rrpc never cancels).
  rrpc::Controller cntl;
  int runs = 0;
  cntl.NotifyOnCancel(google::protobuf::NewCallback(+[](int* r) { (*r)++; }, &runs));
  EXPECT_EQ(1, runs);
  cntl.StartCancel();
  EXPECT_FALSE(cntl.IsCanceled());
}

// Server side: a handler's NotifyOnCancel closure runs exactly once per
// call, whether it was registered before done->Run() (run on respond) or
// after it (run when the call object is reused for the next request, or
// freed) - also while the server reuses one call object per method.
class CancelNotingService : public cxxtest::EchoService {
 public:
  std::atomic<int> registered{0}, runs{0};
  void Echo(google::protobuf::RpcController* cntl, const EchoRequest* req, EchoResponse* resp,
            google::protobuf::Closure* done) override {
    bool late = req->message() == "late";
    if (!late) Register(cntl);
    resp->set_message(req->message());
    done->Run();
    if (late) Register(cntl);
  }

 private:
  void Register(google::protobuf::RpcController* cntl) {
    registered++;
    cntl->NotifyOnCancel(google::protobuf::NewCallback(+[](std::atomic<int>* r) { (*r)++; }, &runs));
  }
};

TEST(CxxServerTest, NotifyOnCancelClosuresRunOncePerCall) {
  CancelNotingService svc;
  {
    rrpc::Server server;
    ASSERT_EQ(0, server.AddService(&svc, rrpc::SERVER_DOESNT_OWN_SERVICE));
    ASSERT_EQ(0, server.Start(0, nullptr));
    rrpc::Channel ch;
    ASSERT_EQ(0, ch.Init("127.0.0.1", server.listen_port(), nullptr));
    cxxtest::EchoService_Stub stub(&ch);
    for (int i = 0; i < 20; i++) {
      rrpc::Controller cntl;
      EchoRequest req;
      EchoResponse resp;
      req.set_message(i % 3 == 0 ? "late" : "early");
      stub.Echo(&cntl, &req, &resp, nullptr);
      ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
    }
    server.Stop(0);
    server.Join();
  }  // the server and its spare call objects are gone: every closure ran
  EXPECT_EQ(20, svc.registered.load());
  EXPECT_EQ(20, svc.runs.load());
}

TEST_F(CxxRpcTest, StopFailsPendingCallsAndJoinWaitsForHeldDone) {
  cxxtest::EchoService_Stub stub(&channel_);
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("held");
  req.set_hold(true);
  Latch done(1);
  stub.Echo(&cntl, &req, &resp, google::protobuf::NewCallback(&done, &Latch::CountDown));
  service_.WaitHeld(1);
  EXPECT_TRUE(server_.IsRunning());
  server_.Stop(0);
  EXPECT_FALSE(server_.IsRunning());
  done.Wait();
  EXPECT_EQ(rrpc::ECLOSE, cntl.ErrorCode()) << cntl.ErrorText();
  // Join waits for the held call; release it from another thread.
  std::thread releaser([this] { service_.ReleaseHeld(); });
  server_.Join();
  releaser.join();
  EXPECT_EQ(-1, server_.listen_port());
  // The server can start again.
  ASSERT_EQ(0, server_.Start(0, nullptr));
  rrpc::Channel ch;
  ASSERT_EQ(0, ch.Init("127.0.0.1", server_.listen_port(), nullptr));
  rrpc::Controller c2;
  req.set_hold(false);
  cxxtest::EchoService_Stub(&ch).Echo(&c2, &req, &resp, nullptr);
  EXPECT_FALSE(c2.Failed()) << c2.ErrorText();
}

TEST(CxxServerTest, AddServiceRules) {
  rrpc::Server server;
  EchoServiceImpl a, b;
  EXPECT_EQ(-1, server.AddService(nullptr, rrpc::SERVER_DOESNT_OWN_SERVICE));
  EXPECT_EQ(0, server.AddService(&a, rrpc::SERVER_DOESNT_OWN_SERVICE));
  EXPECT_EQ(-1, server.AddService(&b, rrpc::SERVER_DOESNT_OWN_SERVICE));  // same full name
  EXPECT_EQ(-1, server.listen_port());
  EXPECT_EQ(0, server.Start("127.0.0.1:0", nullptr));
  EXPECT_GT(server.listen_port(), 0);
  EXPECT_EQ(-1, server.Start(0, nullptr));  // twice
  cxxtest::EchoServiceImpl late;
  EXPECT_EQ(-1, server.AddService(&late, rrpc::SERVER_DOESNT_OWN_SERVICE));  // started
  // Two servers on one port: the second cannot bind.
  rrpc::Server other;
  EchoServiceImpl c;
  EXPECT_EQ(0, other.AddService(&c, rrpc::SERVER_DOESNT_OWN_SERVICE));
  EXPECT_EQ(-1, other.Start(server.listen_port(), nullptr));
  EXPECT_EQ(-1, other.Start(70000, nullptr));
}

TEST(CxxServerTest, OwnedServiceIsDeleted) {
  static int deleted;
  deleted = 0;
  struct Counted : EchoServiceImpl {
    ~Counted() override { deleted++; }
  };
  {
    rrpc::Server server;
    EXPECT_EQ(0, server.AddService(new Counted, rrpc::SERVER_OWNS_SERVICE));
    EXPECT_EQ(0, server.Start(0, nullptr));
  }
  EXPECT_EQ(1, deleted);
}

// A method that blocks (here: a sync call to another server) is fine when
// handlers run on the worker pool.
TEST(CxxServerTest, HandlersInPoolMayBlock) {
  EchoServiceImpl back_service, front_service;
  rrpc::Server back, front;
  ASSERT_EQ(0, back.AddService(&back_service, rrpc::SERVER_DOESNT_OWN_SERVICE));
  ASSERT_EQ(0, back.Start(0, nullptr));
  ASSERT_EQ(0, front.AddService(&front_service, rrpc::SERVER_DOESNT_OWN_SERVICE));
  rrpc::ServerOptions opts;
  opts.handlers_in_pool = true;
  opts.pool_threads = 2;
  ASSERT_EQ(0, front.Start(0, &opts));
  rrpc::Channel ch;
  ASSERT_EQ(0, ch.Init("127.0.0.1", front.listen_port(), nullptr));
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("m");
  req.set_forward_port(back.listen_port());
  cxxtest::EchoService_Stub(&ch).Echo(&cntl, &req, &resp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ("forwarded:m", resp.message());
}

TEST(CxxChannelTest, ErrorsWithoutAServer) {
  rrpc::Channel uninit;
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("x");
  cxxtest::EchoService_Stub(&uninit).Echo(&cntl, &req, &resp, nullptr);
  EXPECT_EQ(rrpc::ENOTREADY, cntl.ErrorCode());

  rrpc::Channel bad;
  EXPECT_EQ(-1, bad.Init("not an address", nullptr));
  EXPECT_EQ(-1, bad.Init(nullptr, nullptr));

  // A port nobody listens on: bind one, note it, close it.
  int port;
  {
    rrpc::Server s;
    EchoServiceImpl svc;
    ASSERT_EQ(0, s.AddService(&svc, rrpc::SERVER_DOESNT_OWN_SERVICE));
    ASSERT_EQ(0, s.Start(0, nullptr));
    port = s.listen_port();
  }
  rrpc::Channel ch;
  ASSERT_EQ(0, ch.Init("127.0.0.1", port, nullptr));
  EXPECT_EQ(-1, ch.Init("127.0.0.1", port, nullptr));  // twice
  cntl.Reset();
  cxxtest::EchoService_Stub(&ch).Echo(&cntl, &req, &resp, nullptr);
  EXPECT_TRUE(cntl.Failed());
  EXPECT_EQ(ECONNREFUSED, cntl.ErrorCode()) << cntl.ErrorText();
}

#if !defined(RRPC_WITH_RDMA)
TEST(CxxRdmaTest, UseRdmaWithoutRdmaBuildFailsClearly) {
  rrpc::ChannelOptions copts;
  copts.use_rdma = true;
  rrpc::Channel ch;
  EXPECT_EQ(-1, ch.Init("127.0.0.1:8002", &copts));
  rrpc::Server server;
  EchoServiceImpl svc;
  ASSERT_EQ(0, server.AddService(&svc, rrpc::SERVER_DOESNT_OWN_SERVICE));
  rrpc::ServerOptions sopts;
  sopts.use_rdma = true;
  EXPECT_EQ(-1, server.Start(0, &sopts));
  EXPECT_FALSE(server.IsRunning());
  // The text says how to build with RDMA.
  EXPECT_NE(nullptr, strstr(rrpc_strerror(-RRPC_ENORDMA), "--with-rdma"));
}
#else
// An RDMA build: use_rdma on both ends works, over RDMA where a device is
// usable and over TCP (the default --rdma_fallback) where none is.
TEST(CxxRdmaTest, UseRdmaFallsBackToTcpWithoutADevice) {
  rrpc::Server server;
  EchoServiceImpl svc;
  ASSERT_EQ(0, server.AddService(&svc, rrpc::SERVER_DOESNT_OWN_SERVICE));
  rrpc::ServerOptions sopts;
  sopts.use_rdma = true;
  ASSERT_EQ(0, server.Start("127.0.0.1:0", &sopts));
  rrpc::ChannelOptions copts;
  copts.use_rdma = true;
  copts.timeout_ms = 5000;
  rrpc::Channel ch;
  ASSERT_EQ(0, ch.Init("127.0.0.1", server.listen_port(), &copts));
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("rdma?");
  req.set_echo_attachment(true);
  cntl.request_attachment().append(Pattern(200000, 11));
  cxxtest::EchoService_Stub(&ch).Echo(&cntl, &req, &resp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ("rdma?", resp.message());
  EXPECT_TRUE(cxxtest::MatchesPattern(cntl.response_attachment(), 200000, 11));
  if (!rrpc_rdma_available()) {
    EXPECT_FALSE(cntl.used_rdma());
  }
}
#endif

}  // namespace
