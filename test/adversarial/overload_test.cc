// overload_test.cc - overload protection (issue 13): max_concurrency per
// server and per method fails fast with ELIMIT, a connection's write queue
// is bounded (EOVERCROWDED), and a graceful stop answers ELOGOFF to new
// requests while running handlers finish within closewait_ms.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <memory>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/cxx/server.h"
#include "rrpc/rrpc.h"
#include "test/common/hostile.h"
#include "test/cxx_echo_service.h"

namespace {

using namespace rrpc_test;

struct Held {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<rrpc_server_call *> calls;
  size_t count() {
    std::lock_guard<std::mutex> g(mu);
    return calls.size();
  }
  bool wait_for(size_t n, int ms) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::milliseconds(ms), [&] { return calls.size() >= n; });
  }
  // Answers the i-th held call (in arrival order) and forgets it.
  void release_at(size_t i) {
    rrpc_server_call *c;
    {
      std::lock_guard<std::mutex> g(mu);
      c = calls.at(i);
      calls[i] = nullptr;
    }
    if (c != nullptr) rrpc_server_call_respond(c, nullptr);
  }
  void release_all() {
    std::vector<rrpc_server_call *> v;
    {
      std::lock_guard<std::mutex> g(mu);
      v.swap(calls);
    }
    for (auto *c : v)
      if (c != nullptr) rrpc_server_call_respond(c, nullptr);
  }
};

void hold(void *arg, rrpc_server_call *call) {
  Held *h = static_cast<Held *>(arg);
  std::lock_guard<std::mutex> g(h->mu);
  h->calls.push_back(call);
  h->cv.notify_all();
}
void echo(void *, rrpc_server_call *call) { rrpc_server_call_respond(call, rrpc_server_call_request(call)); }

// An async call whose outcome lands in `rc` (INT32_MIN until done).
struct Async {
  rrpc_controller *c = nullptr;
  std::atomic<int> rc{INT32_MIN};
  Async() { rrpc_controller_new(&c); }
  ~Async() { rrpc_controller_free(c); }
  static void done(void *arg, rrpc_controller *cntl) {
    static_cast<Async *>(arg)->rc = rrpc_controller_error_code(cntl);
  }
};

int sync_call(rrpc_channel *ch, const char *method, double *ms = nullptr, size_t bytes = 1) {
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rq;
  rrpc_iobuf_new(&rq);
  std::string body(bytes, 'q');
  rrpc_iobuf_append(rq, body.data(), body.size());
  double t0 = now_ms();
  int rc = rrpc_channel_call(ch, "test.S", method, c, rq, nullptr, nullptr, nullptr);
  if (ms) *ms = now_ms() - t0;
  rrpc_iobuf_free(rq);
  rrpc_controller_free(c);
  return rc;
}

class Overload : public ::testing::Test {
 protected:
  void start(int max_conc, int hold_max) {
    rrpc_server_options o = {};
    o.max_concurrency = max_conc;
    ASSERT_EQ(0, rrpc_server_new(&o, &server_));
    ASSERT_EQ(0, rrpc_server_add_method(server_, "test.S", "Hold", hold, &held_));
    ASSERT_EQ(0, rrpc_server_add_method(server_, "test.S", "Echo", echo, nullptr));
    if (hold_max) {
      ASSERT_EQ(0, rrpc_server_set_method_max_concurrency(server_, "test.S", "Hold", hold_max));
    }
    ASSERT_EQ(0, rrpc_server_start(server_, "127.0.0.1:0"));
    std::string addr = "127.0.0.1:" + std::to_string(rrpc_server_port(server_));
    addr_ = addr;
    rrpc_channel_options co = {};
    co.timeout_ms = 5000;
    ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), &co, &channel_));
  }
  void TearDown() override {
    held_.release_all();
    rrpc_channel_free(channel_);
    rrpc_server_free(server_);
    rrpc_limits_set(nullptr);
  }
  void issue_hold(Async *a) {
    ASSERT_EQ(0, rrpc_channel_call(channel_, "test.S", "Hold", a->c, nullptr, nullptr, Async::done, a));
  }
  rrpc_server *server_ = nullptr;
  rrpc_channel *channel_ = nullptr;
  std::string addr_;
  Held held_;
};

TEST_F(Overload, ServerMaxConcurrencyFailsFastWithELIMIT) {
  start(2, 0);
  Async a1, a2;
  issue_hold(&a1);
  issue_hold(&a2);
  ASSERT_TRUE(held_.wait_for(2, 5000));
  double ms = 0;
  EXPECT_EQ(-RRPC_ELIMIT, sync_call(channel_, "Echo", &ms));
  EXPECT_LT(ms, 1000.0);  // fails fast: not a timeout
  held_.release_all();
  ASSERT_TRUE(wait_until([&] { return a1.rc != INT32_MIN && a2.rc != INT32_MIN; }, 5000));
  EXPECT_EQ(0, a1.rc.load());
  EXPECT_EQ(0, sync_call(channel_, "Echo"));  // room again
  report("max-concurrency", "server max_concurrency=2 with 2 running: a third call failed with "
         "ELIMIT in " + std::to_string(ms) + " ms");
}

