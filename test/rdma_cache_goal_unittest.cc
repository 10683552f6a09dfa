// rdma_cache_goal_unittest.cc - the elastic piece cache's per-class goals
// (transport/rdma/wire/cache_goal.h): what a new process registers before
// its traffic says what it needs, and how a class grows when it runs out.
#include <gtest/gtest.h>

#include <cstdint>

extern "C" {
#include "transport/rdma/wire/cache_goal.h"
#include "transport/rdma/wire/grant.h"
}

namespace {

constexpr uint64_t K = 1024;

uint64_t Len(int c) { return rrpc__grant_piece_len(static_cast<uint8_t>(c)); }

TEST(CacheGoal, IdleClassKeepsItsFixedStock) {
  rrpc__cache_goals g = {};
  EXPECT_EQ(64u, rrpc__cache_goal(&g, 0, 0));
  for (int i = 0; i < 5; i++) rrpc__cache_goal_missed(&g, 0, 1);
  EXPECT_EQ(64u, rrpc__cache_goal(&g, 0, 1));  // a burst of new connections is what it is sized for
}

TEST(CacheGoal, ClassesStartAt64KiBWorthAtLeastTwoPieces) {
  rrpc__cache_goals g = {};
  const uint32_t want[] = {64, 8, 4, 2, 2, 2, 2};  // 4 KiB .. 256 KiB
  for (int c = 0; c <= 6; c++) EXPECT_EQ(want[c], rrpc__cache_goal(&g, c, 0)) << "class " << c;
}

TEST(CacheGoal, ANewProcessRegistersAbout1_3MiBIn84Pieces) {
  rrpc__cache_goals g = {};
  uint64_t bytes = 0, pieces = 0, old_bytes = 0, old_pieces = 0;
  for (int c = 0; c <= RRPC_PIECE_CODE_MAX; c++) {
    uint32_t n = rrpc__cache_goal(&g, c, 0);
    pieces += n;
    bytes += n * Len(c);
    uint32_t m = rrpc__cache_goal_max(c, 0);  // one goal for every class, without the per-class cap
    old_pieces += m;
    old_bytes += m * Len(c);
  }
  EXPECT_EQ(84u, pieces);
  EXPECT_EQ(1344 * K, bytes);
  EXPECT_EQ(316u, old_pieces);
  EXPECT_EQ(6400 * K, old_bytes);
}

TEST(CacheGoal, AMissDoublesTheGoalUpToAboutOneMiB) {
  rrpc__cache_goals g = {};
  const int c = 1;  // 8 KiB: 8, 16, 32, 64, 128, then stays
  uint32_t seen[7];
  for (int i = 0; i < 7; i++) {
    seen[i] = rrpc__cache_goal(&g, c, 1);
    rrpc__cache_goal_missed(&g, c, 1);
  }
  const uint32_t want[] = {8, 16, 32, 64, 128, 128, 128};
  for (int i = 0; i < 7; i++) EXPECT_EQ(want[i], seen[i]) << "after " << i << " misses";
  EXPECT_EQ(1024 * K, seen[6] * Len(c));
  rrpc__cache_goals h = {};
  for (int i = 0; i < 10; i++) rrpc__cache_goal_missed(&h, 6, 1);  // 256 KiB: 2, 4, then 4
  EXPECT_EQ(4u, rrpc__cache_goal(&h, 6, 1));
  EXPECT_EQ(2u, rrpc__cache_goal(&g, 6, 1)) << "classes grow on their own";
}

TEST(CacheGoal, LargeClassesOnlyOnceAskedForAndOnePiece) {
  rrpc__cache_goals g = {};
  for (int c = 7; c <= RRPC_PIECE_CODE_MAX; c++) {
    EXPECT_EQ(0u, rrpc__cache_goal(&g, c, 0)) << "class " << c;
    rrpc__cache_goal_missed(&g, c, 1);
    EXPECT_EQ(1u, rrpc__cache_goal(&g, c, 1)) << "class " << c;
  }
}

TEST(CacheGoal, OutOfRangeClassesAimAtNothing) {
  rrpc__cache_goals g = {};
  EXPECT_EQ(0u, rrpc__cache_goal(&g, -1, 1));
  EXPECT_EQ(0u, rrpc__cache_goal(&g, RRPC_PIECE_CODE_MAX + 1, 1));
  rrpc__cache_goal_missed(&g, -1, 1);  // no write outside the table (ASan would say)
  rrpc__cache_goal_missed(&g, RRPC_PIECE_CODE_MAX + 1, 1);
}

}  // namespace
