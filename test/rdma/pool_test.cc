// pool_test.cc - the registered memory pool, user memory registration,
// options and counters over real verbs (transport/rdma/pool.c, api.c).
// The pool is made tiny through the options (1 MiB first region, 1 MiB
// steps, 16 MiB cap) so growth and the cap are reached quickly. Tests run in
// file order: the exhaustion test is last (it leaves all memory in the
// 8 KiB class). Run by tools/run-rdma-tests.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/errors.h"
#include "rrpc/iobuf.h"
#include "rrpc/rdma.h"
#include "transport/rdma/device.h"
#include "transport/rdma/pool.h"
#include "transport/rdma/slots.h"
#include "transport/rdma/verbs_bg.h"
#include "test/rdma/rdma_test_util.h"
#include "test/rdma/tsan_suppressions.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kCapMb = 16;

// Without a device (a plain host, not under tools/run-rdma-tests) every
// test here is skipped; device_test covers that case. Under
// run-rdma-tests (RRPC_TEST_RDMA_DEV set) a missing device fails.
class NeedsDevice : public ::testing::Environment {
 public:
  void SetUp() override {
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (list) ibv_free_device_list(list);
    if (n > 0) return;
    const char *want = getenv("RRPC_TEST_RDMA_DEV");
    ASSERT_TRUE(want == nullptr || *want == '\0') << "RRPC_TEST_RDMA_DEV=" << want
                                                  << " but there is no verbs device";
    GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
  }
};
::testing::Environment *const g_needs_device =
    ::testing::AddGlobalTestEnvironment(new NeedsDevice);

rrpc__rdma_dev *Dev() {
  rrpc__rdma_dev *d = nullptr;
  EXPECT_EQ(0, rrpc__rdma_dev_get(&d));
  return d;
}

struct Area {
  void *data;
  size_t cap;
  void *region;
};

// Checks an area is pool memory of the device: its cookie is a region
// registered on the device's PD covering it, with the MR's lkey.
void ExpectRegistered(const Area &a, size_t want) {
  ASSERT_GE(a.cap, want);
  const rrpc__rdma_region *r = rrpc__rdma_region_of(a.region, a.data, a.cap);
  ASSERT_NE(nullptr, r) << "cookie does not cover the area";
  ASSERT_NE(nullptr, r->mr);
  EXPECT_EQ(r->mr->lkey, r->lkey);
  EXPECT_EQ(Dev()->pd, r->mr->pd);
  EXPECT_EQ(static_cast<void *>(r->base), r->mr->addr);
  EXPECT_EQ(r->len, r->mr->length);
}

Area MustAlloc(size_t size) {
  Area a{nullptr, 0, nullptr};
  EXPECT_EQ(0, rrpc__rdma_pool_alloc(size, &a.data, &a.cap, &a.region)) << size;
  return a;
}

void Free(const Area &a) { rrpc__rdma_pool_free(a.data, a.cap, a.region); }

// Blocks given back however the test ends (the cap test, last, counts
// what the earlier ones left free).
struct Held : std::vector<Area> {
  ~Held() {
    for (const Area &a : *this) Free(a);
  }
};

// The pool grows ahead of need on a background verbs thread: wait for a
// growth that may be under way before comparing registered bytes.
void SettleGrowth() { ASSERT_EQ(0, rrpc__verbs_bg_drain(30000)); }

using rrpc_rdma_test::stats;

