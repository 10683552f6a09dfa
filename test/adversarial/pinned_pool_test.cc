// pinned_pool_test.cc - plain TCP peers against registered memory (issue 13,
// item 8), on the host: a bounded fake "pool" allocator stands in for the
// RDMA pool (rrpc_block_allocator_set is how the pool installs itself). 64
// TCP connections park partial frames; none of their bytes may come from
// the pool. Then, with the pool exhausted, only the call that needed pool
// memory fails; the parked connections and later calls are unaffected.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rrpc/rrpc.h"
#include "test/common/hostile.h"

namespace {

using namespace rrpc_test;

// A pool with a byte cap, like the registered pool's rdma_memory_pool_max_size_mb.
struct FakePool {
  std::atomic<size_t> used{0};
  std::atomic<size_t> cap{32u << 20};
  std::atomic<size_t> refused{0};
};
FakePool g_pool;

int pool_alloc(void *, size_t size, void **data, size_t *cap, void **region) {
  if (g_pool.used.fetch_add(size) + size > g_pool.cap) {
    g_pool.used -= size;
    g_pool.refused++;
    return -RRPC_EPOOL;
  }
  *data = malloc(size);
  *cap = size;
  *region = nullptr;
  return 0;
}
void pool_free(void *, void *data, size_t cap, void *) {
  free(data);
  g_pool.used -= cap;
}
const rrpc_block_allocator kPool = {"fake-pool", pool_alloc, pool_free, nullptr};

void echo(void *, rrpc_server_call *call) { rrpc_server_call_respond(call, rrpc_server_call_request(call)); }

TEST(PinnedPool, TcpPeersNeverTakePoolMemoryAndExhaustionFailsOnlyTheNeedyCall) {
  rrpc_server_options o = {};
  rrpc_server *s;
  ASSERT_EQ(0, rrpc_server_new(&o, &s));
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.EchoService", "Echo", echo, nullptr));
  ASSERT_EQ(0, rrpc_server_start(s, "127.0.0.1:0"));
  int port = rrpc_server_port(s);
  std::string addr = "127.0.0.1:" + std::to_string(port);
  rrpc_channel_options co = {};
  co.timeout_ms = 3000;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), &co, &ch));
  rrpc_block_allocator_set(&kPool);

  // 64 connections, each parking 1 MiB of a 64 MiB frame (64 MiB in all,
  // twice the pool's cap).
  const int kConns = 64;
  const size_t kPark = 1u << 20;
  std::string chunk(kPark, 'z');
  std::vector<int> fds;
  rrpc_limit_stats st0;
  rrpc_limit_stats_get(&st0);
  for (int i = 0; i < kConns; i++) {
    int fd = raw_connect(port);
    ASSERT_GE(fd, 0);
    std::string h = frame_header(64u << 20, 64);
    ASSERT_EQ(12, send(fd, h.data(), h.size(), 0));
    ASSERT_EQ(static_cast<ssize_t>(kPark), send(fd, chunk.data(), chunk.size(), 0));
    fds.push_back(fd);
  }
  const uint64_t parked = static_cast<uint64_t>(kConns) * (12 + kPark);
  bool all_parked = wait_until([&] {
    rrpc_limit_stats st;
    rrpc_limit_stats_get(&st);
    return st.input_bytes - st0.input_bytes >= parked;
  }, 20000);
  size_t pool_after_park = g_pool.used;

  // A call works while the pool has room...
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rq, *rs;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_new(&rs);
  rrpc_iobuf_append(rq, "one", 3);
  int ok_before = rrpc_channel_call(ch, "test.EchoService", "Echo", c, rq, rs, nullptr, nullptr);
  // ...fails alone once its request cannot get pool memory...
  size_t saved_cap = g_pool.cap;
  g_pool.cap = g_pool.used.load();
  std::string big(64u << 10, 'b');
  rrpc_iobuf *bq;
  rrpc_iobuf_new(&bq);
  int rc_exhausted = rrpc_iobuf_append(bq, big.data(), big.size());
  if (rc_exhausted == 0)
    rc_exhausted = rrpc_channel_call(ch, "test.EchoService", "Echo", c, bq, rs, nullptr, nullptr);
  // ...and the parked connections are still there, untouched.
  int still_open = 0;
  for (int fd : fds) still_open += !peer_closed(fd, 0);
  g_pool.cap = saved_cap;
  int ok_after = rrpc_channel_call(ch, "test.EchoService", "Echo", c, rq, rs, nullptr, nullptr);
  char line[400];
  snprintf(line, sizeof line, "%d TCP connections parked %.0f MiB of partial 64 MiB frames with a "
           "32 MiB fake registered pool installed: pool bytes used by them %zu; with the pool then "
           "exhausted the call that needed it failed with %s, %d/%d parked connections still open, calls before/"
           "after: %s/%s", kConns, static_cast<double>(parked) / (1 << 20), pool_after_park,
           rrpc_err_name(rc_exhausted), still_open, kConns, rrpc_err_name(ok_before), rrpc_err_name(ok_after));
  report("tcp-vs-pinned-pool", line);
  EXPECT_TRUE(all_parked);
  // Only the one call's few blocks at most; none of the 64 MiB parked.
  EXPECT_LT(pool_after_park, 1u << 20);
  EXPECT_EQ(0, ok_before);
  EXPECT_EQ(-RRPC_EPOOL, rc_exhausted);
  EXPECT_EQ(kConns, still_open);
  EXPECT_EQ(0, ok_after);

  rrpc_iobuf_free(bq);
  rrpc_iobuf_free(rq);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);
  for (int fd : fds) close(fd);
  rrpc_channel_free(ch);
  rrpc_server_free(s);
  rrpc_block_allocator_set(nullptr);
}

}  // namespace
