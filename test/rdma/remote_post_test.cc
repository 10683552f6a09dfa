// remote_post_test.cc - one-sided operations posted through the ops queue
// (src/rrpc/remote/ops.h + transport/rdma/remote/post.h) on a loopback RC
// connection against a region bound to it (region.h): any size split to the
// piece limit with exactly one completion per op, byte-exact; NOTIFY writes
// arrive at the owner once each, in order, after their bytes; and a peer
// that dies mid-transfer completes every pending op once with an error.
// Run by tools/run-rdma-tests (Soft-RoCE VM).
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <arpa/inet.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

extern "C" {
#include "rrpc/errors.h"
#include "rrpc/remote.h"
#include "rrpc/remote/ops.h"
#include "transport/rdma/device.h"
#include "transport/rdma/remote/post.h"
#include "transport/rdma/remote/region.h"
}
#include "test/rdma/remote_util.h"

namespace {

using namespace rmt_test;

struct Op {
  rrpc__rmt_rdma_op r;  // first: the queue hands it back
  int calls = 0;
  int status = 1;
  int order = -1;
};

int g_order;

void OnDone(rrpc__rmt_op *op, int status) {
  Op *o = reinterpret_cast<Op *>(op);
  o->calls++;
  o->status = status;
  o->order = g_order++;
}

class RemotePost : public ::testing::Test {
 protected:
  rrpc__rdma_dev *d = nullptr;
  void SetUp() override {
    g_order = 0;
    if (rrpc__rdma_dev_get(&d) != 0) {
      ASSERT_EQ(nullptr, getenv("RRPC_TEST_RDMA_DEV")) << "the runner named a device, none is usable";
      GTEST_SKIP() << "no RDMA device with an ACTIVE port here";
    }
    if (!d->mw_type2) GTEST_SKIP() << d->name << " has no type-2 memory windows";
  }
  void Bind(Conn &c, std::vector<uint8_t> &buf, rrpc__rmt_rdma_region *r) {
    ASSERT_EQ(0, rrpc__rmt_rdma_region_reg(d->pd, buf.data(), buf.size(),
                                           RRPC_REMOTE_READ | RRPC_REMOTE_WRITE, r));
    ASSERT_EQ(0, rrpc__rmt_rdma_region_bind(r, c.own->qp, 1));
    ibv_wc wc;
    ASSERT_EQ(IBV_WC_SUCCESS, PollOne(c.own->cq, &wc));
  }
};

Op *Add(std::deque<Op> &ops, rrpc__rmt_opq *q, int kind, Local &l, uint64_t loff, uint64_t raddr,
        uint32_t rkey, uint64_t len, int notify = 0, uint32_t imm = 0) {
  ops.emplace_back();
  Op *o = &ops.back();
  memset(&o->r, 0, sizeof(o->r));
  o->r.base.length = len;
  o->r.base.cb = OnDone;
  o->r.kind = kind;
  o->r.local = l.buf.data() + loff;
  o->r.lkey = l.mr->lkey;
  o->r.raddr = raddr;
  o->r.rkey = rkey;
  o->r.notify = notify;
  o->r.imm = imm;
  EXPECT_EQ(0, rrpc__rmt_opq_submit(q, &o->r.base));
  return o;
}

// Pump and reap the accessor's completions until the queue is empty (or
// 60 s). Returns the number of send completions reaped.
int RunAll(Conn &c, rrpc__rmt_opq *q) {
  int reaped = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (q->head && std::chrono::steady_clock::now() < end) {
    rrpc__rmt_rdma_pump(q, c.acc->qp);
    ibv_wc wc[16];
    int n = ibv_poll_cq(c.acc->cq, 16, wc);
    for (int i = 0; i < n; i++, reaped++) rrpc__rmt_rdma_on_wc(q, &wc[i]);
  }
  return reaped;
}

void PostRecvs(ibv_qp *qp, int n) {
  for (int i = 0; i < n; i++) {
    ibv_recv_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 1000 + i;
    ASSERT_EQ(0, ibv_post_recv(qp, &wr, &bad));
  }
}

TEST_F(RemotePost, AnySizeSplitsOneCompletionEachByteExactAndNotifiesInOrder) {
  Conn c;
  ASSERT_TRUE(c.Up(d));
  const size_t kRegion = 64 * kMiB;
  std::vector<uint8_t> region(kRegion);
  rrpc__rmt_rdma_region r;
  Bind(c, region, &r);
  Local l(d->pd, kRegion);
  ASSERT_NE(nullptr, l.mr);
  Fill(l.buf.data(), kRegion, 5);
  const uint64_t base = reinterpret_cast<uintptr_t>(region.data());
  PostRecvs(c.own->qp, 12);

  rrpc__rmt_opq q;
  ASSERT_EQ(0, rrpc__rmt_opq_init(&q, kMiB, 8));  // 1 MiB pieces, 8 in flight
  std::deque<Op> ops;
  // 64 MiB in one op (64 pieces), then 1 MiB ops, 0 B and the last byte.
  Add(ops, &q, RRPC_RMT_RDMA_WRITE, l, 0, base, r.rkey, kRegion, 1, 1000);
  for (uint32_t i = 0; i < 8; i++)
    Add(ops, &q, RRPC_RMT_RDMA_WRITE, l, i * kMiB, base + i * kMiB, r.rkey, kMiB, 1, i + 1);
  Add(ops, &q, RRPC_RMT_RDMA_WRITE, l, 0, base + kRegion, r.rkey, 0, 1, 9);
  Add(ops, &q, RRPC_RMT_RDMA_WRITE, l, kRegion - 1, base + kRegion - 1, r.rkey, 1, 1, 10);
  int reaped = RunAll(c, &q);
  EXPECT_EQ(64 + 8 + 1 + 1, reaped);
  for (size_t i = 0; i < ops.size(); i++) {
    EXPECT_EQ(1, ops[i].calls) << i;
    EXPECT_EQ(0, ops[i].status) << i;
    EXPECT_EQ(int(i), ops[i].order) << "completions in submission order";
  }
  ASSERT_EQ(0, memcmp(l.buf.data(), region.data(), kRegion)) << "64 MiB byte-exact";
  // The owner saw one notification per NOTIFY write, in order.
  std::vector<uint32_t> imms;
  for (int i = 0; i < 11; i++) {
    ibv_wc wc;
    ASSERT_EQ(IBV_WC_SUCCESS, PollOne(c.own->cq, &wc)) << i;
    EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
    imms.push_back(ntohl(wc.imm_data));
  }
  EXPECT_EQ((std::vector<uint32_t>{1000, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), imms);
  ibv_wc extra;
  EXPECT_EQ(0, ibv_poll_cq(c.own->cq, 1, &extra)) << "no notification twice";

  // READ it all back in one op.
  std::vector<uint8_t> want(l.buf);
  memset(l.buf.data(), 0, kRegion);
  ops.clear();
  Op *rd = Add(ops, &q, RRPC_RMT_RDMA_READ, l, 0, base, r.rkey, kRegion);
  EXPECT_EQ(64, RunAll(c, &q));
  EXPECT_EQ(1, rd->calls);
  EXPECT_EQ(0, rd->status);
  EXPECT_EQ(0, memcmp(want.data(), l.buf.data(), kRegion)) << "64 MiB read byte-exact";
  printf("REMOTE_POST 64 MiB + 8 x 1 MiB + 0 B + 1 B written (74 WRs, 10 ops), 11 notifications in order, "
         "64 MiB read back: byte-exact\n");
  rrpc__rmt_rdma_region_dereg(&r);
}

TEST_F(RemotePost, PeerKilledMidTransferEveryPendingOpCompletesOnceWithAnError) {
  Conn c;
  ASSERT_TRUE(c.Up(d, 1));  // one retry: the dead peer is noticed quickly
  const size_t kRegion = 8 * kMiB;
  std::vector<uint8_t> region(kRegion);
  rrpc__rmt_rdma_region r;
  Bind(c, region, &r);
  Local l(d->pd, kRegion);
  ASSERT_NE(nullptr, l.mr);
  const uint64_t base = reinterpret_cast<uintptr_t>(region.data());
  rrpc__rmt_opq q;
  ASSERT_EQ(0, rrpc__rmt_opq_init(&q, 64 * 1024, 4));
  std::deque<Op> ops;
  for (int i = 0; i < 16; i++)
    Add(ops, &q, RRPC_RMT_RDMA_WRITE, l, i * 512 * 1024ull, base + i * 512 * 1024ull, r.rkey, 512 * 1024);
  // Run until the first op completed, then the peer's QP dies.
  bool killed = false;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (q.head && std::chrono::steady_clock::now() < end) {
    rrpc__rmt_rdma_pump(&q, c.acc->qp);
    ibv_wc wc[16];
    int n = ibv_poll_cq(c.acc->cq, 16, wc);
    for (int i = 0; i < n; i++) rrpc__rmt_rdma_on_wc(&q, &wc[i]);
    if (!killed && ops[0].calls) {
      ibv_qp_attr a;
      memset(&a, 0, sizeof a);
      a.qp_state = IBV_QPS_ERR;
      ASSERT_EQ(0, ibv_modify_qp(c.own->qp, &a, IBV_QP_STATE));
      killed = true;
    }
  }
  ASSERT_TRUE(killed);
  int ok = 0, failed = 0;
  for (size_t i = 0; i < ops.size(); i++) {
    EXPECT_EQ(1, ops[i].calls) << i;
    if (ops[i].status == 0) ok++;
    else failed++;
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(failed, 1);
  EXPECT_EQ(16, ok + failed);
  EXPECT_EQ(0u, q.inflight);
  // Nothing completes twice, and nothing new is taken on the dead connection.
  ibv_wc wc;
  EXPECT_EQ(0, ibv_poll_cq(c.acc->cq, 1, &wc));
  for (size_t i = 0; i < ops.size(); i++) EXPECT_EQ(1, ops[i].calls) << i;
  Op late;
  memset(&late.r, 0, sizeof(late.r));
  late.r.base.length = 1;
  late.r.base.cb = OnDone;
  EXPECT_NE(0, rrpc__rmt_opq_submit(&q, &late.r.base));
  int first_err = 0;
  for (auto &o : ops)
    if (o.status) {
      first_err = o.status;
      break;
    }
  printf("REMOTE_POST peer killed after op 0: %d ok, %d failed once each (first error %s)\n", ok, failed,
         rrpc_err_name(first_err));
  rrpc__rmt_rdma_region_dereg(&r);
}

}  // namespace