TEST(Options, GlobalInitCopiesNormalizesAndFreezes) {
  rrpc_rdma_options o;
  rrpc_rdma_options_init(&o);
  std::string name = getenv("RRPC_TEST_RDMA_DEV") ? getenv("RRPC_TEST_RDMA_DEV") : "";
  o.device = name.empty() ? nullptr : name.c_str();
  o.pool_initial_size_mb = 1;
  o.pool_increase_size_mb = 1;
  o.pool_max_size_mb = kCapMb;
  o.ring_size = 100000;  // not 16 KiB << n: rounds up to 128 KiB
  o.sq_size = 0;         // zero = default
  rrpc_rdma_options bad = o;
  bad.port = -1;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&bad));
  bad = o;
  bad.ring_size = size_t{4} << 30;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&bad));
  // Above 512 MiB (16 KiB << 15) a ring cannot be announced in a CLC
  // Accept: refused here rather than failing every RDMA connection later.
  bad.ring_size = (size_t{512} << 20) + 1;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&bad));
  bad.ring_size = size_t{1} << 30;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&bad));
  bad = o;
  bad.max_handshakes = -1;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&bad));
  // The elastic send queue: 8 .. 4096 WRs, 0 = 31.
  bad = o;
  bad.elastic_sq_size = 7;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&bad));
  bad.elastic_sq_size = 4097;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&bad));
  o.elastic_sq_size = 0;
  ASSERT_EQ(0, rrpc_rdma_global_init(&o));
  name = "clobbered";  // the options hold a copy of the device name
  o.pool_max_size_mb = 1;
  EXPECT_EQ(-EALREADY, rrpc_rdma_global_init(&o));

  const rrpc_rdma_options *eff = rrpc__rdma_options();
  if (eff->device) {
    EXPECT_STRNE("clobbered", eff->device);
  }
  EXPECT_EQ(size_t{128} << 10, eff->ring_size);
  EXPECT_EQ(128, eff->sq_size);
  EXPECT_EQ(31, eff->elastic_sq_size);
  EXPECT_EQ(kCapMb, eff->pool_max_size_mb);
  EXPECT_EQ(1u, eff->pool_initial_size_mb);
  EXPECT_EQ(2000, eff->handshake_timeout_ms);
  EXPECT_EQ(64, eff->max_handshakes);
}

TEST(Pool, NotReadyBeforeStart) {
  Area a{nullptr, 0, nullptr};
  EXPECT_EQ(-RRPC_ENOTREADY, rrpc__rdma_pool_alloc(8192, &a.data, &a.cap, &a.region));
  EXPECT_EQ(0u, rrpc__rdma_pool_bytes());
}

TEST(Pool, StartRegistersTheFirstRegionAndInstallsTheAllocator) {
  rrpc__rdma_dev *d = Dev();
  ASSERT_NE(nullptr, d);
  ASSERT_EQ(0, rrpc__rdma_pool_start(d));
  EXPECT_EQ(kMiB, rrpc__rdma_pool_bytes());
  EXPECT_STREQ("rdma-pool", rrpc_block_allocator_get()->name);
  ASSERT_EQ(0, rrpc__rdma_pool_start(d));  // idempotent
  EXPECT_EQ(kMiB, rrpc__rdma_pool_bytes());
  rrpc_rdma_stats st;
  ASSERT_EQ(0, rrpc_rdma_get_stats(&st));
  EXPECT_EQ(kMiB, st.pool_bytes);
}

TEST(Pool, SizeClasses) {
  const struct {
    size_t ask, cap;
  } cases[] = {
      {1, 8192},        {8192, 8192},         {8193, 65536},
      {65536, 65536},   {100000, 512u << 10}, {512u << 10, 512u << 10},
  };
  std::vector<Area> got;
  for (const auto &c : cases) {
    Area a = MustAlloc(c.ask);
    ASSERT_EQ(c.cap, a.cap) << c.ask;
    ExpectRegistered(a, c.ask);
    memset(a.data, 0x5a, a.cap);  // all of it is ours to write
    got.push_back(a);
  }
  // No two areas overlap.
  std::sort(got.begin(), got.end(), [](const Area &x, const Area &y) { return x.data < y.data; });
  for (size_t i = 1; i < got.size(); i++)
    EXPECT_LE(static_cast<char *>(got[i - 1].data) + got[i - 1].cap, got[i].data);
  for (const Area &a : got) Free(a);
  // A freed block goes back to its class: the same size comes back from
  // the free list without growing the pool.
  SettleGrowth();
  size_t bytes = rrpc__rdma_pool_bytes();
  Area again = MustAlloc(65536);
  EXPECT_EQ(bytes, rrpc__rdma_pool_bytes());
  Free(again);
}

