// cxx_callctl_unittest.cc - call control in the C++ face: StartCancel on sync
// and async calls, a server method reading its caller's deadline and log_id,
// a nested call inheriting the deadline, and servers/channels on IPv6 and
// unix-socket addresses.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/cxx/rrpc.h"
#include "test/cxx_echo.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using cxxtest::EchoRequest;
using cxxtest::EchoResponse;

int64_t us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

// Records what each call saw; holds calls that ask for it; forwards to
// forward_port with a controller that inherits the caller's deadline.
class CallCtlService : public cxxtest::EchoService {
 public:
  void Echo(google::protobuf::RpcController* base, const EchoRequest* req, EchoResponse* resp,
            google::protobuf::Closure* done) override {
    auto* cntl = static_cast<rrpc::Controller*>(base);
    int nested_code = -1;
    int64_t nested_us = 0;
    if (req->has_forward_port()) {
      rrpc::Channel ch;
      rrpc::ChannelOptions opts;
      opts.timeout_ms = 10000;
      if (ch.Init("127.0.0.1", req->forward_port(), &opts) == 0) {
        rrpc::Controller child;
        child.InheritDeadline(*cntl);
        EchoRequest freq;
        EchoResponse fresp;
        freq.set_message(req->message());
        freq.set_hold(req->hold());
        auto t0 = Clock::now();
        cxxtest::EchoService_Stub(&ch).Echo(&child, &freq, &fresp, nullptr);
        nested_us = us_between(t0, Clock::now());
        nested_code = child.ErrorCode();
      }
    }
    std::unique_lock<std::mutex> lk(mu_);
    remaining_ms_ = cntl->remaining_ms();
    read_at_ = Clock::now();
    log_id_ = cntl->log_id();
    nested_code_ = nested_code;
    nested_us_ = nested_us;
    rounds_++;
    cv_.notify_all();
    resp->set_message(req->message());
    if (req->hold() && !req->has_forward_port()) {
      held_.push_back(done);
      return;
    }
    lk.unlock();
    done->Run();
  }
  void WaitRounds(int n) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return rounds_ >= n; });
  }
  void WaitHeld(size_t n) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return held_.size() >= n; });
  }
  void ReleaseHeld() {
    std::deque<google::protobuf::Closure*> h;
    {
      std::lock_guard<std::mutex> lk(mu_);
      h.swap(held_);
    }
    for (auto* d : h) d->Run();
  }
  int64_t remaining_ms() {
    std::lock_guard<std::mutex> lk(mu_);
    return remaining_ms_;
  }
  // When the method last read remaining_ms.
  Clock::time_point read_at() {
    std::lock_guard<std::mutex> lk(mu_);
    return read_at_;
  }
  int64_t log_id() {
    std::lock_guard<std::mutex> lk(mu_);
    return log_id_;
  }
  int nested_code() {
    std::lock_guard<std::mutex> lk(mu_);
    return nested_code_;
  }
  int64_t nested_us() {
    std::lock_guard<std::mutex> lk(mu_);
    return nested_us_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<google::protobuf::Closure*> held_;
  int64_t remaining_ms_ = -2, log_id_ = 0, nested_us_ = 0;
  Clock::time_point read_at_;
  int nested_code_ = -1;
  int rounds_ = 0;
};

class CxxCallCtl : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, server_.AddService(&service_, rrpc::SERVER_DOESNT_OWN_SERVICE));
    ASSERT_EQ(0, server_.Start(0, nullptr));
    port_ = server_.listen_port();
    rrpc::ChannelOptions opts;
    opts.timeout_ms = 10000;
    ASSERT_EQ(0, channel_.Init("127.0.0.1", port_, &opts));
  }
  void TearDown() override {
    service_.ReleaseHeld();
    server_.Stop(0);
    server_.Join();
  }
  CallCtlService service_;
  rrpc::Server server_;
  rrpc::Channel channel_;
  int port_ = 0;
};

TEST_F(CxxCallCtl, StartCancelEndsSyncAndAsyncCallsWithin1ms) {
  cxxtest::EchoService_Stub stub(&channel_);
  const int kRounds = 10;
  std::vector<int64_t> sync_lat, async_lat;
  for (int i = 0; i < kRounds; i++) {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("s");
    req.set_hold(true);
    Clock::time_point t1;
    std::thread caller([&] {
      stub.Echo(&cntl, &req, &resp, nullptr);
      t1 = Clock::now();
    });
    service_.WaitHeld(static_cast<size_t>(2 * i + 1));
    auto t0 = Clock::now();
    cntl.StartCancel();
    caller.join();
    sync_lat.push_back(us_between(t0, t1));
    EXPECT_TRUE(cntl.Failed());
    EXPECT_EQ(ECANCELED, cntl.ErrorCode());
    EXPECT_TRUE(cntl.IsCanceled());

    rrpc::Controller acntl;
    std::mutex mu;
    std::condition_variable cv;
    int runs = 0;
    Clock::time_point done_at;
    struct Ctx {
      std::mutex* mu;
      std::condition_variable* cv;
      int* runs;
      Clock::time_point* at;
      void Run() {
        std::lock_guard<std::mutex> lk(*mu);
        ++*runs;
        *at = Clock::now();
        cv->notify_all();
      }
    } ctx{&mu, &cv, &runs, &done_at};
    stub.Echo(&acntl, &req, &resp, google::protobuf::NewCallback(&ctx, &Ctx::Run));
    service_.WaitHeld(static_cast<size_t>(2 * i + 2));
    auto a0 = Clock::now();
    acntl.StartCancel();
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return runs > 0; });
    async_lat.push_back(us_between(a0, done_at));
    EXPECT_EQ(ECANCELED, acntl.ErrorCode());
    acntl.StartCancel();  // over: a no-op
    EXPECT_EQ(1, runs);
  }
  service_.ReleaseHeld();
  std::sort(sync_lat.begin(), sync_lat.end());
  std::sort(async_lat.begin(), async_lat.end());
  printf("StartCancel: sync median %lld us (max %lld), async median %lld us (max %lld) over %d\n",
         (long long)sync_lat[kRounds / 2], (long long)sync_lat.back(), (long long)async_lat[kRounds / 2],
         (long long)async_lat.back(), kRounds);
  EXPECT_LT(sync_lat[kRounds / 2], 1000);
  EXPECT_LT(async_lat[kRounds / 2], 1000);
  EXPECT_LT(sync_lat.back(), 200000);
  EXPECT_LT(async_lat.back(), 200000);
  // The channel still works, and the controller carries a new call.
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("after");
  stub.Echo(&cntl, &req, &resp, nullptr);
  EXPECT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_FALSE(cntl.IsCanceled());
}

