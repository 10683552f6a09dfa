// handoff_unittest.cc - issue 11, "one connection can use many cores": the
// client completions of one busy connection are not all run by its loop
// (channel.c, completion hand-off), and every call still completes exactly
// once, also when the channel is freed while calls are out.
#include <gtest/gtest.h>

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rrpc.h"
#include "rrpc/server.h"

extern "C" uint64_t rrpc__completions_handed_off_total(void);

namespace {

void echo(void *, rrpc_server_call *call) { rrpc_server_call_respond(call, rrpc_server_call_request(call)); }

// A server with a loop of its own running handlers in it, so the
// process-wide loops are the client's alone.
struct Server {
  rrpc_server *s = nullptr;
  std::string addr;
  Server() {
    rrpc_server_options o = {};
    o.num_threads = 1;
    o.handlers_in_loop = 1;
    EXPECT_EQ(0, rrpc_server_new(&o, &s));
    EXPECT_EQ(0, rrpc_server_add_method(s, "T", "Echo", echo, nullptr));
    EXPECT_EQ(0, rrpc_server_start(s, "127.0.0.1:0"));
    addr = "127.0.0.1:" + std::to_string(rrpc_server_port(s));
  }
  ~Server() { rrpc_server_free(s); }
};

// Completions of a wave of async calls: who ran them, how many, any failure.
struct Wave {
  std::mutex mu;
  std::condition_variable cv;
  int left = 0, failed = 0;
  std::set<pthread_t> threads;
};

void on_done(void *arg, rrpc_controller *c) {
  Wave *w = static_cast<Wave *>(arg);
  std::lock_guard<std::mutex> g(w->mu);
  w->threads.insert(pthread_self());
  if (rrpc_controller_failed(c)) w->failed++;
  if (--w->left == 0) w->cv.notify_all();
}

bool wait_wave(Wave *w, int ms) {
  std::unique_lock<std::mutex> g(w->mu);
  return w->cv.wait_for(g, std::chrono::milliseconds(ms), [&] { return w->left == 0; });
}

class Handoff : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Two process-wide loops whatever the machine: the connection's and one
    // that can take completions. Before any channel starts them.
    ASSERT_EQ(0, rrpc_set_event_dispatcher_num(2));
  }
  void SetUp() override { ASSERT_EQ(0, rrpc_set_completion_handoff(4)); }  // off by default
  void TearDown() override { rrpc_set_completion_handoff(0); }
};

// 64 calls in flight on one connection, in waves: the responses of one read
// complete as one batch, and with the other loop idle half of such a batch
// runs there. Before the hand-off every completion ran on the connection's
// loop: one thread.
TEST_F(Handoff, OneConnectionsCompletionsRunOnMoreThanOneLoop) {
  Server srv;
  rrpc_channel_options co = {};
  co.timeout_ms = 5000;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(srv.addr.c_str(), &co, &ch));
  const int depth = 64;
  std::vector<rrpc_controller *> cntl(depth);
  for (auto &c : cntl) ASSERT_EQ(0, rrpc_controller_new(&c));
  rrpc_iobuf *req;
  ASSERT_EQ(0, rrpc_iobuf_new(&req));
  ASSERT_EQ(0, rrpc_iobuf_append(req, "0123456789abcdef", 16));
  uint64_t before = rrpc__completions_handed_off_total();
  std::set<pthread_t> seen;
  int waves = 0, failed = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // Bounded: 500 waves or 10 s; a few waves are enough when it works.
  while (waves < 500 && std::chrono::steady_clock::now() < deadline && seen.size() < 2) {
    Wave w;
    w.left = depth;
    for (auto *c : cntl) ASSERT_EQ(0, rrpc_channel_call(ch, "T", "Echo", c, req, nullptr, on_done, &w));
    ASSERT_TRUE(wait_wave(&w, 10000)) << "a call never completed";
    failed += w.failed;
    seen.insert(w.threads.begin(), w.threads.end());
    waves++;
  }
  EXPECT_EQ(0, failed);
  EXPECT_GE(seen.size(), 2u) << "every completion of the connection ran on one thread (" << waves << " waves)";
  EXPECT_GT(rrpc__completions_handed_off_total(), before);
  for (auto *c : cntl) rrpc_controller_free(c);
  rrpc_iobuf_free(req);
  rrpc_channel_free(ch);
}

