// cm_rdma_test.cc - QPs connected through rdma_cm (--rdma_use_cm,
// transport/rdma/cm/): the CLC exchange decides, rdma_cm connects.
//   - An honest pair comes up over RDMA through rdma_cm: both sides count
//     it (cm_connects, cm_accepts) and /connections says setup "rdma_cm"
//     and the link (RoCE on rxe, iWARP on siw).
//   - A server whose Accept names a port where no rdma_cm listener is
//     (a rogue CLC server): the client's connect is refused or times out,
//     it counts a cm failure, declines with 0x09990000 within its handshake
//     deadline and goes on without RDMA; the same process then still
//     reaches an honest server through rdma_cm.
//   - A connect request that names no waiting endpoint (a stranger's) is
//     rejected by the listener and counted; the server keeps serving.
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/rdma_test_util.h"
#include "test/rdma/rogue_peer.h"
#include "test/rdma/tsan_suppressions.h"

namespace {

using rrpc_rdma_test::stats;

constexpr uint8_t kClcFirstByte = 0xE2;  // "SMCR" in EBCDIC
constexpr int kHandshakeMs = 1500;

void init_rdma() {
  static bool done = false;
  if (done) return;
  done = true;
  rrpc_rdma_options o;
  rrpc_rdma_options_init(&o);
  o.use_cm = 1;
  o.handshake_timeout_ms = kHandshakeMs;
  o.tcp_only_ttl_s = -1;  // each connection to the rogue tries the handshake again
  ASSERT_EQ(0, rrpc_rdma_global_init(&o));
}

// A TCP port bound (not listening) on the test address: nothing answers
// rdma_cm there (RoCE: no listener for the service id; iWARP: MPA's TCP
// connect is refused). Held open for the test so nobody else takes it.
struct DeadPort {
  int fd = -1;
  int port = 0;
  DeadPort() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    inet_pton(AF_INET, rrpc_test::rdma_test_addr().c_str(), &sa.sin_addr);
    socklen_t sl = sizeof sa;
    if (bind(fd, (sockaddr *)&sa, sizeof sa) == 0 && getsockname(fd, (sockaddr *)&sa, &sl) == 0)
      port = ntohs(sa.sin_port);
  }
  ~DeadPort() { close(fd); }
};

// A CLC server that agrees to rdma_cm and names `cm_port` in its Accept,
// then reads what the client says next (its Decline, we expect).
class RogueCmServer {
 public:
  explicit RogueCmServer(int cm_port) : cm_port_(cm_port) {
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
  ~RogueCmServer() {
    stop_ = true;
    if (th_.joinable()) th_.join();
    close(lfd_);
  }
  int port() const { return port_; }
  int cm_offers() const { return cm_offers_.load(); }
  uint32_t decline() const { return decline_.load(); }
  std::string error() const { return error_; }

 private:
  void run() {
    uint64_t end = rrpc_rdma_test::now_ms() + 20000;
    while (!stop_ && rrpc_rdma_test::now_ms() < end) {
      pollfd p{lfd_, POLLIN, 0};
      if (poll(&p, 1, 50) != 1) continue;  // bounded: rechecks stop_
      int fd = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) serve(fd);
    }
  }

  void serve(int fd) {
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t first = 0;
    if (recv(fd, &first, 1, MSG_PEEK) != 1 || first != kClcFirstByte) {
      close(fd);  // the client's plain TCP after its fallback: nothing answered here
      return;
    }
    rogue::Peer p;
    p.fd = fd;
    p.dev = rogue::device();
    rrpc__clc_msg m;
    bool ok = p.dev != nullptr && p.read_clc(&m) && m.hdr.type == RRPC_CLC_PROPOSAL;
    if (ok && (m.u.proposal.rrpc_features & RRPC_CLC_FEAT_CM)) cm_offers_++;
    p.features = RRPC_CLC_FEAT_WWI | RRPC_CLC_FEAT_CM;  // ring mode, rdma_cm
    p.psn = (uint32_t)cm_port_;                       // the Accept's PSN names the cm port
    p.accept.mtu = (uint8_t)p.dev->active_mtu;
    ok = ok && p.pick_gid() && p.create_verbs() && p.send_confirm(RRPC_CLC_ACCEPT);
    ok = ok && p.read_clc(&m);
    if (ok && m.hdr.type == RRPC_CLC_DECLINE) decline_ = m.u.decline.diag;
    if (!ok) error_ = p.error;
  }