TEST(Pool, GrowsPastTheFirstRegionWithEachRegionsLkey) {
  size_t before = rrpc__rdma_pool_bytes();
  std::vector<Area> got;
  std::set<const void *> regions;
  // 300 x 8 KiB = 2.3 MiB: more than the first region holds.
  for (int i = 0; i < 300; i++) {
    Area a = MustAlloc(8192);
    ASSERT_NE(nullptr, a.data);
    ExpectRegistered(a, 8192);
    memset(a.data, i & 0xff, 8192);
    regions.insert(a.region);
    got.push_back(a);
  }
  EXPECT_GE(regions.size(), 2u);
  EXPECT_GT(rrpc__rdma_pool_bytes(), before);
  EXPECT_LE(rrpc__rdma_pool_bytes(), kCapMb * kMiB);
  std::set<uint32_t> lkeys;
  for (const void *r : regions) lkeys.insert(static_cast<const rrpc__rdma_region *>(r)->lkey);
  EXPECT_EQ(regions.size(), lkeys.size()) << "each region has its own MR";
  for (size_t i = 0; i < got.size(); i++) {
    const unsigned char *p = static_cast<const unsigned char *>(got[i].data);
    ASSERT_EQ(i & 0xff, p[0]);
    ASSERT_EQ(i & 0xff, p[8191]);
  }
  SettleGrowth();
  size_t grown = rrpc__rdma_pool_bytes();
  for (const Area &a : got) Free(a);
  // Regions are kept; the same count comes back without growing.
  for (Area &a : got) a = MustAlloc(8192);
  EXPECT_EQ(grown, rrpc__rdma_pool_bytes());
  for (const Area &a : got) Free(a);
}

// Carving below --rdma_memory_pool_low_water_mb (default: half of the
// 1 MiB step here) hands the next region to a background thread: the pool
// grows while the allocating thread still has room, never on it. Before
// this, the region was registered by the allocation that found no room
// (320 ms in ibv_reg_mr on a loop, caught by the strict watchdog in CI).
TEST(Pool, GrowsAheadOfNeedOnABackgroundThread) {
  SettleGrowth();
  const rrpc_rdma_stats s0 = stats();
  const size_t bytes0 = rrpc__rdma_pool_bytes();
  Held got;
  // The free lists first (earlier tests' blocks), then up to two steps of
  // carving; each allocation is followed by a drain, so a growth handed off
  // is always finished before the next one: the allocating thread never
  // runs out and never waits.
  size_t grew_after = 0;
  for (size_t i = 0; i < 6 * kMiB / 8192 && grew_after == 0; i++) {
    got.push_back(MustAlloc(8192));
    SettleGrowth();
    if (rrpc__rdma_pool_bytes() > bytes0) grew_after = got.size();
  }
  const rrpc_rdma_stats s1 = stats();
  ASSERT_NE(0u, grew_after) << "no growth after " << got.size() << " blocks";
  EXPECT_EQ(bytes0 + kMiB, rrpc__rdma_pool_bytes()) << "one step";
  EXPECT_EQ(s0.pool_grows_ahead + 1, s1.pool_grows_ahead) << "the growth ran on a background thread";
  EXPECT_EQ(s0.pool_grows_inline, s1.pool_grows_inline) << "nothing registered on the allocating thread";
  EXPECT_EQ(s0.pool_grow_waits, s1.pool_grow_waits);
  EXPECT_EQ(s0.bg_jobs_inline, s1.bg_jobs_inline);
  // The blocks after the growth come from what was left and then the new
  // region, all registered, none of them waiting.
  for (int i = 0; i < 100; i++) {
    got.push_back(MustAlloc(8192));
    ExpectRegistered(got.back(), 8192);
  }
  SettleGrowth();
  const rrpc_rdma_stats s2 = stats();
  EXPECT_EQ(s0.pool_grows_inline, s2.pool_grows_inline);
  printf("POOL grow-ahead: the next 1 MiB region was registered in the background after %zu blocks "
         "(free lists, then carving); regions ahead %llu, inline %llu, waits %llu\n",
         grew_after, static_cast<unsigned long long>(s2.pool_grows_ahead - s0.pool_grows_ahead),
         static_cast<unsigned long long>(s2.pool_grows_inline - s0.pool_grows_inline),
         static_cast<unsigned long long>(s2.pool_grow_waits - s0.pool_grow_waits));
}

// A job that holds the background teardown thread (where the pool grows)
// until opened.
struct Gate {
  rrpc__bg_job job{};
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, open = false;
  static Gate *current;
  static void Run(rrpc__bg_job *) {
    Gate *g = current;
    std::unique_lock<std::mutex> l(g->mu);
    g->entered = true;
    g->cv.notify_all();
    g->cv.wait(l, [g] { return g->open; });
  }
};
Gate *Gate::current = nullptr;

