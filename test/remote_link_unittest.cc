// remote_link_unittest.cc - remote memory (rrpc/remote.h) on real rrpc
// channels and servers over TCP: the byte-stream carriage a connection that
// fell back from RDMA uses. The cases are shared with the Soft-RoCE binary
// (test/common/remote_link_cases.h).
namespace remote_cases {
constexpr bool kUseRdma = false;
}
#include "test/common/remote_link_cases.h"

#include <gflags/gflags.h>

#include "rrpc/cxx/flags.h"

// ---- the process-wide limits (rrpc_remote_limits, flags remote_*) ----------

namespace {

// Restores the defaults however a test ends: the limits are process-wide.
struct LimitsGuard {
  ~LimitsGuard() { rrpc_remote_limits_set(nullptr); }
};

TEST(RemoteLimits, OutOfRangeValuesAreRefusedAndLeaveTheLimitsAsTheyWere) {
  LimitsGuard g;
  rrpc_remote_limits d;
  rrpc_remote_limits_get(&d);
  EXPECT_EQ(size_t{1} << 20, d.piece_size);
  EXPECT_EQ(8, d.max_inflight);
  EXPECT_EQ(4096u, d.max_regions);
  EXPECT_EQ(10000, d.bind_wait_ms);
  rrpc_remote_limits ok = {};
  ok.piece_size = 4096;
  ok.max_inflight = 8;
  ok.max_regions = 1u << 20;
  ok.bind_wait_ms = 600000;
  ASSERT_EQ(0, rrpc_remote_limits_set(&ok));
  rrpc_remote_limits bad[] = {{4095, 0, 0, 0}, {(1u << 20) + 1, 0, 0, 0}, {0, -1, 0, 0}, {0, 9, 0, 0}, {0, 0, (1u << 20) + 1, 0}, {0, 0, 0, -1}, {0, 0, 0, 600001}};
  for (const rrpc_remote_limits &b : bad) {
    EXPECT_EQ(-EINVAL, rrpc_remote_limits_set(&b));
    rrpc_remote_limits now;
    rrpc_remote_limits_get(&now);
    EXPECT_EQ(4096u, now.piece_size);
    EXPECT_EQ(8, now.max_inflight);
    EXPECT_EQ(1u << 20, now.max_regions);
    EXPECT_EQ(600000, now.bind_wait_ms);
  }
}

// A link takes the limits when it is made: with max_regions 2 the third
// announced region is refused with -ENOSPC and counted, and with 4 KiB
// pieces a 64 KiB write goes as 16 pieces.
TEST(RemoteLimits, ALinkMadeUnderSmallLimitsRefusesTheRegionOverItAndSplitsFiner) {
  LimitsGuard g;
  rrpc_remote_limits lim = {};
  lim.piece_size = 4096;
  lim.max_inflight = 2;
  lim.max_regions = 2;
  ASSERT_EQ(0, rrpc_remote_limits_set(&lim));
  rrpc_server *srv = nullptr;
  ASSERT_EQ(0, remote_cases::start_server(false, &srv));
  rrpc_channel *ch = remote_cases::open_channel("127.0.0.1:" + std::to_string(rrpc_server_port(srv)));
  ASSERT_NE(nullptr, ch);
  rrpc_remote_link *link = nullptr;
  ASSERT_EQ(0, rrpc_channel_remote_link(ch, &link));
  std::vector<uint8_t> mem(3 * 65536, 7);
  rrpc_remote_region *r[3] = {};
  ASSERT_EQ(0, rrpc_remote_region_register(link, mem.data(), 65536, RRPC_REMOTE_READ, &r[0]));
  ASSERT_EQ(0, rrpc_remote_region_register(link, mem.data() + 65536, 65536, RRPC_REMOTE_READ, &r[1]));
  EXPECT_EQ(-ENOSPC, rrpc_remote_region_register(link, mem.data() + 2 * 65536, 65536, RRPC_REMOTE_READ, &r[2]));
  rrpc_remote_link_stats st;
  rrpc_remote_link_get_stats(link, &st);
  EXPECT_EQ(1u, st.refused_full);
  EXPECT_EQ(2u, st.live_regions);
  // Freeing one makes room again.
  rrpc_remote_region_free(r[1]);
  ASSERT_EQ(0, rrpc_remote_region_register(link, mem.data() + 65536, 65536, RRPC_REMOTE_READ, &r[1]));
  // Pieces: write 64 KiB into a region the server owns.
  std::vector<uint8_t> remote(65536, 0);
  rrpc_remote_token tok;
  {
    std::lock_guard<std::mutex> gl(remote_cases::owner().mu);
    remote_cases::owner().buf = remote.data();
    remote_cases::owner().len = remote.size();
    remote_cases::owner().rights = RRPC_REMOTE_WRITE;
  }
  ASSERT_EQ(0, remote_cases::server_region(ch, remote.data(), remote.size(), RRPC_REMOTE_WRITE, &tok));
  ASSERT_EQ(0, remote_cases::xfer_sync(link, true, r[0], 0, &tok, 0, 0, 65536));
  EXPECT_EQ(0, memcmp(remote.data(), mem.data(), 65536));
  rrpc_remote_link_get_stats(link, &st);
  EXPECT_EQ(16u, st.pieces);
  rrpc_remote_region_free(r[0]);
  rrpc_remote_region_free(r[1]);
  rrpc_remote_link_release(link);
  remote_cases::owner_reset();
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
}

// The same limit set through its flag, as a C++ program's command line does.
TEST(RemoteLimits, TheRegionFlagBoundsTheNextLink) {
  LimitsGuard g;
  ASSERT_FALSE(gflags::SetCommandLineOption("remote_max_regions", "1").empty());
  EXPECT_EQ(1, FLAGS_remote_max_regions);
  rrpc_server *srv = nullptr;
  ASSERT_EQ(0, remote_cases::start_server(false, &srv));
  rrpc_channel *ch = remote_cases::open_channel("127.0.0.1:" + std::to_string(rrpc_server_port(srv)));
  ASSERT_NE(nullptr, ch);
  rrpc_remote_link *link = nullptr;
  ASSERT_EQ(0, rrpc_channel_remote_link(ch, &link));
  std::vector<uint8_t> mem(8192, 1);
  rrpc_remote_region *a = nullptr, *b = nullptr;
  ASSERT_EQ(0, rrpc_remote_region_register(link, mem.data(), 4096, RRPC_REMOTE_WRITE, &a));
  EXPECT_EQ(-ENOSPC, rrpc_remote_region_register(link, mem.data() + 4096, 4096, RRPC_REMOTE_WRITE, &b));
  rrpc_remote_link_stats st;
  rrpc_remote_link_get_stats(link, &st);
  EXPECT_EQ(1u, st.refused_full);
  EXPECT_EQ(1u, st.live_regions);
  ASSERT_FALSE(gflags::SetCommandLineOption("remote_max_regions", "4096").empty());
  rrpc_remote_region_free(a);
  rrpc_remote_link_release(link);
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
}

}  // namespace
