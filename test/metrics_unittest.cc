// metrics_unittest.cc - the call-figure recorder (src/rrpc/core/metrics.c): its
// per-second slots are made on the first call that ends in them, by
// whichever thread gets there first, and read by any thread meanwhile.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

extern "C" {
#include "rrpc/internal/loop.h"
#include "rrpc/internal/metrics.h"
}

namespace {

// Many threads end calls into one recorder (their shards and the slots in
// them are made as they go) while another thread keeps reading it: every
// call is counted once, in the totals and in the window.
TEST(CallStats, SlotsMadeOnFirstUseCountEveryCallWhileRead) {
  rrpc__call_stats *s = nullptr;
  ASSERT_EQ(0, rrpc__call_stats_new(&s));
  constexpr int kThreads = 8, kCalls = 5000;
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    rrpc_call_stats st;
    while (!stop.load()) rrpc__call_stats_read(s, &st);  // bounded: ends with the writers
  });
  std::vector<std::thread> ws;
  for (int t = 0; t < kThreads; t++)
    ws.emplace_back([&, t] {
      for (int i = 0; i < kCalls; i++) {
        rrpc__call_stats_begin(s);
        rrpc__call_stats_end(s, 100 + t, i % 100 == 0 ? -5 : 0);
      }
    });
  for (auto &w : ws) w.join();
  stop = true;
  reader.join();
  rrpc_call_stats st;
  rrpc__call_stats_read(s, &st);
  EXPECT_EQ(uint64_t{kThreads} * kCalls, st.calls);
  EXPECT_EQ(uint64_t{kThreads} * kCalls / 100, st.errors);
  EXPECT_EQ(0, st.in_flight);
  // All within the last seconds: the window holds them all, unless the
  // run crossed more seconds than the window (then at least some).
  EXPECT_GT(st.window_calls, 0u);
  EXPECT_LE(st.window_calls, uint64_t{kThreads} * kCalls);
  EXPECT_GE(st.latency_max_us, 100u);
  EXPECT_LE(st.latency_p50_us, st.latency_p99_us);
  rrpc__call_stats_free(s);
}

// One latency: every percentile reports its bucket's middle, which for
// 1030 us (bucket 1024..1151) is 1088 - but none may pass the largest
// latency seen, which is exact.
// An end on a thread whose round clock is set (a loop thread, or a worker
// that lent its read) lands in the second of that clock, not of a fresh
// read: one long enough ago is in the totals but out of the window.
TEST(CallStats, AnEndOnARoundClockCountsInThatClocksSecond) {
  const uint64_t now = rrpc__now_us();
  const uint64_t back = 2u * RRPC_METRICS_WINDOW_S * 1000000u;
  if (now < 2 * back) GTEST_SKIP() << "the monotonic clock is too young";
  rrpc__call_stats *s = nullptr;
  ASSERT_EQ(0, rrpc__call_stats_new(&s));
  uint64_t had = rrpc__round_lend(now - back);
  ASSERT_EQ(0u, had);  // the test thread is no loop
  rrpc__call_stats_begin(s);
  rrpc__call_stats_end(s, 50, 0);
  rrpc__round_unlend(had);
  rrpc__call_stats_begin(s);
  rrpc__call_stats_end(s, 70, 0);
  rrpc_call_stats st;
  rrpc__call_stats_read(s, &st);
  EXPECT_EQ(2u, st.calls);
  EXPECT_EQ(1u, st.window_calls);
  EXPECT_EQ(70u, st.latency_max_us);
  rrpc__call_stats_free(s);
}

