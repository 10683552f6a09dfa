// remote_region_test.cc - the verbs side of a remote-memory region
// (transport/rdma/remote/region.h) against raw verbs peers on loopback RC
// QP pairs: byte-exact one-sided WRITE and READ of 0 B .. 64 MiB at offsets
// that include the region's last byte; and a rogue accessor that tries
// out-of-range, wrong-rights, another connection's rkey and a revoked
// window: each fails on the accessor with REM_ACCESS_ERR (or another error
// status for READ) and the owner's memory stays byte-for-byte intact.
// Run by tools/run-rdma-tests (Soft-RoCE VM).
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

extern "C" {
#include "rrpc/errors.h"
#include "rrpc/remote.h"
#include "transport/rdma/device.h"
#include "transport/rdma/remote/region.h"
}
#include "test/rdma/remote_util.h"

namespace {

using namespace rmt_test;

// Post one WRITE or READ on the accessor and return its completion status.
int Access(Conn &c, ibv_wr_opcode op, Local &l, uint64_t len, uint64_t raddr, uint32_t rkey) {
  ibv_sge sge;
  sge.addr = reinterpret_cast<uintptr_t>(l.buf.data());
  sge.length = static_cast<uint32_t>(len);
  sge.lkey = l.mr->lkey;
  ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.opcode = op;
  wr.sg_list = &sge;
  wr.num_sge = len ? 1 : 0;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  if (ibv_post_send(c.acc->qp, &wr, &bad) != 0) return -2;
  ibv_wc wc;
  return PollOne(c.acc->cq, &wc);
}

class RemoteRegion : public ::testing::Test {
 protected:
  rrpc__rdma_dev *d = nullptr;
  void SetUp() override {
    if (rrpc__rdma_dev_get(&d) != 0) {
      ASSERT_EQ(nullptr, getenv("RRPC_TEST_RDMA_DEV")) << "the runner named a device, none is usable";
      GTEST_SKIP() << "no RDMA device with an ACTIVE port here";
    }
    if (!d->mw_type2) GTEST_SKIP() << d->name << " has no type-2 memory windows";
  }
  // Register buf as a region with rights, bind it on c's owner QP.
  void Bind(Conn &c, std::vector<uint8_t> &buf, uint8_t rights, rrpc__rmt_rdma_region *r) {
    ASSERT_EQ(0, rrpc__rmt_rdma_region_reg(d->pd, buf.data(), buf.size(), rights, r));
    ASSERT_EQ(0, rrpc__rmt_rdma_region_bind(r, c.own->qp, 77));
    ibv_wc wc;
    ASSERT_EQ(IBV_WC_SUCCESS, PollOne(c.own->cq, &wc));
    EXPECT_EQ(77u, wc.wr_id);
    EXPECT_EQ(IBV_WC_BIND_MW, wc.opcode);
  }
};

TEST_F(RemoteRegion, WriteAndReadAreByteExactUpToTheLastByte) {
  Conn c;
  ASSERT_TRUE(c.Up(d));
  const size_t kRegion = 64 * kMiB;
  std::vector<uint8_t> region(kRegion), shadow(kRegion);
  Fill(region.data(), kRegion, 1);
  shadow = region;
  rrpc__rmt_rdma_region r;
  Bind(c, region, RRPC_REMOTE_READ | RRPC_REMOTE_WRITE, &r);
  Local l(d->pd, kRegion);
  ASSERT_NE(nullptr, l.mr);
  const uint64_t base = reinterpret_cast<uintptr_t>(region.data());
  struct Case {
    uint64_t len, off;
  } cases[] = {// the whole region first, so the final comparison also shows that
               // the small accesses after it touched nothing else
               {kRegion, 0},  {0, 0},           {0, kRegion},          {1, 0},        {1, kRegion - 1},
               {4096, 4097},  {4096, kRegion - 4096}, {kMiB, 12345}, {kMiB, kRegion - kMiB}};
  uint32_t seed = 100;
  for (const Case &k : cases) {
    Fill(l.buf.data(), k.len, ++seed);
    ASSERT_EQ(IBV_WC_SUCCESS, Access(c, IBV_WR_RDMA_WRITE, l, k.len, base + k.off, r.rkey))
        << k.len << "@" << k.off;
    memcpy(shadow.data() + k.off, l.buf.data(), k.len);
    ASSERT_TRUE(Around(shadow.data(), region.data(), kRegion, k.off, k.len)) << "write " << k.len << "@" << k.off;
    std::vector<uint8_t> want(l.buf.begin(), l.buf.begin() + k.len);
    memset(l.buf.data(), 0, k.len);
    ASSERT_EQ(IBV_WC_SUCCESS, Access(c, IBV_WR_RDMA_READ, l, k.len, base + k.off, r.rkey))
        << k.len << "@" << k.off;
    ASSERT_EQ(0, memcmp(want.data(), l.buf.data(), k.len)) << "read " << k.len << "@" << k.off;
    printf("REMOTE_REGION write+read %llu B at %llu: byte-exact\n", (unsigned long long)k.len,
           (unsigned long long)k.off);
  }
  // Nothing else anywhere in the region changed.
  EXPECT_EQ(0, memcmp(shadow.data(), region.data(), kRegion));
  EXPECT_EQ(1, rrpc__rmt_rdma_region_revoke(&r));
  rrpc__rmt_rdma_region_dereg(&r);
}

// Each rogue access on its own connection (a refused access puts both QPs
// of a connection in error).
TEST_F(RemoteRegion, RogueAccessesFailAndLeaveTheMemoryIntact) {
  const size_t kRegion = 64 * 1024;
  std::vector<uint8_t> region(kRegion), shadow(kRegion);
  Fill(region.data(), kRegion, 7);
  shadow = region;
  const uint64_t base = reinterpret_cast<uintptr_t>(region.data());
  Local l(d->pd, 2 * kRegion);
  ASSERT_NE(nullptr, l.mr);
  Fill(l.buf.data(), l.buf.size(), 8);

  {  // out of range: one byte past the end, and a write spanning the end
    Conn c;
    ASSERT_TRUE(c.Up(d));
    rrpc__rmt_rdma_region r;
    Bind(c, region, RRPC_REMOTE_WRITE, &r);
    int st = Access(c, IBV_WR_RDMA_WRITE, l, 2, base + kRegion - 1, r.rkey);
    EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st) << ibv_wc_status_str(ibv_wc_status(st));
    EXPECT_EQ(0, memcmp(shadow.data(), region.data(), kRegion));
    printf("REMOTE_REGION out-of-range write: %s, memory intact\n", ibv_wc_status_str(ibv_wc_status(st)));
    rrpc__rmt_rdma_region_dereg(&r);
  }
  {  // wrong rights: READ of a write-only region
    Conn c;
    ASSERT_TRUE(c.Up(d));
    rrpc__rmt_rdma_region r;
    Bind(c, region, RRPC_REMOTE_WRITE, &r);
    int st = Access(c, IBV_WR_RDMA_READ, l, 64, base, r.rkey);
    EXPECT_NE(IBV_WC_SUCCESS, st);
    EXPECT_NE(-1, st) << "timed out";
    printf("REMOTE_REGION read of write-only: %s\n", ibv_wc_status_str(ibv_wc_status(st)));
    rrpc__rmt_rdma_region_dereg(&r);
  }
  {  // wrong rights: WRITE of a read-only region
    Conn c;
    ASSERT_TRUE(c.Up(d));
    rrpc__rmt_rdma_region r;
    Bind(c, region, RRPC_REMOTE_READ, &r);
    int st = Access(c, IBV_WR_RDMA_WRITE, l, 64, base, r.rkey);
    EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st) << ibv_wc_status_str(ibv_wc_status(st));
    EXPECT_EQ(0, memcmp(shadow.data(), region.data(), kRegion));
    printf("REMOTE_REGION write of read-only: %s, memory intact\n", ibv_wc_status_str(ibv_wc_status(st)));
    rrpc__rmt_rdma_region_dereg(&r);
  }
  {  // another connection uses the rkey of a window bound to the first
    Conn c, other;
    ASSERT_TRUE(c.Up(d));
    ASSERT_TRUE(other.Up(d));
    rrpc__rmt_rdma_region r;
    Bind(c, region, RRPC_REMOTE_WRITE, &r);
    int st = Access(other, IBV_WR_RDMA_WRITE, l, 64, base, r.rkey);
    EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st) << ibv_wc_status_str(ibv_wc_status(st));
    EXPECT_EQ(0, memcmp(shadow.data(), region.data(), kRegion));
    // The bound connection itself still works.
    ASSERT_EQ(IBV_WC_SUCCESS, Access(c, IBV_WR_RDMA_WRITE, l, 64, base, r.rkey));
    memcpy(shadow.data(), l.buf.data(), 64);
    EXPECT_EQ(0, memcmp(shadow.data(), region.data(), kRegion));
    printf("REMOTE_REGION another connection's rkey: %s, memory intact\n",
           ibv_wc_status_str(ibv_wc_status(st)));
    rrpc__rmt_rdma_region_dereg(&r);
  }
  {  // revoked: the window was deallocated once; a second revoke is a no-op
    Conn c;
    ASSERT_TRUE(c.Up(d));
    rrpc__rmt_rdma_region r;
    Bind(c, region, RRPC_REMOTE_WRITE, &r);
    EXPECT_EQ(-EALREADY, rrpc__rmt_rdma_region_bind(&r, c.own->qp, 78)) << "a region binds once";
    ASSERT_EQ(IBV_WC_SUCCESS, Access(c, IBV_WR_RDMA_WRITE, l, 16, base + 100, r.rkey));
    memcpy(shadow.data() + 100, l.buf.data(), 16);
    EXPECT_EQ(1, rrpc__rmt_rdma_region_revoke(&r));
    EXPECT_EQ(0, rrpc__rmt_rdma_region_revoke(&r)) << "invalidate once";
    int st = Access(c, IBV_WR_RDMA_WRITE, l, 16, base + 100, r.rkey);
    EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st) << ibv_wc_status_str(ibv_wc_status(st));
    EXPECT_EQ(0, memcmp(shadow.data(), region.data(), kRegion));
    EXPECT_EQ(-EALREADY, rrpc__rmt_rdma_region_bind(&r, c.own->qp, 79)) << "no rebind after revoke";
    printf("REMOTE_REGION revoked window: %s, memory intact\n", ibv_wc_status_str(ibv_wc_status(st)));
    rrpc__rmt_rdma_region_dereg(&r);
  }
}

TEST_F(RemoteRegion, RefusesBadArguments) {
  std::vector<uint8_t> b(16);
  rrpc__rmt_rdma_region r;
  EXPECT_EQ(-EINVAL, rrpc__rmt_rdma_region_reg(d->pd, b.data(), 0, RRPC_REMOTE_READ, &r));
  EXPECT_EQ(-EINVAL, rrpc__rmt_rdma_region_reg(d->pd, b.data(), 16, 0, &r));
  EXPECT_EQ(-EINVAL, rrpc__rmt_rdma_region_reg(d->pd, b.data(), 16, 4, &r));
  EXPECT_EQ(-EINVAL, rrpc__rmt_rdma_region_reg(d->pd, nullptr, 16, RRPC_REMOTE_READ, &r));
}

}  // namespace