// Freeing the channel while completions may be on the other loop: it waits
// for their channel part, and every call still completes exactly once
// (ASan/TSan builds check the rest).
TEST_F(Handoff, FreeingTheChannelWithCallsOutCompletesEachOnce) {
  Server srv;
  const int depth = 64;
  rrpc_iobuf *req;
  ASSERT_EQ(0, rrpc_iobuf_new(&req));
  ASSERT_EQ(0, rrpc_iobuf_append(req, "x", 1));
  for (int round = 0; round < 20; round++) {
    rrpc_channel_options co = {};
    co.timeout_ms = 5000;
    rrpc_channel *ch;
    ASSERT_EQ(0, rrpc_channel_new(srv.addr.c_str(), &co, &ch));
    std::vector<rrpc_controller *> cntl(depth);
    for (auto &c : cntl) ASSERT_EQ(0, rrpc_controller_new(&c));
    Wave w;
    w.left = depth;
    for (auto *c : cntl) ASSERT_EQ(0, rrpc_channel_call(ch, "T", "Echo", c, req, nullptr, on_done, &w));
    if (round % 2 == 0) std::this_thread::yield();  // some rounds free with responses arriving
    rrpc_channel_free(ch);
    ASSERT_TRUE(wait_wave(&w, 10000)) << "round " << round << ": a call never completed";
    {
      std::lock_guard<std::mutex> g(w.mu);
      EXPECT_EQ(0, w.left);
    }
    for (auto *c : cntl) rrpc_controller_free(c);
  }
  rrpc_iobuf_free(req);
}

// Synchronous callers on one connection: a handed-off completion wakes
// each exactly once with its own response.
TEST_F(Handoff, SyncCallersOnOneConnectionGetTheirOwnResponses) {
  Server srv;
  rrpc_channel_options co = {};
  co.timeout_ms = 5000;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(srv.addr.c_str(), &co, &ch));
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 16; t++) {
    ts.emplace_back([&, t] {
      rrpc_controller *c;
      rrpc_iobuf *req, *resp;
      rrpc_controller_new(&c);
      rrpc_iobuf_new(&req);
      rrpc_iobuf_new(&resp);
      for (int i = 0; i < 300; i++) {
        std::string mine = std::to_string(t) + "/" + std::to_string(i);
        rrpc_iobuf_clear(req);
        rrpc_iobuf_clear(resp);
        rrpc_iobuf_append(req, mine.data(), mine.size());
        char got[64] = {0};
        if (rrpc_channel_call(ch, "T", "Echo", c, req, resp, nullptr, nullptr) != 0 ||
            rrpc_iobuf_copy_out(resp, 0, got, sizeof got - 1) != mine.size() || mine != got)
          bad++;
      }
      rrpc_controller_free(c);
      rrpc_iobuf_free(req);
      rrpc_iobuf_free(resp);
    });
  }
  for (auto &t : ts) t.join();
  EXPECT_EQ(0, bad.load());
  rrpc_channel_free(ch);
}

// The knob: off (the default) keeps every completion on the connection's
// loop - what the first test saw before the hand-off existed; 1 is refused
// (a hop for a single call never pays).
TEST_F(Handoff, OffByDefaultAndTheKnobTurnsItOff) {
  EXPECT_EQ(-EINVAL, rrpc_set_completion_handoff(1));
  EXPECT_EQ(4, rrpc_completion_handoff());
  ASSERT_EQ(0, rrpc_set_completion_handoff(0));
  EXPECT_EQ(-1, rrpc_completion_handoff());
  Server srv;
  rrpc_channel_options co = {};
  co.timeout_ms = 5000;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(srv.addr.c_str(), &co, &ch));
  std::vector<rrpc_controller *> cntl(64);
  for (auto &c : cntl) ASSERT_EQ(0, rrpc_controller_new(&c));
  rrpc_iobuf *req;
  ASSERT_EQ(0, rrpc_iobuf_new(&req));
  uint64_t before = rrpc__completions_handed_off_total();
  for (int wave = 0; wave < 50; wave++) {
    Wave w;
    w.left = (int)cntl.size();
    for (auto *c : cntl) ASSERT_EQ(0, rrpc_channel_call(ch, "T", "Echo", c, req, nullptr, on_done, &w));
    ASSERT_TRUE(wait_wave(&w, 10000));
    EXPECT_EQ(1u, w.threads.size());
  }
  EXPECT_EQ(before, rrpc__completions_handed_off_total());
  for (auto *c : cntl) rrpc_controller_free(c);
  rrpc_iobuf_free(req);
  rrpc_channel_free(ch);
}

}  // namespace