// Ends on a round clock take a short path while they stay in the second
// of the thread's last slot; a new second, a clock behind it, or a failed
// call take the full one. Every figure stays exact across the switches.
TEST(CallStats, EndsOnARoundClockAcrossSecondsCountExactly) {
  const uint64_t now = rrpc__now_us();
  const uint64_t back = 2u * RRPC_METRICS_WINDOW_S * 1000000u;
  if (now < 2 * back) GTEST_SKIP() << "the monotonic clock is too young";
  const uint64_t base = (now / 1000000u - 3u) * 1000000u;  // a second start, in the window
  const uint64_t old = base - back;                        // one out of it
  rrpc__call_stats *s = nullptr;
  ASSERT_EQ(0, rrpc__call_stats_new(&s));
  struct End {
    uint64_t at_us;
    int64_t lat;
    int code;
  } ends[] = {{old + 100, 5, 0},            {old + 999999, 7, 0},      {base + 999999, 9, 0},
              {base + 1000000, 11, 0},      {base + 1000000, 13, 0},   {base + 2000005, 15, 0},
              {base + 1000001, 17, 0},      {base + 1000001, 19, 5}};
  for (const End &e : ends) {
    uint64_t had = rrpc__round_lend(e.at_us);
    rrpc__call_stats_begin(s);
    rrpc__call_stats_end(s, e.lat, e.code);
    rrpc__round_unlend(had);
  }
  rrpc_call_stats st;
  rrpc__call_stats_read(s, &st);
  EXPECT_EQ(8u, st.calls);
  EXPECT_EQ(6u, st.window_calls);  // not the two of the old second
  EXPECT_EQ(1u, st.errors);
  EXPECT_EQ(0, st.in_flight);
  EXPECT_EQ(19u, st.latency_max_us);
  EXPECT_EQ(14u, st.latency_avg_us);  // (9 + 11 + ... + 19) / 6
  rrpc__latency_hist h;
  rrpc__call_stats_histogram(s, &h);
  uint64_t n = 0;
  for (uint64_t c : h.count) n += c;
  EXPECT_EQ(8u, n);
  EXPECT_EQ(96u, h.sum_us);
  EXPECT_EQ(1u, rrpc__call_stats_error_count(s, 5));
  rrpc__call_stats_free(s);
}

TEST(CallStats, PercentilesNeverPassTheMax) {
  rrpc__call_stats *s = nullptr;
  ASSERT_EQ(0, rrpc__call_stats_new(&s));
  rrpc__call_stats_begin(s);
  rrpc__call_stats_end(s, 1030, 0);
  rrpc_call_stats st;
  rrpc__call_stats_read(s, &st);
  EXPECT_EQ(1030u, st.latency_max_us);
  EXPECT_LE(st.latency_p999_us, st.latency_max_us);
  EXPECT_LE(st.latency_p50_us, st.latency_max_us);
  EXPECT_GE(st.latency_p50_us, 1024u);  // still within its bucket
  rrpc__call_stats_free(s);
}

// The histogram counts every call since the start into the bucket whose
// bound is the first >= its latency (bounds inclusive, as Prometheus' le),
// from any number of threads; sum is exact.
TEST(CallStats, HistogramBucketsEveryCallSinceStart) {
  rrpc__call_stats *s = nullptr;
  ASSERT_EQ(0, rrpc__call_stats_new(&s));
  const int64_t lat[] = {0, 10, 11, 100, 101, 999999, 1000000, 20000000};
  std::vector<std::thread> ws;
  for (int t = 0; t < 4; t++)
    ws.emplace_back([&] {
      for (int64_t l : lat) {
        rrpc__call_stats_begin(s);
        rrpc__call_stats_end(s, l, 0);
      }
    });
  for (auto &w : ws) w.join();
  rrpc__latency_hist h;
  rrpc__call_stats_histogram(s, &h);
  auto at = [](uint64_t bound) {
    for (int i = 0; i < RRPC__LATENCY_BOUNDS; i++)
      if (rrpc__latency_bounds_us[i] == bound) return i;
    return -1;
  };
  EXPECT_EQ(8u, h.count[at(10)]);       // 0 and 10
  EXPECT_EQ(4u, h.count[at(25)]);       // 11
  EXPECT_EQ(4u, h.count[at(100)]);      // 100
  EXPECT_EQ(4u, h.count[at(250)]);      // 101
  EXPECT_EQ(8u, h.count[at(1000000)]);  // 999999 and 1000000
  EXPECT_EQ(4u, h.count[RRPC__LATENCY_BOUNDS]);  // past 10 s
  uint64_t n = 0, sum = 0;
  for (uint64_t c : h.count) n += c;
  for (int64_t l : lat) sum += 4 * static_cast<uint64_t>(l);
  EXPECT_EQ(32u, n);
  EXPECT_EQ(sum, h.sum_us);
  rrpc__call_stats_free(s);
}