// When the regions run out before the growth under way lands, the
// allocation waits for that growth (counted) rather than registering a
// second region of its own; nothing fails.
TEST(Pool, GrowthFallingBehindWaitsForIt) {
  SettleGrowth();
  Gate gate;
  Gate::current = &gate;
  gate.job.fn = Gate::Run;
  rrpc__verbs_bg_submit_lane(RRPC_BG_TEARDOWN, &gate.job);
  {
    std::unique_lock<std::mutex> l(gate.mu);
    ASSERT_TRUE(gate.cv.wait_for(l, std::chrono::seconds(30), [&] { return gate.entered; }));
  }
  const rrpc_rdma_stats s0 = stats();
  const size_t bytes0 = rrpc__rdma_pool_bytes();
  // Allocate on another thread until the pool has grown: past the low water
  // mark the growth queues behind the gate, then the tails run out and the
  // allocation waits.
  Held got;
  std::atomic<bool> done{false};
  std::thread t([&] {
    for (size_t i = 0; i < 6 * kMiB / 8192 && rrpc__rdma_pool_bytes() == bytes0; i++) got.push_back(MustAlloc(8192));
    done = true;
  });
  // Bounded poll for the counted wait (the allocating thread is blocked in
  // it while the gate is closed).
  rrpc_rdma_stats s1 = stats();
  for (int i = 0; i < 30000 && s1.pool_grow_waits == s0.pool_grow_waits && !done; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s1 = stats();
  }
  EXPECT_EQ(s0.pool_grow_waits + 1, s1.pool_grow_waits);
  EXPECT_FALSE(done) << "the allocation did not wait for the growth under way";
  EXPECT_EQ(bytes0, rrpc__rdma_pool_bytes()) << "nothing registered while the growth was held";
  {
    std::lock_guard<std::mutex> l(gate.mu);
    gate.open = true;
  }
  gate.cv.notify_all();
  t.join();
  SettleGrowth();
  const rrpc_rdma_stats s2 = stats();
  EXPECT_EQ(bytes0 + kMiB, rrpc__rdma_pool_bytes()) << "one region, not two";
  EXPECT_EQ(s0.pool_grows_ahead + 1, s2.pool_grows_ahead);
  EXPECT_EQ(s0.pool_grows_inline, s2.pool_grows_inline);
  for (const Area &a : got) ExpectRegistered(a, 8192);
}

TEST(Pool, LargeRequestsGetADedicatedRegionCountedAgainstTheCap) {
  SettleGrowth();
  size_t before = rrpc__rdma_pool_bytes();
  Area a = MustAlloc(4 * kMiB + 1);
  ExpectRegistered(a, 4 * kMiB + 1);
  EXPECT_EQ(4 * kMiB + 4096, a.cap);
  EXPECT_EQ(before + a.cap, rrpc__rdma_pool_bytes());
  memset(a.data, 1, a.cap);
  // More than the cap could ever hold: refused, nothing registered.
  Area b{nullptr, 0, nullptr};
  EXPECT_EQ(-RRPC_EPOOL, rrpc__rdma_pool_alloc(kCapMb * kMiB, &b.data, &b.cap, &b.region));
  Free(a);
  EXPECT_EQ(before, rrpc__rdma_pool_bytes()) << "a dedicated region goes away with its block";
}

TEST(Pool, IobufBlocksComeFromThePool) {
  rrpc_iobuf *buf = nullptr;
  ASSERT_EQ(0, rrpc_iobuf_new(&buf));
  std::string payload(20000, 'x');
  for (size_t i = 0; i < payload.size(); i++) payload[i] = static_cast<char>(i * 7);
  ASSERT_EQ(0, rrpc_iobuf_append(buf, payload.data(), payload.size()));
  ASSERT_GE(rrpc_iobuf_piece_count(buf), 3u);
  for (size_t i = 0; i < rrpc_iobuf_piece_count(buf); i++) {
    const void *data;
    size_t len;
    void *region;
    ASSERT_EQ(0, rrpc_iobuf_piece(buf, i, &data, &len, &region));
    const rrpc__rdma_region *r = rrpc__rdma_region_of(region, data, len);
    ASSERT_NE(nullptr, r) << "piece " << i << " is not registered pool memory";
    EXPECT_EQ(r->mr->lkey, r->lkey);
    EXPECT_EQ(Dev()->pd, r->mr->pd);
  }
  EXPECT_TRUE(rrpc_iobuf_equals(buf, payload.data(), payload.size()));
  rrpc_iobuf_free(buf);
}

