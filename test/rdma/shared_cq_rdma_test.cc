// shared_cq_rdma_test.cc - issue 12 item 1: the rrpc-dialect connections of
// one loop share one completion channel and as few send/receive CQ pairs as
// their queues need (transport/rdma/cqs.c), instead of a channel and two CQs
// each. Checked here: file descriptors per connection (was 2 per side: the
// TCP socket and a channel), CQ growth past the first pair's size with every
// connection still carrying calls, and completions of QPs destroyed while
// their calls' completions were still queued (looked up by qp_num, dropped).
#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/rdma_test_util.h"
#include "transport/rdma/cqs.h"

namespace {

int open_fds() {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (readdir(d) != nullptr) n++;
  closedir(d);
  return n;
}

rrpc_channel *open_channel(int port) { return rrpc_rdma_test::open_channel(port, 1, 30000); }

// One echo call with `att` attached; 1 when it came back whole over RDMA.
int echo_call(rrpc_channel *ch, const std::string &req, const std::string &att) {
  std::string ratt;
  int used = 0;
  return rrpc_rdma_test::echo(ch, req, att, &ratt, &used) == 0 && ratt == att && used;
}

class SharedCq : public ::testing::Test {
 protected:
  void SetUp() override {
    srv_ = rrpc_rdma_test::start_echo_server();
    ASSERT_NE(srv_, nullptr);
    port_ = rrpc_server_port(srv_);
    // The device, the pool and one connection's worth of shared CQs exist
    // before anything is counted.
    rrpc_channel *warm = open_channel(port_);
    ASSERT_NE(warm, nullptr);
    ASSERT_EQ(echo_call(warm, "warm", ""), 1);
    warm_ = warm;
  }
  void TearDown() override {
    if (warm_) rrpc_channel_free(warm_);
    if (srv_) {
      rrpc_server_stop(srv_);
      rrpc_server_free(srv_);
    }
  }
  rrpc_server *srv_ = nullptr;
  rrpc_channel *warm_ = nullptr;
  int port_ = 0;
};

// 48 connections, both ends in this process: each adds its two TCP
// sockets and nothing else (with a channel per connection it was 4), and
// the shared CQs grow past their first size (48 x 128-deep queues per
// side) with every connection still working.
TEST_F(SharedCq, OneFdPerConnectionAndCqsGrowWithTheConnections) {
  const int kConns = 48;
  int fds0 = open_fds();
  struct rrpc__cqs_stats s0;
  rrpc__cqs_stats(&s0);
  std::vector<rrpc_channel *> chs;
  int ok = 0;
  for (int i = 0; i < kConns; i++) {
    chs.push_back(open_channel(port_));
    ASSERT_NE(chs.back(), nullptr);
    ok += echo_call(chs.back(), std::to_string(i), std::string(100 + i * 37, (char)('a' + i % 26)));
  }
  EXPECT_EQ(kConns, ok);
  int fds = open_fds() - fds0;
  struct rrpc__cqs_stats s1;
  rrpc__cqs_stats(&s1);
  EXPECT_LE(fds, 2 * kConns + 4) << "fds per connection (both sides): " << (double)fds / kConns;
  EXPECT_EQ(s1.members - s0.members, 2u * kConns);  // both ends of each
  EXPECT_GT(s1.resizes + (s1.pairs - s0.pairs), s0.resizes) << "the CQs never grew";
  // Every connection still carries calls after the growth (the first ones
  // were on the CQs before they were resized).
  ok = 0;
  for (int i = 0; i < kConns; i++) ok += echo_call(chs[(size_t)i], "again" + std::to_string(i), std::string(5000, 'z'));
  EXPECT_EQ(kConns, ok);
  for (auto *c : chs) rrpc_channel_free(c);
}

// Connections closed right after their calls (completions of their QPs
// may still be queued in the shared CQs when the QPs go) never disturb
// the others: a connection kept open all along still works, and every
// completion that named a gone QP was dropped, not dispatched.
TEST_F(SharedCq, ConnectionsClosingMidTrafficLeaveTheOthersAlone) {
  const int kRounds = 12, kPerRound = 6;
  int ok = 0, total = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < kRounds && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60); r++) {
    std::vector<std::thread> ts;
    std::vector<int> oks(kPerRound, 0);
    for (int i = 0; i < kPerRound; i++) {
      ts.emplace_back([&, i] {
        rrpc_channel *ch = open_channel(port_);
        if (ch == nullptr) return;
        for (int k = 0; k < 3; k++) oks[(size_t)i] += echo_call(ch, "r" + std::to_string(k), std::string(20000, 'q'));
        rrpc_channel_free(ch);  // its QPs go now, both ends
      });
    }
    for (auto &t : ts) t.join();
    for (int v : oks) ok += v;
    total += 3 * kPerRound;
    EXPECT_EQ(echo_call(warm_, "still", std::string(3000, 'w')), 1) << "round " << r;
  }
  EXPECT_EQ(total, ok);
  struct rrpc__cqs_stats s;
  rrpc__cqs_stats(&s);
  std::printf("shared cqs: sets=%llu pairs=%llu members=%llu misses=%llu resizes=%llu\n",
              (unsigned long long)s.sets, (unsigned long long)s.pairs, (unsigned long long)s.members,
              (unsigned long long)s.misses, (unsigned long long)s.resizes);
}

}  // namespace
