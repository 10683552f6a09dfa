// brpc_hello_test.cc - a brpc client with RDMA on meets an rrpc server
// that does not serve brpc's RDMA dialect (issue 8): the client opens with
// brpc's RDMA hello (v2 "RDMA" or v3 "RDM3"). The server must answer with
// brpc's "won't do RDMA" hello in the same form, take the client's ACK=0
// and serve baidu_std on the same connection - never close it (before the
// fix it parsed the hello as baidu_std and closed). Malformed hellos and an
// ACK that claims RDMA after the refusal close it, counted; a client that
// stalls mid-hello is closed at the sniff deadline.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "rrpc/rrpc.h"
#include "test/common/hostile.h"

extern "C" {
#include "rrpc/internal/metrics.h"
#include "transport/fallback_codes.h"
#include "transport/rdma/wire/brpc_hello.h"
}

namespace {

using namespace rrpc_test;

const int kSniffMs = 400;

void echo(void *, rrpc_server_call *call) { rrpc_server_call_respond(call, rrpc_server_call_request(call)); }

std::map<uint32_t, uint64_t> Fallbacks() {
  std::map<uint32_t, uint64_t> m;
  rrpc__metrics_fallbacks([](void *ctx, uint32_t code, uint64_t n) { (*static_cast<std::map<uint32_t, uint64_t> *>(ctx))[code] = n; },
                          &m);
  return m;
}

std::string Hello(int version, uint16_t hello_ver = 2) {
  rrpc__brpc_hello h;
  memset(&h, 0, sizeof h);
  h.version = version;
  h.hello_ver = hello_ver;
  h.impl_ver = 1;
  h.block_size = 8160;
  h.sq_size = h.rq_size = 128;
  h.gid_len = 16;
  h.gid[15] = 1;
  h.qp_num = 77;
  uint8_t buf[RRPC_BRPC_HELLO_MAX];
  size_t n = 0;
  EXPECT_EQ(0, rrpc__brpc_hello_encode(&h, buf, sizeof buf, &n));
  return std::string(reinterpret_cast<char *>(buf), n);
}

std::string Ack(uint32_t flags) {
  uint8_t a[4];
  rrpc__brpc_ack_encode(flags, a);
  return std::string(reinterpret_cast<char *>(a), 4);
}

bool SendAll(int fd, const std::string &s) { return send(fd, s.data(), s.size(), MSG_NOSIGNAL) == (ssize_t)s.size(); }

// Read exactly n bytes (blocking; the server answers or closes).
std::string ReadN(int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, &out[got], n - got, 0);
    if (r <= 0) break;
    got += (size_t)r;
  }
  out.resize(got);
  return out;
}

// The server's refusal hello, in the form the client used.
void ExpectRefusal(int fd, int version) {
  if (version == 2) {
    std::string r = ReadN(fd, 40);
    ASSERT_EQ(40u, r.size());
    const uint8_t *p = reinterpret_cast<const uint8_t *>(r.data());
    EXPECT_EQ(0, memcmp(p, "RDMA", 4));
    EXPECT_EQ(40, p[4] << 8 | p[5]);
    EXPECT_EQ(0xFFFF, p[6] << 8 | p[7]); // the TCP-mode form
    for (int i = 8; i < 40; i++) EXPECT_EQ(0, p[i]) << i;
    return;
  }
  std::string hdr = ReadN(fd, 8);
  ASSERT_EQ(8u, hdr.size());
  EXPECT_EQ(0, memcmp(hdr.data(), "RDM3", 4));
  const uint8_t *p = reinterpret_cast<const uint8_t *>(hdr.data());
  uint32_t pb = (uint32_t)p[4] << 24 | p[5] << 16 | p[6] << 8 | p[7];
  std::string whole = hdr + ReadN(fd, pb);
  rrpc__brpc_hello d;
  ASSERT_EQ(0, rrpc__brpc_hello_decode(reinterpret_cast<const uint8_t *>(whole.data()), whole.size(), &d));
  EXPECT_EQ(0, rrpc__brpc_hello_valid(&d));
  EXPECT_EQ(0u, d.block_size);
  EXPECT_EQ(0u, d.qp_num);
}

// One echo over the raw connection: the response frame comes back.
void ExpectEcho(int fd, const std::string &prefix) {
  std::string req = request_frame("test.EchoService", "Echo", "hello brpc", 9);
  ASSERT_TRUE(SendAll(fd, prefix + req));
  std::string hdr = ReadN(fd, 12);
  ASSERT_EQ(12u, hdr.size()) << "the server closed the connection";
  EXPECT_EQ(0, memcmp(hdr.data(), "PRPC", 4));
  const uint8_t *p = reinterpret_cast<const uint8_t *>(hdr.data());
  uint32_t body = (uint32_t)p[4] << 24 | p[5] << 16 | p[6] << 8 | p[7];
  std::string rest = ReadN(fd, body);
  EXPECT_NE(std::string::npos, rest.find("hello brpc"));
}

