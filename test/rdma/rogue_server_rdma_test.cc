// rogue_server_rdma_test.cc - an rrpc client against a hostile CLC *server*
// (the other adversarial tests attack servers). A client offering elastic
// rings (the default) makes no ring before its Proposal; a server that
// answers ring mode gets the client's ring made after its Accept, on the
// setup thread (ring_late_start, transport/rdma/endpoint.c). The rogue here
// answers ring mode and then:
//   - closes the connection right after its Accept, while the ring may
//     still be in the making;
//   - sends a second Accept right behind the first one;
//   - reads the client's Confirm (proof that the late ring was made: it
//     announces the ring's key and address) and then sends another Accept.
// Each time the call ends within its timeout with an error (no crash, no
// hang), every ring made for these connections is released (ring_bytes back
// to where it was), and the same client process still reaches an honest
// server over RDMA.
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/rdma_test_util.h"
#include "test/rdma/rogue_peer.h"
#include "test/rdma/tsan_suppressions.h"

namespace {

using rrpc_rdma_test::stats;

// A CLC message starts with the eyecatcher "SMCR" in EBCDIC: 0xE2 first.
constexpr uint8_t kClcFirstByte = 0xE2;

// A call's timeout: the rogues that keep the connection open answer
// nothing, so their calls end there (after the client fell back to TCP).
constexpr int kCallMs = 1500;

enum class Act { kCloseAfterAccept, kTwoAccepts, kAcceptAfterConfirm };

// A listening socket on the test address and a thread per connection: a CLC Proposal gets the rogue's act, anything else (the
// client trying plain TCP after a failed handshake) is closed at once.
class RogueServer {
 public:
  explicit RogueServer(Act act) : act_(act) {
    lfd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    inet_pton(AF_INET, rrpc_test::rdma_test_addr().c_str(), &sa.sin_addr);
    socklen_t sl = sizeof sa;
    if (bind(lfd_, (sockaddr *)&sa, sizeof sa) != 0 || listen(lfd_, 16) != 0 ||
        getsockname(lfd_, (sockaddr *)&sa, &sl) != 0)
      return;
    port_ = ntohs(sa.sin_port);
    th_ = std::thread([this] { run(); });
  }
  ~RogueServer() {
    stop_ = true;
    if (th_.joinable()) th_.join();
    close(lfd_);
  }
  int port() const { return port_; }
  int proposals() const { return proposals_.load(); }
  int confirms_with_ring() const { return confirms_with_ring_.load(); }
  std::string error() {
    std::lock_guard<std::mutex> g(mu_);
    return error_;
  }

 private:
  void run() {
    while (!stop_) {
      pollfd p{lfd_, POLLIN, 0};
      if (poll(&p, 1, 50) != 1) continue;  // bounded: rechecks stop_
      int fd = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      // A thread per connection: a slow one (TSan) never keeps the next
      // one waiting in the backlog past the client's handshake timeout.
      conns_.emplace_back([this, fd] { serve(fd); });
    }
    for (auto &t : conns_) t.join();  // each ends within its 5 s receive timeout
  }

  void serve(int fd) {
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t first = 0;
    if (recv(fd, &first, 1, MSG_PEEK) != 1 || first != kClcFirstByte) {
      close(fd);  // plain TCP: no RPC is answered here
      return;
    }
    rogue::Peer p;
    p.fd = fd;  // the Peer closes it
    p.dev = rogue::device();
    rrpc__clc_msg m;
    bool ok = p.dev != nullptr && p.read_clc(&m) && m.hdr.type == RRPC_CLC_PROPOSAL;
    if (ok) proposals_++;
    // Ring mode: no elastic bit in our Accept, whatever the Proposal offered.
    p.features = RRPC_CLC_FEAT_WWI;
    p.accept.mtu = (uint8_t)p.dev->active_mtu;  // send_confirm announces accept.mtu
    ok = ok && p.pick_gid() && p.create_verbs() && p.send_confirm(RRPC_CLC_ACCEPT);
    if (ok && act_ == Act::kTwoAccepts) ok = p.send_confirm(RRPC_CLC_ACCEPT);
    if (ok && act_ == Act::kAcceptAfterConfirm) {
      ok = p.read_clc(&m) && m.hdr.type == RRPC_CLC_CONFIRM;
      if (ok && m.u.accept.rkey != 0 && m.u.accept.ring_addr != 0) confirms_with_ring_++;
      ok = ok && p.send_confirm(RRPC_CLC_ACCEPT);
    }
    if (ok && act_ != Act::kCloseAfterAccept) {
      char b[4096];
      while (recv(fd, b, sizeof b, 0) > 0) {
      }  // until the client closes (or 5 s of silence)
    }
    if (!ok) {
      std::lock_guard<std::mutex> g(mu_);
      error_ = p.error;
    }
  }