// A call begun on one thread and ended on another (a caller and its
// loop): counted once, nothing left in flight.
TEST(CallStats, BeginAndEndOnDifferentThreads) {
  rrpc__call_stats *s = nullptr;
  ASSERT_EQ(0, rrpc__call_stats_new(&s));
  for (int i = 0; i < 3; i++) {
    std::thread([&] { rrpc__call_stats_begin(s); }).join();
    std::thread([&] { rrpc__call_stats_end(s, 250, 0); }).join();
  }
  rrpc_call_stats st;
  rrpc__call_stats_read(s, &st);
  EXPECT_EQ(3u, st.calls);
  EXPECT_EQ(3u, st.window_calls);
  EXPECT_EQ(0, st.in_flight);
  EXPECT_GT(st.latency_avg_us, 0u);
  rrpc__call_stats_free(s);
}

// The first 16 threads that record get a shard of their own (raised
// without locked instructions); later ones share a few (atomics). With
// more threads than that recording at once, every call still counts once
// and the window's count, latency sum and maximum are exact.
TEST(CallStats, ThreadsPastTheOwnedShardsCountExactly) {
  rrpc__call_stats *s = nullptr;
  ASSERT_EQ(0, rrpc__call_stats_new(&s));
  constexpr int kThreads = 40, kCalls = 2000;
  std::atomic<int> ready{0};
  std::vector<std::thread> ws;
  for (int t = 0; t < kThreads; t++)
    ws.emplace_back([&, t] {
      ready++;
      while (ready.load() < kThreads) std::this_thread::yield();  // all at once: shared shards contend
      for (int i = 0; i < kCalls; i++) {
        rrpc__call_stats_begin(s);
        rrpc__call_stats_end(s, t == 7 && i == 5 ? 9000 : 10, i == 0 ? -5 : 0);
      }
    });
  for (auto &w : ws) w.join();
  rrpc_call_stats st;
  rrpc__call_stats_read(s, &st);
  EXPECT_EQ(uint64_t{kThreads} * kCalls, st.calls);
  EXPECT_EQ(uint64_t{kThreads}, st.errors);
  EXPECT_EQ(0, st.in_flight);
  if (st.window_calls == uint64_t{kThreads} * kCalls) {  // the run fit in the window (it nearly always does)
    EXPECT_EQ(9000u, st.latency_max_us);
    EXPECT_EQ((uint64_t{kThreads} * kCalls * 10 - 10 + 9000) / (uint64_t{kThreads} * kCalls), st.latency_avg_us);
  }
  rrpc__call_stats_free(s);
}