TEST(Pool, ConcurrentAllocFreeNeverHandsOutABlockTwice) {
  constexpr int kThreads = 4, kRounds = 2000, kHeld = 16;
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([t, &failures] {
      std::vector<Area> held;
      for (int i = 0; i < kRounds; i++) {
        size_t size = (i % 5 == 0) ? 65536 : 8192;
        Area a{nullptr, 0, nullptr};
        if (rrpc__rdma_pool_alloc(size, &a.data, &a.cap, &a.region) != 0) {
          failures++;
          continue;
        }
        // Stamp it; a block handed out twice would be overwritten.
        memset(a.data, t + 1, 64);
        held.push_back(a);
        if (held.size() > kHeld) {
          Area old = held.front();
          held.erase(held.begin());
          const unsigned char *p = static_cast<const unsigned char *>(old.data);
          for (int k = 0; k < 64; k++)
            if (p[k] != t + 1) failures++;
          rrpc__rdma_pool_free(old.data, old.cap, old.region);
        }
      }
      for (const Area &a : held) rrpc__rdma_pool_free(a.data, a.cap, a.region);
    });
  }
  for (auto &th : ts) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_LE(rrpc__rdma_pool_bytes(), kCapMb * kMiB);
}

// ---- user memory ---------------------------------------------------------------

struct DeleterLog {
  int runs = 0;
  void *data = nullptr;
};
void CountingDeleter(void *data, void *arg) {
  auto *log = static_cast<DeleterLog *>(arg);
  log->runs++;
  log->data = data;
}

TEST(UserMemory, RegisterAppendDeregister) {
  const size_t len = 3 * kMiB + 123;
  char *mem = static_cast<char *>(malloc(len));
  ASSERT_NE(nullptr, mem);
  memset(mem, 'u', len);
  void *region = nullptr;
  ASSERT_EQ(0, rrpc_rdma_register_memory(mem, len, &region));
  const rrpc__rdma_region *r = rrpc__rdma_region_of(region, mem, len);
  ASSERT_NE(nullptr, r);
  EXPECT_EQ(r->mr->lkey, r->lkey);
  EXPECT_EQ(static_cast<void *>(mem), r->mr->addr);
  EXPECT_EQ(len, r->mr->length);
  EXPECT_EQ(Dev()->pd, r->mr->pd);
  // Not counted as pool memory.
  rrpc_rdma_stats st;
  ASSERT_EQ(0, rrpc_rdma_get_stats(&st));
  EXPECT_EQ(rrpc__rdma_pool_bytes(), st.pool_bytes);

  DeleterLog log;
  rrpc_iobuf *buf = nullptr;
  ASSERT_EQ(0, rrpc_iobuf_new(&buf));
  ASSERT_EQ(0, rrpc_iobuf_append_user(buf, mem + 100, 5000, region, CountingDeleter, &log));
  ASSERT_EQ(1u, rrpc_iobuf_piece_count(buf));
  const void *data;
  size_t plen;
  void *cookie;
  ASSERT_EQ(0, rrpc_iobuf_piece(buf, 0, &data, &plen, &cookie));
  EXPECT_EQ(static_cast<const void *>(mem + 100), data);  // shared, not copied
  EXPECT_EQ(5000u, plen);
  EXPECT_EQ(region, cookie);
  EXPECT_EQ(r, rrpc__rdma_region_of(cookie, data, plen));
  rrpc_iobuf_free(buf);
  EXPECT_EQ(1, log.runs);
  EXPECT_EQ(static_cast<void *>(mem + 100), log.data);

  EXPECT_EQ(0, rrpc_rdma_deregister_memory(region));
  EXPECT_EQ(-EINVAL, rrpc_rdma_deregister_memory(region)) << "a second deregister";
  free(mem);
}

