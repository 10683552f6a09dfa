// legacy_peer_rdma_test.cc - RDMA peers that speak neither rrpc's CLC nor
// the other's RDMA hello (issue 8, item 3 and "both sides fall back"):
//  - an rrpc RDMA client (rrpc's dialect, or brpc's) calls a server that closes the connection on the
//    first bytes it does not understand (brpc <= 1.17 in TCP mode, or a
//    brpc server given a CLC Proposal): the client calls again over plain
//    TCP once, the call succeeds, and the server is remembered as TCP-only
//    (the next connection sends it no handshake bytes at all);
//  - a brpc client's RDMA hello reaches an rrpc server with use_rdma on a
//    live device. Its GID is made up, so the server either offers RDMA
//    (a valid hello of its own) or, where the device refuses a route to
//    that GID (rxe), refuses with brpc's won't-do hello; the client
//    answers ACK=0 either way and must be served over TCP on the same
//    connection.
// The legacy server is a test program: a front that closes any connection
// whose first byte is the CLC eyecatcher and relays the others to an rrpc
// TCP server.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rrpc.h"
#include "test/common/hostile.h"
#include "test/common/test_util.h"
#include "test/rdma/rdma_test_util.h"
#include "test/rdma/tsan_suppressions.h"

extern "C" {
#include "transport/fallback_codes.h"
#include "transport/rdma/wire/brpc_hello.h"
}

using rrpc_test::rdma_test_addr;

namespace {

using rrpc_rdma_test::echo_handler;

rrpc_server *start_server(int use_rdma, int *port) {
  rrpc_server_options o = {};
  o.use_rdma = use_rdma;
  rrpc_server *s = nullptr;
  if (rrpc_server_new(&o, &s) != 0) return nullptr;
  rrpc_server_add_method(s, "test.Echo", "Echo", echo_handler, nullptr);
  if (rrpc_server_start(s, (rdma_test_addr() + ":0").c_str()) != 0) return nullptr;
  *port = rrpc_server_port(s);
  return s;
}

int tcp_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, rdma_test_addr().c_str(), &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Relay both ways until either side closes (bounded: 30 s).
void relay(int a, int b) {
  char buf[65536];
  double end = rrpc_test::now_ms() + 30000;
  while (rrpc_test::now_ms() < end) {
    pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    if (poll(p, 2, 200) < 0) return;
    for (int i = 0; i < 2; i++) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(p[i].fd, buf, sizeof buf);
      if (n <= 0) return;
      for (ssize_t off = 0; off < n;) {
        ssize_t w = write(p[1 - i].fd, buf + off, static_cast<size_t>(n - off));
        if (w <= 0) return;
        off += w;
      }
    }
  }
}