TEST_F(CxxCallCtl, MethodSeesDeadlineAndLogId) {
  cxxtest::EchoService_Stub stub(&channel_);
  rrpc::Controller cntl;
  cntl.set_timeout_ms(3000);
  cntl.set_log_id(4242);
  EchoRequest req;
  EchoResponse resp;
  req.set_message("d");
  auto t0 = Clock::now();
  stub.Echo(&cntl, &req, &resp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  // Less at most the transit this run measured (before the call to the
  // method's read, one clock) and 2 ms of rounding to whole ms.
  int64_t transit_ms = (us_between(t0, service_.read_at()) + 999) / 1000;
  printf("timeout 3000 ms: the method saw %lld ms left, %lld ms after the call began\n",
         (long long)service_.remaining_ms(), (long long)transit_ms);
  EXPECT_LE(service_.remaining_ms(), 3000);
  EXPECT_GE(service_.remaining_ms(), 3000 - transit_ms - 2);
  EXPECT_EQ(4242, service_.log_id());
  EXPECT_EQ(-1, cntl.remaining_ms());  // a client controller inherited nothing
}

// A method forwards to a second server that holds the call: the nested call
// ends at the outer caller's 300 ms deadline, not at its own 10 s.
TEST_F(CxxCallCtl, NestedCallInheritsTheDeadline) {
  CallCtlService inner;
  rrpc::Server inner_server;
  ASSERT_EQ(0, inner_server.AddService(&inner, rrpc::SERVER_DOESNT_OWN_SERVICE));
  ASSERT_EQ(0, inner_server.Start(0, nullptr));
  cxxtest::EchoService_Stub stub(&channel_);
  rrpc::Controller cntl;
  cntl.set_timeout_ms(300);
  EchoRequest req;
  EchoResponse resp;
  req.set_message("n");
  req.set_hold(true);
  req.set_forward_port(inner_server.listen_port());
  stub.Echo(&cntl, &req, &resp, nullptr);
  EXPECT_EQ(rrpc::ERPCTIMEDOUT, cntl.ErrorCode());
  service_.WaitRounds(1);
  printf("outer timeout 300 ms: the nested call ended after %lld us with %d\n",
         (long long)service_.nested_us(), service_.nested_code());
  EXPECT_EQ(rrpc::ERPCTIMEDOUT, service_.nested_code());
  EXPECT_LT(service_.nested_us(), 2000000);
  EXPECT_LE(inner.remaining_ms(), 300);
  inner.ReleaseHeld();
  inner_server.Stop(0);
  inner_server.Join();
}

bool have_ipv6_loopback() {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 sa = {};
  sa.sin6_family = AF_INET6;
  sa.sin6_addr = in6addr_loopback;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  close(fd);
  return ok;
}

void EchoOnce(rrpc::Channel* ch, const std::string& expect_remote) {
  cxxtest::EchoService_Stub stub(ch);
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("addr");
  stub.Echo(&cntl, &req, &resp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ("addr", resp.message());
  EXPECT_EQ(expect_remote, cntl.remote_side());
  EXPECT_FALSE(cntl.used_rdma());
}

TEST(CxxAddr, IPv6AndUnixSocket) {
  CallCtlService svc;
  if (have_ipv6_loopback()) {
    rrpc::Server s6;
    ASSERT_EQ(0, s6.AddService(&svc, rrpc::SERVER_DOESNT_OWN_SERVICE));
    ASSERT_EQ(0, s6.Start("[::1]:0", nullptr));
    rrpc::Channel by_text, by_ip_port;
    std::string addr = "[::1]:" + std::to_string(s6.listen_port());
    ASSERT_EQ(0, by_text.Init(addr.c_str(), nullptr));
    ASSERT_EQ(0, by_ip_port.Init("::1", s6.listen_port(), nullptr));
    EchoOnce(&by_text, addr);
    EchoOnce(&by_ip_port, addr);
    s6.Stop(0);
    s6.Join();
  }
  std::string path = "/tmp/rrpc-cxx-addr-" + std::to_string(getpid()) + ".sock";
  rrpc::Server su;
  ASSERT_EQ(0, su.AddService(&svc, rrpc::SERVER_DOESNT_OWN_SERVICE));
  rrpc::ServerOptions so;
  so.use_rdma = false;
  ASSERT_EQ(0, su.Start(("unix:" + path).c_str(), &so));
  rrpc::Channel ch;
  rrpc::ChannelOptions co;
  ASSERT_EQ(0, ch.Init(("unix:" + path).c_str(), &co));
  EchoOnce(&ch, "unix:" + path);
  su.Stop(0);
  su.Join();
}

}  // namespace
