// oom_rdma_test.cc - the RDMA data path when memory runs out (issue 13,
// item 13). Allocation failures are injected into rrpc_iobuf_move by the
// linker (-Wl,--wrap=rrpc_iobuf_move, set for this binary only in the
// Makefile): librrpc has no hook of its own. While injecting, a move fails
// exactly when the real one would have had to allocate.
//
// The data path then drops what it could not move out of its locked
// sections under the endpoint's mu - among it the last references to
// zero-copy slices of other connections' rings (see swap_handler), whose
// release takes that other endpoint's mu. Released in place, two loop
// threads doing this to each other's slices deadlock in lock order; rrpc
// defers such releases until the thread holds no endpoint's mu
// (transport/rdma/ep_lock.c). A watchdog turns a hang into a failure.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/internal/iobuf.h"
#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/tsan_suppressions.h"

using rrpc_test::rdma_test_addr;

namespace {

std::atomic<bool> g_inject{false};
std::atomic<uint64_t> g_moves{0}, g_failed{0};

// Whether moving src into buf needs a larger ref array (iobuf.c's rule).
bool would_allocate(const rrpc_iobuf *buf, const rrpc_iobuf *src) {
  uint32_t n = src->end - src->start, live = buf->end - buf->start;
  if (buf == src || n == 0) return false;
  if (buf->start == buf->end && src->refs != src->inline_refs) return false;  // takes src's array
  if (n <= buf->cap - buf->end) return false;
  if (n <= buf->cap - live && buf->start >= live) return false;  // compacts in place
  return true;
}

}  // namespace

extern "C" int __real_rrpc_iobuf_move(rrpc_iobuf *buf, rrpc_iobuf *src);
extern "C" int __wrap_rrpc_iobuf_move(rrpc_iobuf *buf, rrpc_iobuf *src) {
  g_moves.fetch_add(1, std::memory_order_relaxed);
  if (g_inject.load(std::memory_order_relaxed) && would_allocate(buf, src)) {
    g_failed.fetch_add(1, std::memory_order_relaxed);
    // An allocation that fails under memory pressure is slow (the kernel
    // reclaims first). The caller holds its endpoint's lock meanwhile, so
    // this is also the window two such callers need to meet in.
    usleep(300);
    return -ENOMEM;
  }
  return __real_rrpc_iobuf_move(buf, src);
}

