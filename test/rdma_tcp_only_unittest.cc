// rdma_tcp_only_unittest.cc - the client's memory of TCP-only servers
// (transport/rdma/tcp_only.c): remembered per address and port, forgotten
// after the TTL, a TTL <= 0 remembers nothing, and a full table replaces
// the entry that expires first. The source is compiled in here, so the
// test runs in builds without RDMA too.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

extern "C" {
#include "transport/rdma/tcp_only.h"
#include "transport/rdma/tcp_only.c"
}

namespace {

sockaddr_storage V4(const char *ip, int port) {
  sockaddr_storage ss;
  memset(&ss, 0xAB, sizeof ss); // padding differs between two sockaddrs of one server
  auto *a = reinterpret_cast<sockaddr_in *>(&ss);
  a->sin_family = AF_INET;
  a->sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip, &a->sin_addr);
  return ss;
}

sockaddr_storage V6(const char *ip, int port) {
  sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET6, ip, &a->sin6_addr);
  return ss;
}

const uint64_t kSec = 1000000;

TEST(TcpOnly, RememberedPerAddressAndPortUntilTheTtl) {
  rrpc__tcp_only_clear();
  sockaddr_storage a = V4("10.0.0.1", 8000);
  rrpc__tcp_only_note(&a, 300, 1000 * kSec);
  sockaddr_storage same = V4("10.0.0.1", 8000);
  memset(reinterpret_cast<sockaddr_in *>(&same)->sin_zero, 0, 8);
  EXPECT_EQ(1, rrpc__tcp_only_check(&same, 1000 * kSec));
  EXPECT_EQ(1, rrpc__tcp_only_check(&a, 1299 * kSec));
  sockaddr_storage other_port = V4("10.0.0.1", 8001), other_ip = V4("10.0.0.2", 8000);
  EXPECT_EQ(0, rrpc__tcp_only_check(&other_port, 1000 * kSec));
  EXPECT_EQ(0, rrpc__tcp_only_check(&other_ip, 1000 * kSec));
  EXPECT_EQ(0, rrpc__tcp_only_check(&a, 1300 * kSec)); // expired: forgotten
  EXPECT_EQ(0, rrpc__tcp_only_check(&a, 1000 * kSec)); // and really gone
}

TEST(TcpOnly, Ipv6AndNoteAgainExtends) {
  rrpc__tcp_only_clear();
  sockaddr_storage a = V6("fd00::1", 9000);
  rrpc__tcp_only_note(&a, 10, 0);
  rrpc__tcp_only_note(&a, 10, 5 * kSec);
  EXPECT_EQ(1, rrpc__tcp_only_check(&a, 12 * kSec));
  EXPECT_EQ(0, rrpc__tcp_only_check(&a, 15 * kSec));
  sockaddr_storage v4 = V4("0.0.0.0", 9000);
  rrpc__tcp_only_note(&a, 10, 0);
  EXPECT_EQ(0, rrpc__tcp_only_check(&v4, 0));
}

TEST(TcpOnly, NonPositiveTtlRemembersNothing) {
  rrpc__tcp_only_clear();
  sockaddr_storage a = V4("10.0.0.1", 1);
  rrpc__tcp_only_note(&a, 0, 0);
  rrpc__tcp_only_note(&a, -1, 0);
  EXPECT_EQ(0, rrpc__tcp_only_check(&a, 0));
}

TEST(TcpOnly, AFullTableReplacesTheEntryThatExpiresFirst) {
  rrpc__tcp_only_clear();
  for (int i = 0; i < TCP_ONLY_SLOTS; i++) {
    sockaddr_storage a = V4("10.1.0.1", 1000 + i);
    rrpc__tcp_only_note(&a, 100 + i, 0); // port 1000 expires first
  }
  sockaddr_storage extra = V4("10.2.0.1", 1);
  rrpc__tcp_only_note(&extra, 500, 0);
  EXPECT_EQ(1, rrpc__tcp_only_check(&extra, 0));
  sockaddr_storage first = V4("10.1.0.1", 1000), second = V4("10.1.0.1", 1001);
  EXPECT_EQ(0, rrpc__tcp_only_check(&first, 0));
  EXPECT_EQ(1, rrpc__tcp_only_check(&second, 0));
}

} // namespace