  Act act_;
  int lfd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> proposals_{0}, confirms_with_ring_{0};
  std::mutex mu_;
  std::string error_;
  std::vector<std::thread> conns_;  // the accept thread's only
  std::thread th_;
};

void init_rdma() {
  static bool done = false;
  if (done) return;
  done = true;
  rrpc_rdma_options o;
  rrpc_rdma_options_init(&o);  // elastic rings offered: the default
  o.handshake_timeout_ms = 1000;
  o.tcp_only_ttl_s = -1;  // each connection to a rogue tries the handshake again
  ASSERT_EQ(0, rrpc_rdma_global_init(&o));
}

// Registered ring bytes: ring_bytes counts elastic pieces too (the
// process-wide cache fills as connections come), rings are the rest.
uint64_t rings_only() {
  rrpc_rdma_stats st = stats();
  return st.ring_bytes - st.piece_cached_bytes - st.piece_used_bytes;
}

// Rings back to `base` within 5 s (a ring goes to the verbs thread).
bool rings_back_to(uint64_t base) {
  uint64_t end = rrpc_rdma_test::now_ms() + 5000;
  while (rings_only() != base && rrpc_rdma_test::now_ms() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a gauge, bounded
  return rings_only() == base;
}

void attack(Act act, int rounds) {
  init_rdma();
  if (!rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
  rrpc_rdma_test::EchoServer honest;
  ASSERT_NE(0, honest.port);
  uint64_t base = rings_only();
  RogueServer rogue(act);
  ASSERT_NE(0, rogue.port());
  for (int i = 0; i < rounds; i++) {
    // A channel per round: a new connection, a new handshake.
    rrpc_channel *ch = rrpc_rdma_test::open_channel(rogue.port(), 1, kCallMs);
    ASSERT_NE(nullptr, ch);
    auto t0 = std::chrono::steady_clock::now();
    std::string err;
    int rc = rrpc_rdma_test::echo(ch, "x", "", nullptr, nullptr, &err);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(0, rc) << "round " << i << ": a rogue answered an RPC?";
    EXPECT_LT(ms, kCallMs + 2000.0) << "round " << i << ": " << err;
    rrpc_channel_free(ch);
    printf("rogue server round %d: rc %d after %.0f ms: %s; rings %llu bytes\n", i, rc, ms, err.c_str(),
           (unsigned long long)rings_only());
  }
  // The attack happened (under TSan a round's call may time out before its
  // QP is made and its Proposal sent: not every round gets that far).
  printf("rogue server: %d Proposals in %d rounds\n", rogue.proposals(), rounds);
  EXPECT_GE(rogue.proposals(), 1) << rogue.error();
  EXPECT_TRUE(rings_back_to(base)) << "rings " << rings_only() << " bytes, was " << base;
  if (act == Act::kAcceptAfterConfirm) {
    EXPECT_GE(rogue.confirms_with_ring(), 1) << rogue.error();  // a late ring was made
  }
  // The client process is fine: an honest server, over RDMA.
  rrpc_channel *ch = rrpc_rdma_test::open_channel(honest.port, 1);
  ASSERT_NE(nullptr, ch);
  int used = 0;
  EXPECT_EQ(0, rrpc_rdma_test::echo(ch, "honest", "after the rogue", nullptr, &used));
  EXPECT_EQ(1, used);
  rrpc_channel_free(ch);
}

TEST(RogueServer, CloseRightAfterTheAcceptReleasesTheLateRing) { attack(Act::kCloseAfterAccept, 8); }

TEST(RogueServer, ASecondAcceptWhileTheRingIsMadeFailsTheHandshakeCleanly) { attack(Act::kTwoAccepts, 3); }

TEST(RogueServer, AnAcceptAfterTheConfirmFailsTheHandshakeCleanly) { attack(Act::kAcceptAfterConfirm, 3); }

}  // namespace