  int cm_port_;
  int lfd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> cm_offers_{0};
  std::atomic<uint32_t> decline_{0};
  std::string error_;
  std::thread th_;
};

bool honest_call_through_cm(int port) {
  rrpc_channel *ch = rrpc_rdma_test::open_channel(port, 1);
  if (ch == nullptr) return false;
  int used = 0;
  int rc = rrpc_rdma_test::echo(ch, "ping", "through rdma_cm", nullptr, &used);
  rrpc_channel_free(ch);
  return rc == 0 && used == 1;
}

TEST(RdmaCm, ConnectsThroughRdmaCmAndSaysSo) {
  init_rdma();
  if (!rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
  rrpc_rdma_test::EchoServer srv;
  ASSERT_NE(0, srv.port);
  rrpc_rdma_stats before = stats();
  rrpc_channel *ch = rrpc_rdma_test::open_channel(srv.port, 1);
  ASSERT_NE(nullptr, ch);
  int used = 0;
  ASSERT_EQ(0, rrpc_rdma_test::echo(ch, "hello", std::string(100000, 'c'), nullptr, &used));
  EXPECT_EQ(1, used);
  rrpc_rdma_stats after = stats();
  EXPECT_EQ(before.cm_connects + 1, after.cm_connects);
  EXPECT_EQ(before.cm_accepts + 1, after.cm_accepts);
  EXPECT_EQ(before.cm_failures, after.cm_failures);
  // The server's view of its connection (the client's is in the same
  // process but not on a server's page).
  std::string page = rrpc_rdma_test::http_get(srv.port, "/connections?format=json");
  EXPECT_NE(std::string::npos, page.find("\"setup\":\"rdma_cm\"")) << page;
  bool iwarp = page.find("\"link\":\"iWARP\"") != std::string::npos;
  bool roce = page.find("\"link\":\"RoCE\"") != std::string::npos;
  EXPECT_TRUE(iwarp || roce) << page;
  printf("rdma_cm connection up, link %s\n", iwarp ? "iWARP" : "RoCE");
  rrpc_channel_free(ch);
}

TEST(RdmaCm, RefusedConnectDeclinesAndFallsBack) {
  init_rdma();
  if (!rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
  DeadPort dead;
  ASSERT_NE(0, dead.port);
  RogueCmServer rogue(dead.port);
  ASSERT_NE(0, rogue.port());
  rrpc_rdma_stats before = stats();
  rrpc_channel *ch = rrpc_rdma_test::open_channel(rogue.port(), 1, 3 * kHandshakeMs);
  ASSERT_NE(nullptr, ch);
  auto t0 = std::chrono::steady_clock::now();
  std::string err;
  int rc = rrpc_rdma_test::echo(ch, "x", "", nullptr, nullptr, &err);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  rrpc_channel_free(ch);
  // The rogue answers no RPC: the call fails, in bounded time.
  EXPECT_NE(0, rc);
  EXPECT_LT(ms, 3 * kHandshakeMs + 2000.0) << err;
  EXPECT_EQ(1, rogue.cm_offers()) << rogue.error();
  // The client declined the handshake (refused or timed-out connect),
  // counted it, and went on over TCP (which the rogue closed).
  EXPECT_EQ((uint32_t)RRPC_CLC_DECL_INTERR, rogue.decline()) << rogue.error();
  rrpc_rdma_stats after = stats();
  EXPECT_EQ(before.cm_failures + 1, after.cm_failures);
  EXPECT_EQ(before.cm_connects, after.cm_connects);
  EXPECT_LE(before.connections_fallback + 1, after.connections_fallback);
  printf("refused rdma_cm connect: declined after %.0f ms (%s)\n", ms, err.c_str());
  // The same process still connects through rdma_cm to an honest server.
  rrpc_rdma_test::EchoServer honest;
  ASSERT_NE(0, honest.port);
  EXPECT_TRUE(honest_call_through_cm(honest.port));
}

// The next rdma_cm event on `ec` within `ms` (acknowledged), or -1.
int next_event(rdma_event_channel *ec, int ms, int *status) {
  pollfd p{ec->fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return -1;
  rdma_cm_event *ev;
  if (rdma_get_cm_event(ec, &ev) != 0) return -1;
  int type = ev->event;
  *status = ev->status;
  rdma_ack_cm_event(ev);
  return type;
}

// A stranger reads a real Accept (so it knows the listener's port), then
// connects to the listener naming a token no endpoint waits for: the
// request is rejected and counted, and the server goes on serving.
TEST(RdmaCm, StrangersConnectRequestIsRejected) {
  init_rdma();
  if (!rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
  rrpc_rdma_test::EchoServer srv;
  ASSERT_NE(0, srv.port);
  rogue::Peer p;
  // Both dialects offered: the server picks imm where the device has
  // immediate data (rxe), cursor where not (siw).
  p.features = RRPC_CLC_FEAT_WWI | RRPC_CLC_FEAT_CURSOR | RRPC_CLC_FEAT_CM;
  ASSERT_TRUE(p.propose(rrpc_test::rdma_test_addr(), srv.port) && p.read_accept()) << p.error;
  ASSERT_TRUE(p.accept.rrpc_features & RRPC_CLC_FEAT_CM);
  int cm_port = (int)p.accept.psn;
  ASSERT_GT(cm_port, 0);
  rrpc_rdma_stats before = stats();

  rdma_event_channel *ec = rdma_create_event_channel();
  ASSERT_NE(nullptr, ec);
  rdma_cm_id *id = nullptr;
  ASSERT_EQ(0, rdma_create_id(ec, &id, nullptr, RDMA_PS_TCP));
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons((uint16_t)cm_port);
  inet_pton(AF_INET, rrpc_test::rdma_test_addr().c_str(), &dst.sin_addr);
  int st = 0;
  ASSERT_EQ(0, rdma_resolve_addr(id, nullptr, (sockaddr *)&dst, 2000));
  ASSERT_EQ(RDMA_CM_EVENT_ADDR_RESOLVED, next_event(ec, 5000, &st));
  ASSERT_EQ(0, rdma_resolve_route(id, 2000));
  ASSERT_EQ(RDMA_CM_EVENT_ROUTE_RESOLVED, next_event(ec, 5000, &st));
  ibv_qp_init_attr qa{};
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ASSERT_EQ(0, rdma_create_qp(id, nullptr, &qa));  // iWARP's connect needs a real QP
  uint32_t pdata[2] = {htonl(0x52434d31u), htonl(p.accept.token ^ 0x5a5a5a5au)};  // "RCM1", a wrong token
  rdma_conn_param cp{};
  cp.private_data = pdata;
  cp.private_data_len = sizeof pdata;
  cp.responder_resources = cp.initiator_depth = 1;
  cp.retry_count = 3;
  cp.rnr_retry_count = 3;
  ASSERT_EQ(0, rdma_connect(id, &cp));
  int ev = next_event(ec, 10000, &st);
  EXPECT_TRUE(ev == RDMA_CM_EVENT_REJECTED || ev == RDMA_CM_EVENT_UNREACHABLE || ev == RDMA_CM_EVENT_CONNECT_ERROR)
      << "event " << (ev >= 0 ? rdma_event_str((rdma_cm_event_type)ev) : "none") << " status " << st;
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ec);
  // The listener counted it (its loop may not have run yet: bounded wait).
  uint64_t end = rrpc_rdma_test::now_ms() + 5000;
  while (stats().cm_failures == before.cm_failures && rrpc_rdma_test::now_ms() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a counter, bounded
  EXPECT_EQ(before.cm_failures + 1, stats().cm_failures);
  EXPECT_EQ(before.cm_accepts, stats().cm_accepts);
  EXPECT_TRUE(honest_call_through_cm(srv.port));
}

}  // namespace
