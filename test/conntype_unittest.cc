// conntype_unittest.cc - ChannelOptions.connection_type (brpc's single /
// pooled / short) on a loopback server: pooled gives each call in flight a
// connection of its own and reuses it, keeping at most
// max_connection_pool_size idle; short opens one per call and closes it.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rrpc.h"

namespace {

struct Held {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<rrpc_server_call *> calls;
  void release() {
    std::lock_guard<std::mutex> g(mu);
    for (auto *c : calls) rrpc_server_call_respond(c, nullptr);
    calls.clear();
  }
  bool wait(size_t n) {
    std::unique_lock<std::mutex> g(mu);
    return cv.wait_for(g, std::chrono::seconds(5), [&] { return calls.size() >= n; });
  }
};

void hold(void *arg, rrpc_server_call *call) {
  Held *h = static_cast<Held *>(arg);
  std::lock_guard<std::mutex> g(h->mu);
  h->calls.push_back(call);
  h->cv.notify_all();
}

void echo(void *, rrpc_server_call *call) { rrpc_server_call_respond(call, rrpc_server_call_request(call)); }

struct Done {
  std::mutex mu;
  std::condition_variable cv;
  int runs = 0, failed = 0;
  static void fn(void *arg, rrpc_controller *c) {
    Done *d = static_cast<Done *>(arg);
    std::lock_guard<std::mutex> g(d->mu);
    d->runs++;
    d->failed += rrpc_controller_failed(c);
    d->cv.notify_all();
  }
  bool wait(int n) {
    std::unique_lock<std::mutex> g(mu);
    return cv.wait_for(g, std::chrono::seconds(5), [&] { return runs >= n; });
  }
};

class ConnType : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, rrpc_server_new(nullptr, &server_));
    rrpc_server_add_method(server_, "t.S", "Hold", hold, &held_);
    rrpc_server_add_method(server_, "t.S", "Echo", echo, nullptr);
    ASSERT_EQ(0, rrpc_server_start(server_, "127.0.0.1:0"));
    addr_ = "127.0.0.1:" + std::to_string(rrpc_server_port(server_));
  }
  void TearDown() override {
    held_.release();
    rrpc_server_free(server_);
  }
  rrpc_channel *open(int type, int pool_max = 0) {
    rrpc_channel_options o = {};
    o.timeout_ms = 5000;
    o.connection_type = type;
    o.max_connection_pool_size = pool_max;
    rrpc_channel *ch = nullptr;
    EXPECT_EQ(0, rrpc_channel_new(addr_.c_str(), &o, &ch));
    return ch;
  }
  // n async Hold calls at once; returns when the server holds them all.
  void hold_n(rrpc_channel *ch, int n, std::vector<rrpc_controller *> *cs, Done *d) {
    for (int i = 0; i < n; i++) {
      rrpc_controller *c;
      rrpc_controller_new(&c);
      cs->push_back(c);
      ASSERT_EQ(0, rrpc_channel_call(ch, "t.S", "Hold", c, nullptr, nullptr, Done::fn, d));
    }
    ASSERT_TRUE(held_.wait((size_t)n));
  }
  rrpc_channel_conn_stats stats(rrpc_channel *ch) {
    rrpc_channel_conn_stats s;
    EXPECT_EQ(0, rrpc_channel_connection_stats(ch, &s));
    return s;
  }
  int echo_call(rrpc_channel *ch) {
    rrpc_controller *c;
    rrpc_controller_new(&c);
    int rc = rrpc_channel_call(ch, "t.S", "Echo", c, nullptr, nullptr, nullptr, nullptr);
    rrpc_controller_free(c);
    return rc;
  }
  bool wait_for(const std::function<bool()> &cond) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!cond()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling a condition, bounded
    }
    return true;
  }
  rrpc_server *server_ = nullptr;
  Held held_;
  std::string addr_;
};

TEST_F(ConnType, SingleMultiplexesOnOneConnection) {
  rrpc_channel *ch = open(RRPC_CONNECTION_SINGLE);
  std::vector<rrpc_controller *> cs;
  Done d;
  hold_n(ch, 4, &cs, &d);
  EXPECT_EQ(1u, stats(ch).opened);
  held_.release();
  ASSERT_TRUE(d.wait(4));
  EXPECT_EQ(0, d.failed);
  rrpc_channel_free(ch);
  for (auto *c : cs) rrpc_controller_free(c);
}

TEST_F(ConnType, PooledGivesEachCallInFlightAConnectionAndReusesThem) {
  rrpc_channel *ch = open(RRPC_CONNECTION_POOLED);
  std::vector<rrpc_controller *> cs;
  Done d;
  hold_n(ch, 4, &cs, &d);
  EXPECT_EQ(4u, stats(ch).opened);
  EXPECT_EQ(4u, stats(ch).live);
  held_.release();
  ASSERT_TRUE(d.wait(4));
  EXPECT_EQ(0, d.failed);
  EXPECT_EQ(4u, stats(ch).idle);
  for (int i = 0; i < 20; i++) EXPECT_EQ(0, echo_call(ch));
  EXPECT_EQ(4u, stats(ch).opened);  // reused, none opened
  rrpc_channel_free(ch);
  for (auto *c : cs) rrpc_controller_free(c);
}

TEST_F(ConnType, PoolKeepsAtMostMaxIdleAndCountsTheRest) {
  rrpc_channel *ch = open(RRPC_CONNECTION_POOLED, 2);
  std::vector<rrpc_controller *> cs;
  Done d;
  hold_n(ch, 5, &cs, &d);
  held_.release();
  ASSERT_TRUE(d.wait(5));
  EXPECT_EQ(2u, stats(ch).idle);
  EXPECT_EQ(3u, stats(ch).pool_full_closes);
  EXPECT_TRUE(wait_for([&] { return stats(ch).live == 2; }));
  rrpc_channel_free(ch);
  for (auto *c : cs) rrpc_controller_free(c);
}

TEST_F(ConnType, ShortOpensAConnectionPerCallAndClosesIt) {
  rrpc_channel *ch = open(RRPC_CONNECTION_SHORT);
  for (int i = 0; i < 5; i++) EXPECT_EQ(0, echo_call(ch));
  EXPECT_EQ(5u, stats(ch).opened);
  EXPECT_TRUE(wait_for([&] { return stats(ch).live == 0; }));
  EXPECT_EQ(0u, stats(ch).idle);
  rrpc_channel_free(ch);
}

TEST_F(ConnType, FreeFailsPooledCallsInFlightOnce) {
  rrpc_channel *ch = open(RRPC_CONNECTION_POOLED);
  std::vector<rrpc_controller *> cs;
  Done d;
  hold_n(ch, 3, &cs, &d);
  rrpc_channel_free(ch);
  EXPECT_EQ(3, d.runs);
  EXPECT_EQ(3, d.failed);
  for (auto *c : cs) EXPECT_EQ(-RRPC_ECLOSE, rrpc_controller_error_code(c));
  for (auto *c : cs) rrpc_controller_free(c);
}

TEST_F(ConnType, UnknownTypeIsRefused) {
  rrpc_channel_options o = {};
  o.connection_type = 7;
  rrpc_channel *ch;
  EXPECT_EQ(-EINVAL, rrpc_channel_new(addr_.c_str(), &o, &ch));
}

}  // namespace