class BrpcHello : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    rrpc_limits l = {};
    l.clc_sniff_timeout_ms = kSniffMs;
    rrpc_limits_set(&l);
    rrpc_server_options o = {};
    o.num_threads = 1;
    ASSERT_EQ(0, rrpc_server_new(&o, &server_));
    ASSERT_EQ(0, rrpc_server_add_method(server_, "test.EchoService", "Echo", echo, nullptr));
    ASSERT_EQ(0, rrpc_server_start(server_, "127.0.0.1:0"));
    port_ = rrpc_server_port(server_);
  }
  void TearDown() override {
    rrpc_server_free(server_);
    rrpc_limits_set(nullptr);
  }
  rrpc_server *server_ = nullptr;
  int port_ = 0;
};

// The client's first request rides in the same segment as its ACK: the
// server must keep those bytes (brpc's own server drops the connection).
TEST_P(BrpcHello, RefusedThenServedOverTcpAckCoalescedWithRequest) {
  const int v = GetParam();
  uint64_t before = Fallbacks()[RRPC_FB_BRPC_NOT_SERVED];
  int fd = raw_connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, Hello(v)));
  ExpectRefusal(fd, v);
  ExpectEcho(fd, Ack(0));
  ExpectEcho(fd, ""); // and it stays a working TCP connection
  EXPECT_EQ(before + 1, Fallbacks()[RRPC_FB_BRPC_NOT_SERVED]);
  close(fd);
}

TEST_P(BrpcHello, HelloAndAckByteByByte) {
  const int v = GetParam();
  int fd = raw_connect(port_);
  ASSERT_GE(fd, 0);
  for (char c : Hello(v)) ASSERT_TRUE(SendAll(fd, std::string(1, c)));
  ExpectRefusal(fd, v);
  for (char c : Ack(0)) ASSERT_TRUE(SendAll(fd, std::string(1, c)));
  ExpectEcho(fd, "");
  close(fd);
}

TEST_P(BrpcHello, AckClaimingRdmaAfterRefusalCloses) {
  const int v = GetParam();
  rrpc_limit_stats a, b;
  rrpc_limit_stats_get(&a);
  int fd = raw_connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, Hello(v)));
  ExpectRefusal(fd, v);
  ASSERT_TRUE(SendAll(fd, Ack(RRPC_BRPC_ACK_RDMA)));
  EXPECT_TRUE(peer_closed(fd, 3000));
  rrpc_limit_stats_get(&b);
  EXPECT_EQ(a.brpc_hello_errors + 1, b.brpc_hello_errors);
  close(fd);
}

TEST_P(BrpcHello, StallMidHelloClosedAtTheSniffDeadline) {
  const int v = GetParam();
  rrpc_limit_stats a, b;
  rrpc_limit_stats_get(&a);
  int fd = raw_connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, Hello(v).substr(0, 10)));
  double t0 = now_ms();
  EXPECT_TRUE(peer_closed(fd, kSniffMs + 3000));
  EXPECT_GE(now_ms() - t0, kSniffMs * 0.8);
  rrpc_limit_stats_get(&b);
  EXPECT_EQ(a.clc_sniff_timeouts + 1, b.clc_sniff_timeouts);
  close(fd);
}

TEST_P(BrpcHello, StallBeforeAckClosedAtTheSniffDeadline) {
  const int v = GetParam();
  int fd = raw_connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, Hello(v) + Ack(0).substr(0, 2)));
  ExpectRefusal(fd, v);
  EXPECT_TRUE(peer_closed(fd, kSniffMs + 3000));
  close(fd);
}

INSTANTIATE_TEST_SUITE_P(Versions, BrpcHello, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int> &i) { return "v" + std::to_string(i.param); });

using BrpcHelloV2 = BrpcHello;

TEST_F(BrpcHelloV2, InvalidHelloIsRefusedAndCountedAsSuch) {
  uint64_t before = Fallbacks()[RRPC_FB_BRPC_INVALID_HELLO];
  int fd = raw_connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, Hello(2, /*hello_ver=*/3)));
  ExpectRefusal(fd, 2);
  ExpectEcho(fd, Ack(0));
  EXPECT_EQ(before + 1, Fallbacks()[RRPC_FB_BRPC_INVALID_HELLO]);
  close(fd);
}

TEST_F(BrpcHelloV2, BytesBeyond40AreDrained) {
  std::string h = Hello(2);
  h[4] = 0;
  h[5] = 64;
  h += std::string(24, '\xEE');
  int fd = raw_connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, h));
  ExpectRefusal(fd, 2);
  ExpectEcho(fd, Ack(0));
  close(fd);
}

TEST_F(BrpcHelloV2, MalformedHellosCloseAndAreCounted) {
  std::string short_len = Hello(2);
  short_len[5] = 38; // brpc <= 1.9's 38-byte v1 hello
  std::string long_len = Hello(2);
  long_len[4] = 0x10;
  long_len[5] = 0x01; // 4097
  std::string pb_zero = std::string("RDM3") + std::string(4, '\0');
  std::string pb_garbage = std::string("RDM3") + std::string("\0\0\0\3", 4) + "\xFF\xFF\xFF";
  for (const std::string *bad : {&short_len, &long_len, &pb_zero, &pb_garbage}) {
    rrpc_limit_stats a, b;
    rrpc_limit_stats_get(&a);
    int fd = raw_connect(port_);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, *bad));
    EXPECT_TRUE(peer_closed(fd, 3000));
    rrpc_limit_stats_get(&b);
    EXPECT_EQ(a.brpc_hello_errors + 1, b.brpc_hello_errors);
    close(fd);
  }
}

} // namespace