// Calls in flight are the calls begun less the calls ended (a recorder
// keeps no separate in-flight counter): calls still open show, in the part
// a call is recorded into and in the whole that sums it on read (a server's
// totals and its method), and failures count in both.
TEST(CallStats, InFlightIsBegunLessEndedInWholeAndPart) {
  rrpc__call_stats *whole = nullptr, *part = nullptr;
  ASSERT_EQ(0, rrpc__call_stats_new(&whole));
  ASSERT_EQ(0, rrpc__call_stats_new(&part));
  ASSERT_EQ(0, rrpc__call_stats_add_part(whole, part));
  for (int i = 0; i < 5; i++) rrpc__call_stats_begin(part);
  rrpc_call_stats st;
  rrpc__call_stats_read(whole, &st);
  EXPECT_EQ(5, st.in_flight);
  EXPECT_EQ(0u, st.calls);
  std::thread([&] {  // ended on another thread: its own shard
    rrpc__call_stats_end(part, 40, 0);
    rrpc__call_stats_end(part, 60, -7);
  }).join();
  for (rrpc__call_stats *s : {whole, part}) {
    rrpc__call_stats_read(s, &st);
    EXPECT_EQ(3, st.in_flight);
    EXPECT_EQ(2u, st.calls);
    EXPECT_EQ(2u, st.window_calls);
    EXPECT_EQ(1u, st.errors);
    EXPECT_EQ(1u, rrpc__call_stats_error_count(s, -7));
    EXPECT_EQ(50u, st.latency_avg_us);
    EXPECT_EQ(60u, st.latency_max_us);
  }
  for (int i = 0; i < 3; i++) rrpc__call_stats_end(part, 50, 0);
  rrpc__call_stats_read(whole, &st);
  EXPECT_EQ(0, st.in_flight);
  EXPECT_EQ(5u, st.calls);
  rrpc__call_stats_free(whole);
  rrpc__call_stats_free(part);
}

struct CodeSeen {
  int code;
  uint64_t n;
};

void collect_code(void *ctx, int code, uint64_t n) {
  static_cast<std::vector<CodeSeen> *>(ctx)->push_back({code, n});
}

// A whole recorder with two parts (a server and two of its methods).
class WholeOfTwo : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, rrpc__call_stats_new(&whole));
    ASSERT_EQ(0, rrpc__call_stats_new(&p1));
    ASSERT_EQ(0, rrpc__call_stats_new(&p2));
    ASSERT_EQ(0, rrpc__call_stats_add_part(whole, p1));
    ASSERT_EQ(0, rrpc__call_stats_add_part(whole, p2));
  }
  void TearDown() override {
    rrpc__call_stats_free(whole);
    rrpc__call_stats_free(p1);
    rrpc__call_stats_free(p2);
  }
  rrpc__call_stats *whole = nullptr, *p1 = nullptr, *p2 = nullptr;
};

// A whole's figures are its own calls' and every part's, merged as one
// recorder would hold them: window, totals, in flight, the since-start
// histogram, and each error code once with its sum (order: as first seen,
// the whole's own first).
TEST_F(WholeOfTwo, WholeSumsItsOwnCallsAndEveryPart) {
  rrpc__call_stats_begin(whole);  // a call that found no method
  rrpc__call_stats_end(whole, 5, -3);
  for (int i = 0; i < 4; i++) {
    rrpc__call_stats_begin(p1);
    rrpc__call_stats_end(p1, 20, i == 0 ? -7 : 0);
  }
  rrpc__call_stats_begin(p2);
  rrpc__call_stats_end(p2, 3000, -7);
  rrpc__call_stats_begin(p2);
  rrpc__call_stats_end(p2, 100, -3);
  rrpc__call_stats_begin(p2);  // still running
  rrpc_call_stats st;
  rrpc__call_stats_read(whole, &st);
  EXPECT_EQ(7u, st.calls);
  EXPECT_EQ(7u, st.window_calls);
  EXPECT_EQ(4u, st.errors);
  EXPECT_EQ(1, st.in_flight);
  EXPECT_EQ((5u + 4 * 20 + 3000 + 100) / 7, st.latency_avg_us);
  EXPECT_EQ(3000u, st.latency_max_us);
  EXPECT_EQ(2u, rrpc__call_stats_error_count(whole, -7));
  EXPECT_EQ(2u, rrpc__call_stats_error_count(whole, -3));
  EXPECT_EQ(0u, rrpc__call_stats_error_count(whole, -9));
  std::vector<CodeSeen> codes;
  rrpc__call_stats_errors(whole, collect_code, &codes);
  ASSERT_EQ(2u, codes.size());
  EXPECT_EQ(-3, codes[0].code);
  EXPECT_EQ(2u, codes[0].n);
  EXPECT_EQ(-7, codes[1].code);
  EXPECT_EQ(2u, codes[1].n);
  rrpc__latency_hist h;
  rrpc__call_stats_histogram(whole, &h);
  uint64_t total = 0;
  for (int b = 0; b <= RRPC__LATENCY_BOUNDS; b++) total += h.count[b];
  EXPECT_EQ(7u, total);
  EXPECT_EQ(5u + 4 * 20 + 3000 + 100, h.sum_us);
  EXPECT_EQ(1u, h.count[0]);  // 5 us: <= 10
  EXPECT_EQ(4u, h.count[1]);  // 20 us: <= 25
  EXPECT_EQ(1u, h.count[3]);  // 100 us: <= 100
  EXPECT_EQ(1u, h.count[8]);  // 3000 us: <= 5000
  // A part alone reads only its own calls.
  rrpc__call_stats_read(p1, &st);
  EXPECT_EQ(4u, st.calls);
  EXPECT_EQ(1u, st.errors);
}