TEST_F(Overload, MethodMaxConcurrencyLeavesOtherMethodsAlone) {
  start(0, 1);
  Async a1;
  issue_hold(&a1);
  ASSERT_TRUE(held_.wait_for(1, 5000));
  Async a2;
  issue_hold(&a2);
  ASSERT_TRUE(wait_until([&] { return a2.rc != INT32_MIN; }, 5000));
  EXPECT_EQ(-RRPC_ELIMIT, a2.rc.load());
  EXPECT_EQ(0, sync_call(channel_, "Echo"));
  EXPECT_EQ(-EBUSY, rrpc_server_set_method_max_concurrency(server_, "test.S", "Hold", 3));
  held_.release_all();  // a1's callback must run before a1 goes out of scope
  ASSERT_TRUE(wait_until([&] { return a1.rc != INT32_MIN; }, 5000));
}

TEST_F(Overload, GracefulStopAnswersELOGOFFAndLetsRunningCallsFinish) {
  start(0, 0);
  Async running;
  issue_hold(&running);
  ASSERT_TRUE(held_.wait_for(1, 5000));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    rrpc_server_shutdown(server_, 5000);
    stopped = true;
  });
  // A new request on the open connection while stopping: ELOGOFF.
  int rc = 0;
  ASSERT_TRUE(wait_until([&] { return (rc = sync_call(channel_, "Echo")) == -RRPC_ELOGOFF; }, 5000))
      << "last rc " << rc;
  EXPECT_FALSE(stopped.load());
  held_.release_all();  // the running handler responds...
  ASSERT_TRUE(wait_until([&] { return running.rc != INT32_MIN; }, 5000));
  EXPECT_EQ(0, running.rc.load());  // ...and its response reached the client
  stopper.join();
  rrpc_limit_stats st;
  rrpc_limit_stats_get(&st);
  EXPECT_GT(st.logoff_rejects, 0u);
  report("graceful-stop", "stop with closewait_ms=5000 and one running call: new requests got "
         "ELOGOFF, the running call's response arrived, then the server closed");
}

// The server counts a connection as live from its first pending request
// to its last answer (not each call): a graceful stop must still wait for
// the last call of every connection, however their answers interleave.
TEST_F(Overload, GracefulStopWaitsForTheLastCallOfEveryConnection) {
  start(0, 0);
  rrpc_channel_options co = {};
  co.timeout_ms = 10000;
  rrpc_channel *second = nullptr;
  ASSERT_EQ(0, rrpc_channel_new(addr_.c_str(), &co, &second));
  Async a1, b1, a2, b2;  // a on channel_, b on the second connection
  Async *order[] = {&a1, &b1, &a2, &b2};
  for (size_t i = 0; i < 4; i++) {
    rrpc_channel *ch = i % 2 == 0 ? channel_ : second;
    ASSERT_EQ(0, rrpc_channel_call(ch, "test.S", "Hold", order[i]->c, nullptr, nullptr, Async::done, order[i]));
    ASSERT_TRUE(held_.wait_for(i + 1, 5000));  // held in this order
  }
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    rrpc_server_shutdown(server_, 10000);
    stopped = true;
  });
  // a1 and b1 end while each connection has another call; a2 ends its
  // connection's last; b2, the server's last, is still running.
  for (size_t i = 0; i < 3; i++) {
    held_.release_at(i);
    ASSERT_TRUE(wait_until([&] { return order[i]->rc != INT32_MIN; }, 5000)) << i;
    EXPECT_EQ(0, order[i]->rc.load()) << i;
  }
  EXPECT_FALSE(stopped.load());
  held_.release_at(3);
  ASSERT_TRUE(wait_until([&] { return b2.rc != INT32_MIN; }, 5000));
  EXPECT_EQ(0, b2.rc.load());  // had the stop not waited, its connection would have closed first
  stopper.join();
  rrpc_channel_free(second);
}

TEST_F(Overload, StopGivesUpAfterClosewait) {
  start(0, 0);
  Async running;
  issue_hold(&running);
  ASSERT_TRUE(held_.wait_for(1, 5000));
  double t0 = now_ms();
  rrpc_server_shutdown(server_, 300);
  double took = now_ms() - t0;
  ASSERT_TRUE(wait_until([&] { return running.rc != INT32_MIN; }, 5000));
  EXPECT_EQ(-RRPC_ECLOSE, running.rc.load());
  EXPECT_GE(took, 280.0);
  EXPECT_LT(took, 3000.0);
}

