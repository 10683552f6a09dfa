// rdma_gid_unittest.cc - host tests (no device) of the RDMA GID choice
// (transport/rdma/gid.c) over GID tables shaped like rxe, mlx5 and IB ports.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>
#include <string>
#include <vector>

#include "rrpc/errors.h"
#include "transport/rdma/gid.h"

// gid.c is compiled into librrpc only in builds with RDMA; it is pure (no
// verbs calls), so this test compiles it in directly and runs in every build.
#include "transport/rdma/gid.c"

namespace {

using Table = std::vector<rrpc__rdma_gid_entry>;

rrpc__rdma_gid_entry Entry(uint32_t index, rrpc__rdma_gid_type type, const char *addr) {
  rrpc__rdma_gid_entry e;
  memset(&e, 0, sizeof e);
  e.index = index;
  e.type = type;
  if (addr) {
    struct in6_addr a;
    EXPECT_EQ(1, inet_pton(AF_INET6, addr, &a)) << addr;
    memcpy(e.raw, a.s6_addr, 16);
  }
  return e;
}

sockaddr_storage V4(const char *ip) {
  sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  auto *sin = reinterpret_cast<sockaddr_in *>(&ss);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(8000);
  EXPECT_EQ(1, inet_pton(AF_INET, ip, &sin->sin_addr));
  return ss;
}

sockaddr_storage V6(const char *ip) {
  sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  auto *sin6 = reinterpret_cast<sockaddr_in6 *>(&ss);
  sin6->sin6_family = AF_INET6;
  EXPECT_EQ(1, inet_pton(AF_INET6, ip, &sin6->sin6_addr));
  return ss;
}

// The chosen GID table index, or the error code (negative).
long Choose(const Table &t, int is_ib, int forced_plus1, const sockaddr_storage *local) {
  size_t pos = 12345;
  int rc = rrpc__rdma_gid_choose(t.data(), t.size(), is_ib, forced_plus1, local, &pos);
  if (rc < 0) return rc;
  EXPECT_LT(pos, t.size());
  return t[pos].index;
}

// What rxe on dummy0 with 10.99.0.1/24 shows (ibv_devinfo -v): index 0 and 1
// are the link-local GID as v1 and v2, then the IPv4-mapped address as v1, v2.
Table RxeTable() {
  return {
      Entry(0, RRPC_RDMA_GID_ROCE_V1, "fe80::5054:ff:fe99:1"),
      Entry(1, RRPC_RDMA_GID_ROCE_V2, "fe80::5054:ff:fe99:1"),
      Entry(2, RRPC_RDMA_GID_ROCE_V1, "::ffff:10.99.0.1"),
      Entry(3, RRPC_RDMA_GID_ROCE_V2, "::ffff:10.99.0.1"),
  };
}

TEST(RdmaGid, PicksTheV2GidOfTheLocalIPv4Address) {
  Table t = RxeTable();
  sockaddr_storage local = V4("10.99.0.1");
  EXPECT_EQ(3, Choose(t, 0, 0, &local));
}

TEST(RdmaGid, TableOrderDoesNotMatter) {
  Table t = RxeTable();
  std::swap(t[0], t[3]);
  std::swap(t[1], t[2]);
  sockaddr_storage local = V4("10.99.0.1");
  EXPECT_EQ(3, Choose(t, 0, 0, &local));
  EXPECT_EQ(1, Choose(t, 0, 0, nullptr));
}

TEST(RdmaGid, V4MappedIPv6LocalAddressMatchesToo) {
  Table t = RxeTable();
  sockaddr_storage local = V6("::ffff:10.99.0.1");
  EXPECT_EQ(3, Choose(t, 0, 0, &local));
}

TEST(RdmaGid, IPv6LocalAddressMatchesItsV2Gid) {
  Table t = RxeTable();
  t.push_back(Entry(4, RRPC_RDMA_GID_ROCE_V1, "2001:db8::7"));
  t.push_back(Entry(5, RRPC_RDMA_GID_ROCE_V2, "2001:db8::7"));
  sockaddr_storage local = V6("2001:db8::7");
  EXPECT_EQ(5, Choose(t, 0, 0, &local));
}

TEST(RdmaGid, NoAddressMatchFallsBackToTheLowestV2) {
  Table t = RxeTable();
  sockaddr_storage other = V4("192.168.5.5");
  EXPECT_EQ(1, Choose(t, 0, 0, &other));
  EXPECT_EQ(1, Choose(t, 0, 0, nullptr));
  sockaddr_storage unspec;
  memset(&unspec, 0, sizeof unspec);  // AF_UNSPEC: no address to match
  EXPECT_EQ(1, Choose(t, 0, 0, &unspec));
}

TEST(RdmaGid, MatchingAddressWithOnlyV1DoesNotBeatAnyV2) {
  // The v1 entry of the address is not taken over a v2 entry of another
  // address: the RoCE version decides first, as issue 5 part 1 orders it.
  Table t = {
      Entry(0, RRPC_RDMA_GID_ROCE_V1, "::ffff:10.0.0.1"),
      Entry(7, RRPC_RDMA_GID_ROCE_V2, "::ffff:10.0.0.2"),
  };
  sockaddr_storage local = V4("10.0.0.1");
  EXPECT_EQ(7, Choose(t, 0, 0, &local));
}

TEST(RdmaGid, OnlyV1LeftPicksTheLowestV1) {
  Table t = {
      Entry(4, RRPC_RDMA_GID_ROCE_V1, "::ffff:10.0.0.1"),
      Entry(2, RRPC_RDMA_GID_ROCE_V1, "fe80::1"),
  };
  sockaddr_storage local = V4("10.0.0.1");
  EXPECT_EQ(2, Choose(t, 0, 0, &local));
}

TEST(RdmaGid, UnknownTypeCountsAsV1) {
  Table t = {Entry(3, static_cast<rrpc__rdma_gid_type>(9), "::ffff:10.0.0.1")};
  sockaddr_storage local = V4("10.0.0.1");
  EXPECT_EQ(3, Choose(t, 0, 0, &local));
}

TEST(RdmaGid, ZeroGidsAreNeverChosen) {
  Table t = {
      Entry(0, RRPC_RDMA_GID_ROCE_V2, nullptr),  // all zero: an empty slot
      Entry(1, RRPC_RDMA_GID_ROCE_V1, "fe80::1"),
  };
  sockaddr_storage zero_v6 = V6("::");
  EXPECT_EQ(1, Choose(t, 0, 0, &zero_v6));
  EXPECT_EQ(-RRPC_ENODEV, Choose(t, 0, 1 /* forces index 0 */, nullptr));
  Table empty_slots = {Entry(0, RRPC_RDMA_GID_ROCE_V2, nullptr)};
  EXPECT_EQ(-RRPC_ENODEV, Choose(empty_slots, 0, 0, nullptr));
}

TEST(RdmaGid, EmptyTableIsENODEV) {
  Table t;
  sockaddr_storage local = V4("10.0.0.1");
  EXPECT_EQ(-RRPC_ENODEV, Choose(t, 0, 0, &local));
  EXPECT_EQ(-RRPC_ENODEV, Choose(t, 1, 0, &local));
  EXPECT_EQ(-RRPC_ENODEV, Choose(t, 0, 1, &local));
}

TEST(RdmaGid, ForcedIndexOverridesTheChoice) {
  Table t = RxeTable();
  sockaddr_storage local = V4("10.99.0.1");
  EXPECT_EQ(0, Choose(t, 0, 1, &local));  // gid_index_plus1 1 = index 0
  EXPECT_EQ(2, Choose(t, 0, 3, &local));
  EXPECT_EQ(-RRPC_ENODEV, Choose(t, 0, 9, &local));  // no index 8
  EXPECT_EQ(1, Choose(t, 1, 2, nullptr));  // also on IB
}

TEST(RdmaGid, InfiniBandUsesIndexZero) {
  Table t = {
      Entry(1, RRPC_RDMA_GID_IB, "fe80::2:c903:a:bcde"),
      Entry(0, RRPC_RDMA_GID_IB, "fe80::2:c903:a:bcdd"),
  };
  sockaddr_storage local = V4("10.0.0.1");
  EXPECT_EQ(0, Choose(t, 1, 0, &local));
  Table no_zero = {Entry(5, RRPC_RDMA_GID_IB, "fe80::5"), Entry(3, RRPC_RDMA_GID_IB, "fe80::3")};
  EXPECT_EQ(3, Choose(no_zero, 1, 0, &local));
}

TEST(RdmaGid, ContainerEntriesWithHigherIndexAreNotPreferred) {
  // brpc picks the highest index with a non-zero interface id and can take
  // another container's macvlan address (apache/brpc#3119). With our local
  // address present we pick it; without, the lowest v2, never the newest.
  Table t = RxeTable();
  t.push_back(Entry(9, RRPC_RDMA_GID_ROCE_V1, "::ffff:172.17.0.5"));
  t.push_back(Entry(10, RRPC_RDMA_GID_ROCE_V2, "::ffff:172.17.0.5"));
  sockaddr_storage local = V4("10.99.0.1");
  EXPECT_EQ(3, Choose(t, 0, 0, &local));
  sockaddr_storage theirs = V4("172.17.0.5");
  EXPECT_EQ(10, Choose(t, 0, 0, &theirs));
}

}  // namespace
