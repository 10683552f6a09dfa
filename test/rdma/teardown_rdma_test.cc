// teardown_rdma_test.cc - zero-copy ring slices released on other threads
// while their connection is torn down (issue 13, item 14). A slice's
// release takes its endpoint's lock and may post an ACK; teardown destroys
// the QP. Run under ThreadSanitizer (make TSAN=1 test-rdma-tsan) this is
// where unlocked teardown writes show up as reports; in the plain build a
// post into a destroyed QP is a crash. Both sides are exercised: the client
// closes while another thread still drops the responses it received, and
// the server's connection goes while its handlers' parked requests are
// dropped by another thread.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/rdma_test_util.h"
#include "test/rdma/tsan_suppressions.h"

using rrpc_test::rdma_test_addr;

namespace {

using rrpc_rdma_test::now_ms;

// Drops the iobufs handed to it on its own thread, when told to.
struct Dropper {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<rrpc_iobuf *> q;
  bool go = false, stop = false;
  std::thread t;
  Dropper() {
    t = std::thread([this] {
      std::unique_lock<std::mutex> g(mu);
      for (;;) {
        cv.wait(g, [this] { return (go && !q.empty()) || stop; });
        if (stop && q.empty()) return;
        std::deque<rrpc_iobuf *> batch;
        batch.swap(q);
        go = false;
        g.unlock();
        for (rrpc_iobuf *b : batch) rrpc_iobuf_free(b);
        g.lock();
      }
    });
  }
  void park(rrpc_iobuf *b) {
    std::lock_guard<std::mutex> g(mu);
    q.push_back(b);
  }
  void release_now() {
    std::lock_guard<std::mutex> g(mu);
    go = true;
    cv.notify_one();
  }
  ~Dropper() {
    {
      std::lock_guard<std::mutex> g(mu);
      stop = go = true;
      cv.notify_one();
    }
    t.join();
  }
};

Dropper *g_server_dropper;

// Echoes, and parks the request attachment (a slice of the server
// connection's ring) with the dropper instead of letting it go.
void parking_echo(void *, rrpc_server_call *call) {
  rrpc_controller *c = rrpc_server_call_controller(call);
  rrpc_iobuf_append_iobuf(rrpc_controller_response_attachment(c), rrpc_controller_request_attachment(c));
  rrpc_iobuf *keep;
  rrpc_iobuf_new(&keep);
  rrpc_iobuf_append_iobuf(keep, rrpc_controller_request_attachment(c));
  g_server_dropper->park(keep);
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

TEST(RdmaTeardown, SlicesReleasedOnOtherThreadsWhileConnectionsClose) {
  rrpc_rdma_options ro;
  rrpc_rdma_options_init(&ro);
  ro.recv_zerocopy = 1;
  ro.zerocopy_min_size = 16 * 1024;
  ro.ring_size = 1u << 20;
  ASSERT_EQ(rrpc_rdma_global_init(&ro), 0);
  Dropper server_dropper, client_dropper;
  g_server_dropper = &server_dropper;
  rrpc_server_options so = {};
  so.use_rdma = 1;
  rrpc_server *srv;
  ASSERT_EQ(rrpc_server_new(&so, &srv), 0);
  rrpc_server_add_method(srv, "test.Echo", "Echo", parking_echo, nullptr);
  ASSERT_EQ(rrpc_server_start(srv, (rdma_test_addr() + ":0").c_str()), 0);
  std::string addr = rdma_test_addr() + ":" + std::to_string(rrpc_server_port(srv));

  const int kRounds = 25, kCalls = 6;
  const uint64_t kMaxMs = 60000;
  int rounds = 0, calls_ok = 0, rdma = 0;
  uint64_t t0 = now_ms();
  for (; rounds < kRounds && now_ms() - t0 < kMaxMs; rounds++) {
    rrpc_channel_options o = {};
    o.use_rdma = 1;
    o.timeout_ms = 5000;
    o.connect_timeout_ms = 5000;
    rrpc_channel *ch;
    ASSERT_EQ(rrpc_channel_new(addr.c_str(), &o, &ch), 0);
    for (int i = 0; i < kCalls; i++) {
      std::string att = rrpc_test::pattern(20 * 1024 + (size_t)i, (unsigned)(rounds * 100 + i));
      rrpc_controller *c;
      rrpc_controller_new(&c);
      rrpc_iobuf *rq, *rs;
      rrpc_iobuf_new(&rq);
      rrpc_iobuf_new(&rs);
      rrpc_iobuf_append(rq, "x", 1);
      rrpc_iobuf_append(rrpc_controller_request_attachment(c), att.data(), att.size());
      if (rrpc_channel_call(ch, "test.Echo", "Echo", c, rq, rs, nullptr, nullptr) == 0 &&
          rrpc_test::iobuf_string(rrpc_controller_response_attachment(c)) == att) {
        calls_ok++;
        rdma += rrpc_controller_used_rdma(c);
        // The response attachment is a slice of the client connection's
        // ring: another thread drops it, racing the close below.
        rrpc_iobuf *keep;
        rrpc_iobuf_new(&keep);
        rrpc_iobuf_append_iobuf(keep, rrpc_controller_response_attachment(c));
        client_dropper.park(keep);
      }
      rrpc_iobuf_free(rq);
      rrpc_iobuf_free(rs);
      rrpc_controller_free(c);
    }
    // Both droppers release while both ends of the connection go away.
    client_dropper.release_now();
    server_dropper.release_now();
    rrpc_channel_free(ch);
  }
  printf("teardown: %d rounds of %d zero-copy calls (%d ok, %d over RDMA), slices dropped on other threads "
         "while the connections closed, %llu ms\n",
         rounds, kCalls, calls_ok, rdma, (unsigned long long)(now_ms() - t0));
  EXPECT_EQ(calls_ok, rounds * kCalls);
  EXPECT_EQ(rdma, calls_ok);
  rrpc_server_stop(srv);
  rrpc_server_free(srv);
  server_dropper.release_now();
}

}  // namespace