namespace {

uint64_t now_ms() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Two servers swap what they receive: a handler parks its request attachment
// (a slice of its connection's receive ring) for the other server and answers
// with what the other parked (a slice of another connection's ring). Nobody
// else keeps a reference, so each connection's send queue holds the last
// references to slices of the other connection's ring, and releases them
// when its completions are reaped - under its own lock, if the release
// buffer could not grow: both at once, each waiting for the other's lock.
struct Mailbox {
  std::mutex mu;
  std::deque<rrpc_iobuf *> q;
};
Mailbox g_box[2];

void swap_handler(void *arg, rrpc_server_call *call) {
  int me = (int)(intptr_t)arg;
  rrpc_controller *c = rrpc_server_call_controller(call);
  rrpc_iobuf *mine;
  rrpc_iobuf_new(&mine);
  (void)__real_rrpc_iobuf_move(mine, rrpc_controller_request_attachment(c));  // empty target: no allocation
  std::deque<rrpc_iobuf *> theirs;
  {
    std::lock_guard<std::mutex> g(g_box[me].mu);
    theirs.swap(g_box[me].q);
  }
  {
    std::lock_guard<std::mutex> g(g_box[1 - me].mu);
    g_box[1 - me].q.push_back(mine);
  }
  // Everything parked so far goes out in this answer: many slices per send.
  for (rrpc_iobuf *t : theirs) {
    rrpc_iobuf_append_iobuf(rrpc_controller_response_attachment(c), t);
    rrpc_iobuf_free(t);
  }
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

void drain_boxes() {
  for (auto &b : g_box) {
    std::lock_guard<std::mutex> g(b.mu);
    for (rrpc_iobuf *i : b.q) rrpc_iobuf_free(i);
    b.q.clear();
  }
}

rrpc_channel *channel_to(int port, int timeout_ms) {
  rrpc_channel_options o = {};
  o.use_rdma = 1;
  o.timeout_ms = timeout_ms;
  o.connect_timeout_ms = 5000;
  rrpc_channel *ch = nullptr;
  rrpc_channel_new((rdma_test_addr() + ":" + std::to_string(port)).c_str(), &o, &ch);
  return ch;
}

// 0 if the call succeeded (the answer carries someone else's bytes).
int swap_call(rrpc_channel *ch, unsigned seed) {
  std::string att = rrpc_test::pattern(16 * 1024 + seed % 4096, seed);
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rq, *rs;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_new(&rs);
  rrpc_iobuf_append(rq, "x", 1);
  rrpc_iobuf_append(rrpc_controller_request_attachment(c), att.data(), att.size());
  int rc = rrpc_channel_call(ch, "test.Swap", "Swap", c, rq, rs, nullptr, nullptr);
  rrpc_iobuf_free(rq);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);
  return rc;
}

// Fails the process (instead of hanging the suite) if not disarmed in time.
struct Watchdog {
  std::atomic<bool> done{false};
  std::thread t;
  explicit Watchdog(int seconds) {
    t = std::thread([this, seconds] {
      for (int i = 0; i < seconds * 10 && !done.load(); i++) usleep(100000);  // a deadline, not a sync
      if (!done.load()) {
        printf("OOM: still running after %d s: the data path deadlocked\n", seconds);
        fflush(stdout);
        _exit(3);
      }
    });
  }
  ~Watchdog() {
    done = true;
    t.join();
  }
};

TEST(RdmaOutOfMemory, RingSlicesSwappedBetweenConnectionsUnderMoveFailuresNeitherDeadlockNorBreak) {
  Watchdog wd(150);
  rrpc_rdma_options ro;
  rrpc_rdma_options_init(&ro);
  ro.recv_zerocopy = 1;
  ro.zerocopy_min_size = 16 * 1024;
  ro.ring_size = 4u << 20;  // room for many slices held at once (a quarter of the ring)
  ASSERT_EQ(rrpc_rdma_global_init(&ro), 0);

  rrpc_server *srv[2];
  int port[2];
  for (int i = 0; i < 2; i++) {
    rrpc_server_options so = {};
    so.use_rdma = 1;
    ASSERT_EQ(rrpc_server_new(&so, &srv[i]), 0);
    rrpc_server_add_method(srv[i], "test.Swap", "Swap", swap_handler, (void *)(intptr_t)i);
    ASSERT_EQ(rrpc_server_start(srv[i], (rdma_test_addr() + ":0").c_str()), 0);
    port[i] = rrpc_server_port(srv[i]);
  }
  // Two connections to each server (they spread over the loops), three
  // threads on each: answers are reaped several at a time.
  const int kConns = 4, kThreads = 12, kCalls = 60;
  std::vector<rrpc_channel *> chs;
  for (int t = 0; t < kConns; t++) {
    chs.push_back(channel_to(port[t % 2], 3000));
    ASSERT_NE(chs.back(), nullptr);
    ASSERT_EQ(swap_call(chs.back(), 1), 0);  // connections up before injecting
  }
  if (g_moves.load() == 0) GTEST_SKIP() << "rrpc_iobuf_move is not wrapped in this build (make links it so)";

  // Concurrent calls with every allocating move failing, bounded in count
  // and time. Calls may fail meanwhile; nothing may hang.
  const uint64_t kMaxMs = 20000;
  std::atomic<int> ok{0}, failed{0};
  uint64_t t0 = now_ms();
  g_inject = true;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kCalls && now_ms() - t0 < kMaxMs; i++)
        (swap_call(chs[t % kConns], (unsigned)(t * 1000 + i)) == 0 ? ok : failed)++;
    });
  for (auto &t : ts) t.join();
  g_inject = false;
  uint64_t ms = now_ms() - t0;

  // Memory is back: every connection carries calls again.
  int after = 0;
  for (int i = 0; i < 20; i++) after += swap_call(chs[i % kConns], 5000u + (unsigned)i) == 0;
  printf("OOM: %d swapping calls in %llu ms with %llu of %llu moves failed (%d ok, %d failed); after: %d of 20 "
         "ok\n",
         ok.load() + failed.load(), (unsigned long long)ms, (unsigned long long)g_failed.load(),
         (unsigned long long)g_moves.load(), ok.load(), failed.load(), after);
  EXPECT_GT(g_failed.load(), 0u);
  EXPECT_EQ(after, 20);
  for (rrpc_channel *c : chs) rrpc_channel_free(c);
  for (auto *s : srv) {
    rrpc_server_stop(s);
    rrpc_server_free(s);
  }
  drain_boxes();
}

}  // namespace
