// app_allocator_test.cc - an application that installed its own iobuf block
// allocator before RDMA started keeps it (issue 13 item 17). The registered
// pool works by being the block allocator; it used to replace the
// application's silently. What the pool does instead (docs/rdma-transport.md,
// "Memory"): RDMA stays off in this process, said once, and connections fall
// back to TCP.
//
// Its own binary: the allocator must be in place before anything starts the
// pool, which every other RDMA test binary does.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/rdma_test_util.h"

namespace {

std::atomic<long> g_allocs{0};

int app_alloc(void *, size_t size, void **data, size_t *cap, void **region) {
  *data = malloc(size);
  if (*data == nullptr) return -ENOMEM;
  *cap = size;
  *region = nullptr;
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return 0;
}
void app_free(void *, void *data, size_t, void *) { free(data); }

const rrpc_block_allocator kAppAllocator = {"app", app_alloc, app_free, nullptr};

TEST(AppAllocator, StaysInPlaceAndConnectionsFallBackToTcp) {
  rrpc_block_allocator_set(&kAppAllocator);
  rrpc_server *s = rrpc_rdma_test::start_echo_server();
  ASSERT_NE(nullptr, s);
  rrpc_channel *ch = rrpc_rdma_test::open_channel(rrpc_server_port(s), 1);
  ASSERT_NE(nullptr, ch);

  for (int i = 0; i < 3; i++) {
    rrpc_controller *c;
    rrpc_iobuf *rq, *rs;
    rrpc_controller_new(&c);
    rrpc_iobuf_new(&rq);
    rrpc_iobuf_new(&rs);
    std::string body = "hello " + std::to_string(i);
    rrpc_iobuf_append(rq, body.data(), body.size());
    long allocs_before = g_allocs.load();
    EXPECT_EQ(0, rrpc_channel_call(ch, "test.Echo", "Echo", c, rq, rs, nullptr, nullptr));
    EXPECT_EQ(body, rrpc_test::iobuf_string(rs));
    EXPECT_EQ(0, rrpc_controller_used_rdma(c)) << "RDMA came up under a replaced allocator";
    EXPECT_GT(g_allocs.load(), allocs_before);  // blocks still come from the application
    rrpc_iobuf_free(rq);
    rrpc_iobuf_free(rs);
    rrpc_controller_free(c);
  }
  EXPECT_EQ(&kAppAllocator, rrpc_block_allocator_get());
  rrpc_rdma_stats st;
  ASSERT_EQ(0, rrpc_rdma_get_stats(&st));
  EXPECT_EQ(0u, st.pool_bytes);  // nothing registered

  rrpc_channel_free(ch);
  rrpc_server_stop(s);
  rrpc_server_free(s);
  rrpc_block_allocator_set(nullptr);
}

}  // namespace
