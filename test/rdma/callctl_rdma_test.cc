// callctl_rdma_test.cc - call control over an RDMA connection: cancelling
// sync and async calls the server holds (the late responses are dropped and
// counted), and the caller's deadline reaching the handler, then a nested
// call that inherits it. Runs where tools/run-rdma-tests puts it (Soft-RoCE
// in the VM, or a real device); every call checks it really rode RDMA.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rrpc.h"
#include "test/common/handoff.h"
#include "test/common/test_util.h"
#include "test/rdma/tsan_suppressions.h"

using rrpc_test::rdma_test_addr;

namespace {

using Clock = std::chrono::steady_clock;

// The 1 ms bound of a cancel is held by the host tests (callctl_unittest,
// cxx_callctl_unittest). Here the loops and the caller run on the 2 CPUs of
// a TCG-emulated guest shared with rxe's own work, where one thread wake-up
// alone varies from 0.1 to over 1 ms between runs (sync medians measured
// 219, 252 and 1086 us on the same binary): this test checks the cancel
// path over RDMA with a bound that guest holds, and prints the numbers.
// Under ThreadSanitizer (~10x slower again) it looks for races only.
#if defined(__SANITIZE_THREAD__)
constexpr bool kTimed = false;
#else
constexpr bool kTimed = true;
#endif
constexpr int64_t kGuestBoundUs = 5000;

int64_t us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

struct Held {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<rrpc_server_call *> calls;
  int64_t remaining_ms = -2;
  int nested_rc = 1;
  int64_t nested_us = 0;
  int rounds = 0;
  rrpc_channel *next = nullptr;  // for the nested call
};

void hold_handler(void *arg, rrpc_server_call *call) {
  Held *h = static_cast<Held *>(arg);
  std::lock_guard<std::mutex> g(h->mu);
  h->calls.push_back(call);
  h->cv.notify_all();
}

void report_handler(void *arg, rrpc_server_call *call) {
  Held *h = static_cast<Held *>(arg);
  {
    std::lock_guard<std::mutex> g(h->mu);
    h->remaining_ms = rrpc_controller_remaining_ms(rrpc_server_call_controller(call));
  }
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

// Calls Hold on `next` with a 60 s timeout of its own, inheriting this
// call's deadline.
void proxy_handler(void *arg, rrpc_server_call *call) {
  Held *h = static_cast<Held *>(arg);
  rrpc_controller *child;
  rrpc_controller_new(&child);
  rrpc_controller_set_timeout_ms(child, 60000);
  rrpc_controller_inherit_deadline(child, rrpc_server_call_controller(call));
  rrpc_channel *next;
  {
    std::lock_guard<std::mutex> g(h->mu);
    next = h->next;
  }
  auto t0 = Clock::now();
  int rc = rrpc_channel_call(next, "test.Ctl", "Hold", child, rrpc_server_call_request(call), nullptr,
                             nullptr, nullptr);
  int64_t us = us_between(t0, Clock::now());
  rrpc_controller_free(child);
  {
    std::lock_guard<std::mutex> g(h->mu);
    h->nested_rc = rc;
    h->nested_us = us;
    h->rounds++;
    h->cv.notify_all();
  }
  rrpc_server_call_respond(call, nullptr);
}

class CallCtlRdma : public ::testing::Test {
 protected:
  void SetUp() override {
    rrpc_server_options o = {};
    o.use_rdma = 1;
    ASSERT_EQ(0, rrpc_server_new(&o, &server_));
    ASSERT_EQ(0, rrpc_server_add_method(server_, "test.Ctl", "Hold", hold_handler, &held_));
    ASSERT_EQ(0, rrpc_server_add_method(server_, "test.Ctl", "Report", report_handler, &held_));
    ASSERT_EQ(0, rrpc_server_add_method(server_, "test.Ctl", "Proxy", proxy_handler, &held_));
    ASSERT_EQ(0, rrpc_server_start(server_, (rdma_test_addr() + ":0").c_str()));
    addr_ = rdma_test_addr() + ":" + std::to_string(rrpc_server_port(server_));
    channel_ = open(60000);
    ASSERT_NE(nullptr, channel_);
    rrpc_iobuf_new(&req_);
    rrpc_iobuf_append(req_, "x", 1);
  }
  void TearDown() override {
    rrpc_channel_free(channel_);
    if (held_.next) rrpc_channel_free(held_.next);
    release();
    rrpc_server_free(server_);
    rrpc_iobuf_free(req_);
  }
  rrpc_channel *open(int timeout_ms) {
    rrpc_channel_options co = {};
    co.use_rdma = 1;
    co.timeout_ms = timeout_ms;
    co.connect_timeout_ms = 5000;
    rrpc_channel *ch = nullptr;
    return rrpc_channel_new(addr_.c_str(), &co, &ch) == 0 ? ch : nullptr;
  }
  void wait_held(size_t n) {
    std::unique_lock<std::mutex> g(held_.mu);
    held_.cv.wait(g, [&] { return held_.calls.size() >= n; });
  }
  void release() {
    std::vector<rrpc_server_call *> v;
    {
      std::lock_guard<std::mutex> g(held_.mu);
      v.swap(held_.calls);
    }
    for (auto *c : v) rrpc_server_call_respond(c, nullptr);
  }
  // A Report call: 0 and it rode RDMA, or fails the test.
  void report(int32_t timeout_ms) {
    rrpc_controller *c;
    rrpc_controller_new(&c);
    rrpc_controller_set_timeout_ms(c, timeout_ms);
    EXPECT_EQ(0, rrpc_channel_call(channel_, "test.Ctl", "Report", c, req_, nullptr, nullptr, nullptr));
    EXPECT_EQ(1, rrpc_controller_used_rdma(c));
    rrpc_controller_free(c);
  }

  rrpc_server *server_ = nullptr;
  rrpc_channel *channel_ = nullptr;
  rrpc_iobuf *req_ = nullptr;
  Held held_;
  std::string addr_;
};

struct Done {
  std::mutex mu;
  std::condition_variable cv;
  int runs = 0, code = 1;
  Clock::time_point at;
  static void run(void *arg, rrpc_controller *c) {
    Done *d = static_cast<Done *>(arg);
    std::lock_guard<std::mutex> g(d->mu);
    d->runs++;
    d->code = rrpc_controller_error_code(c);
    d->at = Clock::now();
    d->cv.notify_all();
  }
};

TEST_F(CallCtlRdma, CancelEndsSyncAndAsyncCalls) {
  report(60000);  // the connection is up and over RDMA
  const int kRounds = 10;
  std::vector<int64_t> sync_us, async_us, sync_over, async_over;
  rrpc_test::Handoff handoff;  // the guest's own wake-ups, each round (test/common/handoff.h)
  ASSERT_TRUE(handoff.ok());
  for (int i = 0; i < kRounds; i++) {
    int64_t two = handoff.two_hop_us(), one = handoff.one_hop_us();
    rrpc_controller *c;
    rrpc_controller_new(&c);
    int rc = 1;
    Clock::time_point t1;
    std::thread caller([&] {
      rc = rrpc_channel_call(channel_, "test.Ctl", "Hold", c, req_, nullptr, nullptr, nullptr);
      t1 = Clock::now();
    });
    wait_held(static_cast<size_t>(2 * i + 1));
    auto t0 = Clock::now();
    rrpc_controller_cancel(c);
    caller.join();
    sync_us.push_back(us_between(t0, t1));
    sync_over.push_back(sync_us.back() - std::max(two, handoff.two_hop_us()));
    EXPECT_EQ(-ECANCELED, rc);
    rrpc_controller_free(c);

    Done d;
    rrpc_controller *ac;
    rrpc_controller_new(&ac);
    ASSERT_EQ(0, rrpc_channel_call(channel_, "test.Ctl", "Hold", ac, req_, nullptr, Done::run, &d));
    wait_held(static_cast<size_t>(2 * i + 2));
    auto a0 = Clock::now();
    rrpc_controller_cancel(ac);
    {
      std::unique_lock<std::mutex> g(d.mu);
      d.cv.wait(g, [&] { return d.runs > 0; });
      async_us.push_back(us_between(a0, d.at));
      EXPECT_EQ(-ECANCELED, d.code);
    }
    async_over.push_back(async_us.back() - std::max(one, handoff.one_hop_us()));
    rrpc_controller_free(ac);
  }
  uint64_t late = rrpc_channel_late_responses(channel_);
  release();
  report(60000);  // same connection: the held responses were read before this one
  EXPECT_EQ(late + 2 * kRounds, rrpc_channel_late_responses(channel_));
  for (auto *v : {&sync_us, &async_us, &sync_over, &async_over}) std::sort(v->begin(), v->end());
  printf("RDMA cancel: sync median %lld us (max %lld), async median %lld us (max %lld) over %d; "
         "over the same rounds' wake-ups: sync %lld us, async %lld us (medians)\n",
         (long long)sync_us[kRounds / 2], (long long)sync_us.back(), (long long)async_us[kRounds / 2],
         (long long)async_us.back(), kRounds, (long long)sync_over[kRounds / 2], (long long)async_over[kRounds / 2]);
  if (kTimed) {
    EXPECT_LT(sync_us[kRounds / 2], kGuestBoundUs);
    EXPECT_LT(async_us[kRounds / 2], kGuestBoundUs);
  }
}

TEST_F(CallCtlRdma, DeadlineReachesTheHandlerAndANestedCall) {
  report(3000);
  int64_t left;
  {
    std::lock_guard<std::mutex> g(held_.mu);
    left = held_.remaining_ms;
  }
  printf("RDMA: timeout 3000 ms, the handler saw %lld ms left\n", (long long)left);
  EXPECT_LE(left, 3000);
  EXPECT_GE(left, 2900);

  rrpc_channel *next = open(60000);
  ASSERT_NE(nullptr, next);
  {
    std::lock_guard<std::mutex> g(held_.mu);
    held_.next = next;
  }
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_controller_set_timeout_ms(c, 500);
  EXPECT_EQ(-RRPC_ERPCTIMEDOUT, rrpc_channel_call(channel_, "test.Ctl", "Proxy", c, req_, nullptr, nullptr, nullptr));
  rrpc_controller_free(c);
  std::unique_lock<std::mutex> g(held_.mu);
  held_.cv.wait(g, [&] { return held_.rounds >= 1; });
  printf("RDMA: outer timeout 500 ms, the nested call (60 s of its own) ended after %lld us\n",
         (long long)held_.nested_us);
  EXPECT_EQ(-RRPC_ERPCTIMEDOUT, held_.nested_rc);
  EXPECT_LT(held_.nested_us, 5000000);
}

// A unix socket never attempts RDMA, even with use_rdma on both sides and
// a device present: no handshake starts, and the call goes over the socket.
TEST(CallCtlRdmaUnix, UnixSocketNeverAttemptsRdma) {
  std::string path = "/tmp/rrpc-rdma-unix-" + std::to_string(getpid()) + ".sock";
  rrpc_server_options o = {};
  o.use_rdma = 1;
  rrpc_server *s;
  ASSERT_EQ(0, rrpc_server_new(&o, &s));
  Held held;
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.Ctl", "Report", report_handler, &held));
  ASSERT_EQ(0, rrpc_server_start(s, ("unix:" + path).c_str()));
  rrpc_channel_options co = {};
  co.use_rdma = 1;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(("unix:" + path).c_str(), &co, &ch));
  rrpc_rdma_stats before, after;
  rrpc_rdma_get_stats(&before);
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *req;
  rrpc_iobuf_new(&req);
  rrpc_iobuf_append(req, "u", 1);
  EXPECT_EQ(0, rrpc_channel_call(ch, "test.Ctl", "Report", c, req, nullptr, nullptr, nullptr));
  EXPECT_EQ(0, rrpc_controller_used_rdma(c));
  rrpc_rdma_get_stats(&after);
  // A handshake ends on RDMA or in a fallback; neither happened.
  EXPECT_EQ(before.connections_rdma, after.connections_rdma);
  EXPECT_EQ(before.connections_fallback, after.connections_fallback);
  rrpc_iobuf_free(req);
  rrpc_controller_free(c);
  rrpc_channel_free(ch);
  rrpc_server_free(s);
}

}  // namespace