// Codes past 16 distinct ones over a whole and its parts are counted once
// as "other" (code 0), as one recorder counts them; none is lost.
TEST_F(WholeOfTwo, WholeMergesErrorCodesPastTheTableAsOther) {
  for (int c = 1; c <= 12; c++) rrpc__call_stats_end(p1, 10, -c);       // -1 .. -12
  for (int c = 9; c <= 20; c++) rrpc__call_stats_end(p2, 10, -c);       // -9 .. -20
  std::vector<CodeSeen> codes;
  rrpc__call_stats_errors(whole, collect_code, &codes);
  ASSERT_EQ(17u, codes.size());  // 16 codes and "other"
  uint64_t sum = 0;
  for (int i = 0; i < 16; i++) {
    EXPECT_EQ(-(i + 1), codes[i].code);
    EXPECT_EQ(i >= 8 && i < 12 ? 2u : 1u, codes[i].n);
    sum += codes[i].n;
  }
  EXPECT_EQ(0, codes[16].code);
  EXPECT_EQ(4u, codes[16].n);  // -17 .. -20
  EXPECT_EQ(24u, sum + codes[16].n);
  rrpc_call_stats st;
  rrpc__call_stats_read(whole, &st);
  EXPECT_EQ(24u, st.errors);
}

// Every bound is inclusive and the value just past it lands in the next
// bucket, for all 19 bounds (the recorder finds a latency's bucket from
// its window bucket, whose width around the larger bounds spans both).
TEST(CallStats, HistogramBoundsExactAtEveryBound) {
  rrpc__call_stats *s = nullptr;
  ASSERT_EQ(0, rrpc__call_stats_new(&s));
  for (int i = 0; i < RRPC__LATENCY_BOUNDS; i++) {
    const int64_t b = static_cast<int64_t>(rrpc__latency_bounds_us[i]);
    for (int64_t l : {b - 1, b, b + 1}) {
      rrpc__call_stats_begin(s);
      rrpc__call_stats_end(s, l, 0);
    }
  }
  rrpc__latency_hist h;
  rrpc__call_stats_histogram(s, &h);
  // Bucket 0 holds 9 and 10; bucket i (0 < i < 19) holds bound[i-1] + 1,
  // bound[i] - 1 and bound[i]; the last holds 10 s + 1 us.
  EXPECT_EQ(2u, h.count[0]);
  for (int i = 1; i < RRPC__LATENCY_BOUNDS; i++) EXPECT_EQ(3u, h.count[i]) << "bound " << rrpc__latency_bounds_us[i];
  EXPECT_EQ(1u, h.count[RRPC__LATENCY_BOUNDS]);
  rrpc__call_stats_free(s);
}

}  // namespace