TEST(UserMemory, BadArgumentsAndForeignCookiesAreEINVAL) {
  char buf[64];
  void *region = reinterpret_cast<void *>(0x1);
  EXPECT_EQ(-EINVAL, rrpc_rdma_register_memory(nullptr, 64, &region));
  EXPECT_EQ(nullptr, region);
  EXPECT_EQ(-EINVAL, rrpc_rdma_register_memory(buf, 0, &region));
  EXPECT_EQ(-EINVAL, rrpc_rdma_register_memory(buf, sizeof buf, nullptr));
  EXPECT_EQ(-EINVAL, rrpc_rdma_deregister_memory(nullptr));
  EXPECT_EQ(-EINVAL, rrpc_rdma_deregister_memory(buf));
  // A pool region is not the user's to deregister.
  Area a = MustAlloc(8192);
  EXPECT_EQ(-EINVAL, rrpc_rdma_deregister_memory(a.region));
  ExpectRegistered(a, 8192);
  Free(a);
}

TEST(UserMemory, MemoryTheDeviceRefusesIsERDMAMEM) {
  // An address range with no mapping behind it cannot be pinned.
  void *region = reinterpret_cast<void *>(0x1);
  void *unmapped = reinterpret_cast<void *>(uintptr_t{1} << 46);
  EXPECT_EQ(-RRPC_ERDMAMEM, rrpc_rdma_register_memory(unmapped, 1 << 20, &region));
  EXPECT_EQ(nullptr, region);
}

// ---- receive slots (slots.c) -------------------------------------------------------

// Connections' CDC slots come from a slab: areas inside one registered
// chunk's MR (local write only), never overlapping, counted by chunk, and
// cleared when handed out again.
TEST(Slots, CarvedFromRegisteredChunksClearedOnReuse) {
  rrpc__rdma_dev *d = Dev();
  ASSERT_NE(nullptr, d);
  const size_t len = 17 * 64;  // an elastic connection's 16 receives + 1 send slot
  const rrpc_rdma_stats s0 = stats();
  struct Slot {
    char *mem;
    ibv_mr *mr;
  };
  std::vector<Slot> got;
  const size_t n = 2 * RRPC__SLOT_CHUNK / len + 1;  // spills into a third chunk
  for (size_t i = 0; i < n; i++) {
    Slot sl{nullptr, nullptr};
    ASSERT_EQ(0, rrpc__slots_get(d->pd, len, &sl.mem, &sl.mr)) << i;
    ASSERT_NE(nullptr, sl.mr);
    EXPECT_EQ(d->pd, sl.mr->pd);
    const char *base = static_cast<const char *>(sl.mr->addr);
    EXPECT_GE(sl.mem, base);
    EXPECT_LE(sl.mem + len, base + sl.mr->length) << "an area lies inside its chunk's MR";
    for (size_t k = 0; k < len; k++) ASSERT_EQ(0, sl.mem[k]) << "fresh areas are zero";
    memset(sl.mem, 0xa5, len);
    got.push_back(sl);
  }
  std::sort(got.begin(), got.end(), [](const Slot &x, const Slot &y) { return x.mem < y.mem; });
  for (size_t i = 1; i < got.size(); i++) EXPECT_LE(got[i - 1].mem + len, got[i].mem) << "areas overlap";
  std::set<ibv_mr *> mrs;
  for (const Slot &sl : got) mrs.insert(sl.mr);
  const rrpc_rdma_stats s1 = stats();
  EXPECT_GE(mrs.size(), 3u);
  EXPECT_LE(mrs.size(), 4u) << "a chunk per " << RRPC__SLOT_CHUNK / len << " areas, not an MR each";
  EXPECT_LE(s1.slot_bytes - s0.slot_bytes, 4u * RRPC__SLOT_CHUNK);
  EXPECT_GE(s1.slot_bytes - s0.slot_bytes, 3u * RRPC__SLOT_CHUNK);
  // Given back and taken again: the same memory, cleared, nothing registered.
  Slot back = got.back();
  got.pop_back();
  rrpc__slots_put(back.mem, len, back.mr);
  Slot again{nullptr, nullptr};
  ASSERT_EQ(0, rrpc__slots_get(d->pd, len, &again.mem, &again.mr));
  EXPECT_EQ(back.mem, again.mem);
  EXPECT_EQ(back.mr, again.mr);
  for (size_t k = 0; k < len; k++) ASSERT_EQ(0, again.mem[k]) << "the last owner's bytes at " << k;
  EXPECT_EQ(s1.slot_bytes, stats().slot_bytes);
  got.push_back(again);
  // Bad sizes are refused.
  Slot bad{nullptr, nullptr};
  EXPECT_EQ(-EINVAL, rrpc__slots_get(d->pd, 100, &bad.mem, &bad.mr));
  EXPECT_EQ(-EINVAL, rrpc__slots_get(d->pd, 0, &bad.mem, &bad.mr));
  for (const Slot &sl : got) rrpc__slots_put(sl.mem, len, sl.mr);
  // Kept for the next connections: the slab does not shrink.
  EXPECT_EQ(s1.slot_bytes, stats().slot_bytes);
}

