// held_attachments_rdma_test.cc - elastic rings (docs/elastic-rings.md):
// the application keeps received attachments for seconds while traffic
// continues on the same connection, and nothing stalls. The server's
// handler keeps every 256 KiB request attachment (zero-copy slices of the
// pieces they landed in) for 3 s while the client keeps calling for 5 s on
// one connection: every call completes in the normal bound, pieces are
// retired while held (counted) instead of stalling the stream, and once
// everything is released and the connection idle, each direction is back
// to one 4 KiB piece. With the ring (or without retiring), the ring fills
// with held slices after a few calls and the stream stops.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/held_util.h"
#include "test/rdma/rdma_test_util.h"
#include "test/rdma/tsan_suppressions.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kAttachment = 256 << 10;
constexpr auto kHold = std::chrono::seconds(3);
constexpr auto kSend = std::chrono::seconds(5);
constexpr int kIdleMs = 300;

using rrpc_held::Holder;
using rrpc_held::releaser;
using rrpc_rdma_test::stats;

TEST(HeldAttachments, HeldForSecondsWhileTrafficContinuesNothingStalls) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "bulk data path with a latency bound: run by the plain suite, too slow under TSan";
#endif
  // The test is about elastic mode; RRPC_RDMA_ELASTIC=0 would force the ring.
  if (const char *e = getenv("RRPC_RDMA_ELASTIC"); e != nullptr && strcmp(e, "0") == 0)
    GTEST_SKIP() << "RRPC_RDMA_ELASTIC=0: the ring has no retires";
  rrpc_rdma_options ro;
  rrpc_rdma_options_init(&ro);
  ro.elastic = 1;
  ro.ring_idle_ms = kIdleMs;
  // Room for everything this case holds (the copied halves of its held
  // attachments came to ~95 MiB): the registered pool still grows inline on
  // the loop that needs a block (mmap + ibv_reg_mr of 64 MiB, 320 ms in one
  // CI run, caught by the strict watchdog), a known leftover of issue 11
  // (docs/threads.md, "Left to do") that this case is not about.
  ro.pool_initial_size_mb = 256;
  ASSERT_EQ(0, rrpc_rdma_global_init(&ro));
  if (!rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";

  Holder h(kHold);
  rrpc_server *s = rrpc_rdma_test::start_echo_server(rrpc_held::keep_handler, &h);
  ASSERT_NE(nullptr, s);
  std::thread rel(releaser, &h);
  rrpc_channel *ch = rrpc_rdma_test::open_channel(rrpc_server_port(s), 1, 5000);
  ASSERT_NE(nullptr, ch);

  rrpc_rdma_stats before = stats();
  std::string att = rrpc_test::pattern(kAttachment, 7);
  rrpc_held::CallRun r;
  auto end = Clock::now() + kSend;
  while (Clock::now() < end && r.failed == 0) rrpc_held::timed_echo(ch, "x", att, &r);
  rrpc_rdma_stats mid = stats();
  rrpc_held::print_pieces("held attachments (256 KiB for 5 s)", r, before, mid);
  const int calls = r.calls;
  const double worst_ms = r.worst_ms;
  EXPECT_EQ(0, r.failed);
  EXPECT_EQ(calls, r.rdma);
  EXPECT_GT(mid.connections_elastic, before.connections_elastic);
  // More calls than one ring holds while the first attachments were still
  // kept: the stream went on past what a stalled ring allows.
  EXPECT_GT((size_t)calls * kAttachment, 2 * ro.ring_size + (1u << 20));
  EXPECT_GT(mid.piece_retires_held, before.piece_retires_held);
  // Every call answered well within its timeout (5 s): nothing waited for a
  // held attachment to be let go (that takes 3 s).
  EXPECT_LT(worst_ms, 2000.0);

  // The elastic connection's queues are sized for its credits, not the ring
  // mode's 128: 16 receives and --rdma_elastic_sq_size (31) sends.
  std::string conns = rrpc_rdma_test::http_get(rrpc_server_port(s), "/connections?format=json");
  size_t at = conns.find("\"transport\":\"RDMA\"");
  ASSERT_NE(std::string::npos, at) << conns;
  std::string row = conns.substr(conns.rfind('{', at), conns.find('}', at) - conns.rfind('{', at) + 1);
  EXPECT_NE(std::string::npos, row.find("\"sq_size\":31,")) << row;
  EXPECT_NE(std::string::npos, row.find("\"rq_size\":16,")) << row;

  // Release everything; after the idle period each direction of the one
  // connection keeps one 4 KiB piece (both ends are in this process).
  rrpc_held::stop_releaser(&h);
  rel.join();
  const uint64_t floor = 2 * 4096;
  auto deadline = Clock::now() + std::chrono::milliseconds(20 * kIdleMs + 5000);
  uint64_t used = stats().piece_used_bytes;
  while (used != floor && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a gauge, bounded
    used = stats().piece_used_bytes;
  }
  printf("after release + idle: %llu piece bytes in use (floor %llu)\n", (unsigned long long)used,
         (unsigned long long)floor);
  EXPECT_EQ(floor, used);
  // And the connection still works, from its idle pieces.
  EXPECT_EQ(0, rrpc_rdma_test::echo(ch, "after idle", "y"));

  rrpc_channel_free(ch);
  rrpc_server_stop(s);
  rrpc_server_free(s);
}

}  // namespace