// The legacy server: closes on a CLC eyecatcher, relays anything else.
class LegacyFront {
 public:
  explicit LegacyFront(int backend) : backend_(backend) {
    lfd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, rdma_test_addr().c_str(), &a.sin_addr);
    bind(lfd_, reinterpret_cast<sockaddr *>(&a), sizeof a);
    listen(lfd_, 16);
    socklen_t len = sizeof a;
    getsockname(lfd_, reinterpret_cast<sockaddr *>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~LegacyFront() {
    stop_ = true;
    shutdown(lfd_, SHUT_RDWR);
    acceptor_.join();
    for (auto &t : conns_) t.join();
    close(lfd_);
  }
  int port() const { return port_; }
  int clc_closes() const { return clc_closes_.load(); }
  int hello_closes() const { return hello_closes_.load(); }
  int relayed() const { return relayed_.load(); }

 private:
  void Accept() {
    while (!stop_) {
      pollfd p = {lfd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int fd = accept(lfd_, nullptr, nullptr);
      if (fd < 0) continue;
      conns_.emplace_back([this, fd] { Serve(fd); });
    }
  }
  void Serve(int fd) {
    unsigned char first = 0;
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0 || read(fd, &first, 1) != 1) {
      close(fd);
      return;
    }
    if (first == 0xE2) { // "S" of EBCDIC "SMCR": a CLC message this server does not know
      clc_closes_++;
      close(fd);
      return;
    }
    if (first == 'R') { // "RDMA"/"RDM3": brpc's RDMA hello, which it does not know either
      hello_closes_++;
      close(fd);
      return;
    }
    int b = tcp_connect(backend_);
    if (b >= 0 && write(b, &first, 1) == 1) {
      relayed_++;
      relay(fd, b);
    }
    if (b >= 0) close(b);
    close(fd);
  }
  int backend_, lfd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> clc_closes_{0}, hello_closes_{0}, relayed_{0};
  std::thread acceptor_;
  std::vector<std::thread> conns_; // joined at the end (a few per test)
};

rrpc_channel *open_channel(int port, int dialect = 0) {
  rrpc_channel_options o = {};
  o.use_rdma = 1;
  o.rdma_dialect = dialect;
  o.timeout_ms = 30000;
  o.connect_timeout_ms = 5000;
  std::string addr = rdma_test_addr() + ":" + std::to_string(port);
  rrpc_channel *ch = nullptr;
  return rrpc_channel_new(addr.c_str(), &o, &ch) == 0 ? ch : nullptr;
}

// One echo with `att_size` bytes of attachment; content checked.
int echo_call(rrpc_channel *ch, size_t att_size, int *used_rdma) {
  std::string att = rrpc_test::pattern(att_size, 7), ratt;
  int rc = rrpc_rdma_test::echo(ch, "hi", att, &ratt, used_rdma);
  if (rc == 0 && ratt != att) rc = -1;
  return rc;
}

rrpc_rdma_stats rdma_stats() {
  rrpc_rdma_stats s = {};
  rrpc_rdma_get_stats(&s);
  return s;
}

TEST(LegacyPeer, ServerThatClosesOnTheProposalIsCalledOverTcpAndRemembered) {
  ASSERT_EQ(1, rrpc_rdma_available()) << "needs an RDMA device";
  int backend_port = 0;
  rrpc_server *backend = start_server(0, &backend_port);
  ASSERT_NE(nullptr, backend);
  {
    LegacyFront front(backend_port);
    rrpc_rdma_stats s0 = rdma_stats();
    rrpc_channel *ch = open_channel(front.port());
    ASSERT_NE(nullptr, ch);
    for (size_t size : {size_t{0}, size_t{1}, size_t{8191}, size_t{1} << 20}) {
      int used = -1;
      EXPECT_EQ(0, echo_call(ch, size, &used)) << size;
      EXPECT_EQ(0, used);
    }
    rrpc_rdma_stats s1 = rdma_stats();
    EXPECT_EQ(1, front.clc_closes()); // one Proposal, then TCP
    EXPECT_EQ(s0.connections_fallback + 1, s1.connections_fallback);
    EXPECT_EQ(RRPC_FB_PEER_CLOSED_HANDSHAKE, s1.fallback_last_reason);
    rrpc_channel_free(ch);

    // A new connection to the same server: TCP from its first byte.
    rrpc_channel *ch2 = open_channel(front.port());
    ASSERT_NE(nullptr, ch2);
    int used = -1;
    EXPECT_EQ(0, echo_call(ch2, 100, &used));
    rrpc_rdma_stats s2 = rdma_stats();
    EXPECT_EQ(1, front.clc_closes()); // no second Proposal
    EXPECT_EQ(2, front.relayed());
    EXPECT_EQ(RRPC_FB_PEER_TCP_ONLY, s2.fallback_last_reason);
    EXPECT_EQ(s1.connections_rdma, s2.connections_rdma);
    rrpc_channel_free(ch2);
  }
  rrpc_server_free(backend);
}

// The same server reached by an rrpc client in brpc's dialect: it closes on
// the hello, and the client goes on over TCP (before: every call ECLOSE).
TEST(LegacyPeer, ServerThatClosesOnTheBrpcHelloIsCalledOverTcpAndRemembered) {
  ASSERT_EQ(1, rrpc_rdma_available()) << "needs an RDMA device";
  int backend_port = 0;
  rrpc_server *backend = start_server(0, &backend_port);
  ASSERT_NE(nullptr, backend);
  {
    LegacyFront front(backend_port);
    rrpc_rdma_stats s0 = rdma_stats();
    rrpc_channel *ch = open_channel(front.port(), RRPC_RDMA_DIALECT_BRPC);
    ASSERT_NE(nullptr, ch);
    for (size_t size : {size_t{0}, size_t{8193}, size_t{1} << 20}) {
      int used = -1;
      EXPECT_EQ(0, echo_call(ch, size, &used)) << size;
      EXPECT_EQ(0, used);
    }
    rrpc_rdma_stats s1 = rdma_stats();
    EXPECT_EQ(1, front.hello_closes()); // one hello, then TCP
    EXPECT_EQ(0, front.clc_closes());
    EXPECT_EQ(s0.connections_fallback + 1, s1.connections_fallback);
    EXPECT_EQ(RRPC_FB_PEER_CLOSED_HANDSHAKE, s1.fallback_last_reason);
    rrpc_channel_free(ch);

    rrpc_channel *ch2 = open_channel(front.port(), RRPC_RDMA_DIALECT_BRPC);
    ASSERT_NE(nullptr, ch2);
    int used = -1;
    EXPECT_EQ(0, echo_call(ch2, 100, &used));
    rrpc_rdma_stats s2 = rdma_stats();
    EXPECT_EQ(1, front.hello_closes()); // remembered: no second hello
    EXPECT_EQ(2, front.relayed());
    EXPECT_EQ(RRPC_FB_PEER_TCP_ONLY, s2.fallback_last_reason);
    rrpc_channel_free(ch2);
  }
  rrpc_server_free(backend);
}

TEST(LegacyPeer, BrpcClientThatAcksZeroIsServedOverTcp) {
  ASSERT_EQ(1, rrpc_rdma_available()) << "needs an RDMA device";
  int port = 0;
  rrpc_server *server = start_server(1, &port);
  ASSERT_NE(nullptr, server);
  for (int version : {2, 3}) {
    int fd = tcp_connect(port);
    ASSERT_GE(fd, 0);
    rrpc__brpc_hello h = {};
    h.version = version;
    h.hello_ver = 2;
    h.impl_ver = 1;
    h.block_size = 8160;
    h.sq_size = h.rq_size = 128;
    h.gid_len = 16;
    h.qp_num = 99;
    uint8_t buf[RRPC_BRPC_HELLO_MAX];
    size_t n = 0;
    ASSERT_EQ(0, rrpc__brpc_hello_encode(&h, buf, sizeof buf, &n));
    ASSERT_EQ(static_cast<ssize_t>(n), send(fd, buf, n, 0));
    // The server's hello, in the client's form.
    size_t got = 0, len = 0;
    while (rrpc__brpc_hello_frame(buf, got, &len) == RRPC_BRPC_WAIT) {
      ssize_t r = recv(fd, buf + got, sizeof buf - got, 0);
      ASSERT_GT(r, 0) << "the server closed the connection";
      got += static_cast<size_t>(r);
    }
    ASSERT_EQ(RRPC_BRPC_WHOLE, rrpc__brpc_hello_frame(buf, got, &len));
    rrpc__brpc_hello reply;
    ASSERT_EQ(0, rrpc__brpc_hello_decode(buf, len, &reply));
    EXPECT_EQ(version, reply.version);
    if (rrpc__brpc_hello_valid(&reply)) {
      EXPECT_NE(0u, reply.qp_num);
      EXPECT_EQ(16u, reply.gid_len);
    } else {
      EXPECT_EQ(0u, reply.qp_num);
    }
    uint8_t ack[4];
    rrpc__brpc_ack_encode(0, ack);
    std::string req = std::string(reinterpret_cast<char *>(ack), 4) +
                      rrpc_test::request_frame("test.Echo", "Echo", "over tcp", 5);
    ASSERT_EQ(static_cast<ssize_t>(req.size()), send(fd, req.data(), req.size(), 0));
    char hdr[12];
    size_t h_got = 0;
    while (h_got < sizeof hdr) {
      ssize_t r = recv(fd, hdr + h_got, sizeof hdr - h_got, 0);
      ASSERT_GT(r, 0) << "the server closed the connection";
      h_got += static_cast<size_t>(r);
    }
    EXPECT_EQ(0, memcmp(hdr, "PRPC", 4));
    close(fd);
  }
  rrpc_server_free(server);
}

} // namespace