// ---- counters ------------------------------------------------------------------

TEST(Stats, CountersAndFallbackReason) {
  rrpc_rdma_stats a, b;
  ASSERT_EQ(0, rrpc_rdma_get_stats(&a));
  rrpc__rdma_count(RRPC_RDMA_CNT_WRITES, 5);
  rrpc__rdma_count(RRPC_RDMA_CNT_BYTES_WRITTEN, 4096);
  rrpc__rdma_count(RRPC_RDMA_CNT_CONN_RDMA, 1);
  rrpc__rdma_note_fallback(0x03030000u);
  rrpc__rdma_note_fallback(0x03030000u);  // logged once, counted twice
  rrpc__rdma_note_fallback(0x09990000u);
  ASSERT_EQ(0, rrpc_rdma_get_stats(&b));
  EXPECT_EQ(a.writes + 5, b.writes);
  EXPECT_EQ(a.bytes_written + 4096, b.bytes_written);
  EXPECT_EQ(a.connections_rdma + 1, b.connections_rdma);
  EXPECT_EQ(a.connections_fallback + 3, b.connections_fallback);
  EXPECT_EQ(0x09990000u, b.fallback_last_reason);
  EXPECT_EQ(a.completions, b.completions);
  EXPECT_EQ(-EINVAL, rrpc_rdma_get_stats(nullptr));
}

// ---- the cap (last: it leaves every free byte in the 8 KiB class) ---------------

TEST(Pool, TheCapGivesEPOOLAndTheIobufReportsIt) {
  std::vector<Area> got;
  int rc = 0;
  for (size_t i = 0; i < kCapMb * kMiB / 8192 + 10; i++) {
    Area a{nullptr, 0, nullptr};
    rc = rrpc__rdma_pool_alloc(8192, &a.data, &a.cap, &a.region);
    if (rc) break;
    got.push_back(a);
  }
  EXPECT_EQ(-RRPC_EPOOL, rc);
  EXPECT_LE(got.size() * 8192, kCapMb * kMiB);
  // All but the region bookkeeping: exactly cap - 2 MiB was seen under TSan.
  EXPECT_GE(got.size() * 8192, (kCapMb - 2) * kMiB) << "most of the cap is usable";
  EXPECT_LE(rrpc__rdma_pool_bytes(), kCapMb * kMiB);

  // The iobuf layer hands the error to its caller; nothing was appended.
  rrpc_iobuf *buf = nullptr;
  ASSERT_EQ(0, rrpc_iobuf_new(&buf));
  std::string data(100, 'z');
  EXPECT_EQ(-RRPC_EPOOL, rrpc_iobuf_append(buf, data.data(), data.size()));
  EXPECT_EQ(0u, rrpc_iobuf_length(buf));
  // Other classes run out too (after what their free lists still hold),
  // and say so just as clearly.
  for (size_t size : {size_t{65536}, size_t{512} << 10, size_t{4} << 20, size_t{5} << 20}) {
    for (;;) {
      Area a{nullptr, 0, nullptr};
      rc = rrpc__rdma_pool_alloc(size, &a.data, &a.cap, &a.region);
      if (rc) break;
      got.push_back(a);
    }
    EXPECT_EQ(-RRPC_EPOOL, rc) << size;
  }
  EXPECT_LE(rrpc__rdma_pool_bytes(), kCapMb * kMiB);

  // Room again after frees: the same calls succeed.
  for (const Area &a : got) Free(a);
  ASSERT_EQ(0, rrpc_iobuf_append(buf, data.data(), data.size()));
  EXPECT_TRUE(rrpc_iobuf_equals(buf, data.data(), data.size()));
  rrpc_iobuf_free(buf);
}

}  // namespace
