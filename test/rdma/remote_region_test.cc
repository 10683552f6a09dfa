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

namespace {

constexpr uint64_t kMiB = 1 << 20;

struct Qp {
  ibv_cq *cq = nullptr;
  ibv_qp *qp = nullptr;
  explicit Qp(rrpc__rdma_dev *d) {
    cq = ibv_create_cq(d->ctx, 64, nullptr, nullptr, 0);
    ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 16;
    ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    if (cq) qp = ibv_create_qp(d->pd, &ia);
  }
  ~Qp() {
    if (qp) ibv_destroy_qp(qp);
    if (cq) ibv_destroy_cq(cq);
  }
};

int Connect(rrpc__rdma_dev *d, ibv_qp *q, uint32_t peer_qpn, int gid_index, const ibv_gid &gid) {
  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = d->port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int rc = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc) return rc;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = d->active_mtu;
  a.dest_qp_num = peer_qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.dlid = d->lid;
  a.ah_attr.port_num = d->port;
  rc = ibv_modify_qp(q, &a,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) return rc;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(q, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

// One completion from cq within 30 s; its status, or -1 on timeout.
int PollOne(ibv_cq *cq, ibv_wc *wc) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) return -1;
    if (n == 1) return wc->status;
  }
  return -1;
}

// A connection: owner side `own`, accessing side `acc`.
struct Conn {
  std::unique_ptr<Qp> own, acc;
  bool Up(rrpc__rdma_dev *d) {
    own.reset(new Qp(d));
    acc.reset(new Qp(d));
    if (!own->qp || !acc->qp) return false;
    int idx;
    ibv_gid gid;
    if (rrpc__rdma_dev_pick_gid(d, nullptr, &idx, &gid) != 0) return false;
    return Connect(d, own->qp, acc->qp->qp_num, idx, gid) == 0 &&
           Connect(d, acc->qp, own->qp->qp_num, idx, gid) == 0;
  }
};

// Memory the accessor writes from and reads into (its own, local MR).
struct Local {
  std::vector<uint8_t> buf;
  ibv_mr *mr = nullptr;
  Local(ibv_pd *pd, size_t n) : buf(n) { mr = ibv_reg_mr(pd, buf.data(), n, IBV_ACCESS_LOCAL_WRITE); }
  ~Local() {
    if (mr) ibv_dereg_mr(mr);
  }
};

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

// A pattern that differs per seed and per 8-byte word (xorshift: cheap
// under the VM's emulation, where a 64 MiB fill from mt19937 takes seconds).
void Fill(uint8_t *p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(p + i, &x, n - i < 8 ? n - i : 8);
  }
}

// The bytes around [off, off + len) (4 KiB each side, within n) agree.
bool Around(const uint8_t *a, const uint8_t *b, size_t n, uint64_t off, uint64_t len) {
  uint64_t lo = off > 4096 ? off - 4096 : 0;
  uint64_t hi = off + len + 4096 < n ? off + len + 4096 : n;
  return memcmp(a + lo, b + lo, hi - lo) == 0;
}

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