// A peer that accepts and never reads: the client's queue for it is bounded.
TEST(OverloadClient, WriteQueueBoundedWithEOVERCROWDED) {
  rrpc_limits l = {};
  l.socket_max_unwritten_bytes = 1u << 20;
  rrpc_limits_set(&l);
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(0, bind(lfd, reinterpret_cast<sockaddr *>(&sa), sizeof sa));
  ASSERT_EQ(0, listen(lfd, 4));
  socklen_t len = sizeof sa;
  getsockname(lfd, reinterpret_cast<sockaddr *>(&sa), &len);
  std::string addr = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
  rrpc_channel_options co = {};
  co.timeout_ms = 2000;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), &co, &ch));
  const int kCalls = 64;
  std::vector<std::unique_ptr<Async>> calls;
  std::string body(256u << 10, 'w');
  rrpc_iobuf *rq;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_append(rq, body.data(), body.size());
  for (int i = 0; i < kCalls; i++) {
    calls.emplace_back(new Async);
    ASSERT_EQ(0, rrpc_channel_call(ch, "test.S", "Echo", calls.back()->c, rq, nullptr, Async::done,
                                   calls.back().get()));
  }
  ASSERT_TRUE(wait_until([&] {
    for (auto &a : calls)
      if (a->rc == INT32_MIN) return false;
    return true;
  }, 10000));
  int overcrowded = 0;
  for (auto &a : calls) overcrowded += a->rc == -RRPC_EOVERCROWDED;
  report("client-write-queue", std::to_string(kCalls) + " async 256 KiB calls to a peer that never "
         "reads, socket_max_unwritten_bytes=1 MiB: " + std::to_string(overcrowded) +
         " failed at once with EOVERCROWDED (the rest timed out)");
  EXPECT_GT(overcrowded, kCalls / 2);
  rrpc_iobuf_free(rq);
  rrpc_channel_free(ch);
  close(lfd);
  rrpc_limits_set(nullptr);
}

// The C++ face: ServerOptions::max_concurrency, MaxConcurrencyOf, idle
// timeout and Stop(closewait_ms), with brpc's names.
TEST(OverloadCxx, ServerOptionsAndMaxConcurrencyOfAndStop) {
  cxxtest::EchoServiceImpl svc;
  rrpc::Server server;
  ASSERT_EQ(0, server.AddService(&svc, rrpc::SERVER_DOESNT_OWN_SERVICE));
  server.MaxConcurrencyOf("cxxtest.EchoService.Echo") = 1;
  rrpc::ServerOptions so;
  so.idle_timeout_sec = 30;
  so.max_concurrency = 8;
  ASSERT_EQ(0, server.Start("127.0.0.1:0", &so));
  rrpc::Channel ch;
  rrpc::ChannelOptions co;
  co.timeout_ms = 5000;
  ASSERT_EQ(0, ch.Init(("127.0.0.1:" + std::to_string(server.listen_port())).c_str(), &co));
  cxxtest::EchoService_Stub stub(&ch);
  // One held Echo fills the method's limit.
  cxxtest::EchoRequest held_req;
  held_req.set_message("held");
  held_req.set_hold(true);
  cxxtest::EchoResponse held_resp;
  rrpc::Controller held_cntl;
  std::atomic<bool> held_done{false};
  struct Flag : google::protobuf::Closure {
    std::atomic<bool> *f;
    void Run() override { *f = true; }
  } flag;
  flag.f = &held_done;
  stub.Echo(&held_cntl, &held_req, &held_resp, &flag);
  svc.WaitHeld(1);
  cxxtest::EchoRequest req;
  req.set_message("second");
  cxxtest::EchoResponse resp;
  rrpc::Controller cntl;
  stub.Echo(&cntl, &req, &resp, nullptr);
  EXPECT_EQ(rrpc::ELIMIT, cntl.ErrorCode());
  cxxtest::Empty e1, e2;
  rrpc::Controller c2;
  stub.Nothing(&c2, &e1, &e2, nullptr);  // another method is not limited
  EXPECT_FALSE(c2.Failed()) << c2.ErrorText();
  // Stop with closewait: the held call still gets its response.
  std::thread stopper([&] { server.Stop(5000); });
  rrpc::Controller c3;
  ASSERT_TRUE(wait_until([&] {
    c3.Reset();
    stub.Nothing(&c3, &e1, &e2, nullptr);
    return c3.ErrorCode() == rrpc::ELOGOFF;
  }, 5000)) << c3.ErrorText();
  svc.ReleaseHeld();
  stopper.join();
  ASSERT_TRUE(wait_until([&] { return held_done.load(); }, 5000));
  EXPECT_FALSE(held_cntl.Failed()) << held_cntl.ErrorText();
  server.Join();
}

}  // namespace
