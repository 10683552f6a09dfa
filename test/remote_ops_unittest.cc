// remote_ops_unittest.cc - the queue of one-sided operations
// (src/rrpc/remote/ops.h): splitting to the piece limit, the send-queue
// bound, exactly one completion per op in submission order, and a
// connection that dies with pieces posted (flushed or abandoned).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

extern "C" {
#include "rrpc/remote/ops.h"
}

namespace {

struct Done {
  std::vector<std::pair<int, int>> calls;  // (op index, status)
};

struct Op {
  rrpc__rmt_op op;
  int index;
  Done *done;
};

void OnDone(rrpc__rmt_op *op, int status) {
  Op *o = reinterpret_cast<Op *>(op);  // op is the first member
  o->done->calls.push_back({o->index, status});
}

struct Fixture {
  rrpc__rmt_opq q;
  Done done;
  std::deque<Op> ops;
  Fixture(uint32_t piece, uint32_t inflight) { EXPECT_EQ(0, rrpc__rmt_opq_init(&q, piece, inflight)); }
  Op *Submit(uint64_t len) {
    ops.emplace_back();
    Op *o = &ops.back();
    memset(&o->op, 0, sizeof(o->op));
    o->op.length = len;
    o->op.cb = OnDone;
    o->index = int(ops.size()) - 1;
    o->done = &done;
    EXPECT_EQ(0, rrpc__rmt_opq_submit(&q, &o->op));
    return o;
  }
  std::vector<rrpc__rmt_piece> Drain() {
    std::vector<rrpc__rmt_piece> v;
    rrpc__rmt_piece p;
    while (rrpc__rmt_opq_next(&q, &p) == 1) v.push_back(p);
    return v;
  }
};

TEST(RemoteOps, SplitsToThePieceLimitCoveringEveryByteOnce) {
  const uint64_t sizes[] = {0, 1, 4096, 1 << 20, 64ull << 20, (64ull << 20) + 1};
  for (uint64_t size : sizes) {
    Fixture f(1 << 20, 1000);
    Op *o = f.Submit(size);
    auto pieces = f.Drain();
    uint64_t want_n = size == 0 ? 1 : (size + (1 << 20) - 1) >> 20;
    ASSERT_EQ(want_n, pieces.size()) << size;
    uint64_t at = 0;
    for (size_t i = 0; i < pieces.size(); i++) {
      EXPECT_EQ(&o->op, pieces[i].op);
      EXPECT_EQ(at, pieces[i].offset);
      EXPECT_LE(pieces[i].length, 1u << 20);
      EXPECT_EQ(i + 1 == pieces.size(), bool(pieces[i].last));
      at += pieces[i].length;
    }
    EXPECT_EQ(size, at);
    for (size_t i = 0; i < pieces.size(); i++) {
      EXPECT_TRUE(f.done.calls.empty()) << "completed before its last piece";
      rrpc__rmt_opq_piece_done(&f.q, pieces[i].op, 0);
    }
    ASSERT_EQ(1u, f.done.calls.size()) << size;
    EXPECT_EQ(0, f.done.calls[0].second);
    EXPECT_EQ(0u, f.q.inflight);
  }
}

TEST(RemoteOps, InflightBoundAndOrderAcrossOps) {
  Fixture f(100, 3);
  for (int i = 0; i < 4; i++) f.Submit(250);  // 3 pieces each
  std::vector<rrpc__rmt_piece> posted;
  int rounds = 0;
  while (f.done.calls.size() < 4 && rounds++ < 100) {
    auto v = f.Drain();
    EXPECT_LE(f.q.inflight, 3u);
    posted.insert(posted.end(), v.begin(), v.end());
    ASSERT_FALSE(posted.empty());
    rrpc__rmt_opq_piece_done(&f.q, posted.front().op, 0);  // RC: in order
    posted.erase(posted.begin());
  }
  ASSERT_EQ(4u, f.done.calls.size());
  for (int i = 0; i < 4; i++) EXPECT_EQ((std::pair<int, int>{i, 0}), f.done.calls[i]);
  EXPECT_EQ(12u, f.q.stats.pieces);
  EXPECT_EQ(4u, f.q.stats.ops_ok);
}

// has_next answers what next would, without taking a piece: empty queue,
// a piece due, the in-flight bound reached, a bound freed, every byte
// handed out (the cursor still on a fully posted op), a failed queue.
TEST(RemoteOps, HasNextSaysWhetherNextWouldHandOutAPiece) {
  Fixture f(100, 2);
  EXPECT_EQ(0, rrpc__rmt_opq_has_next(&f.q));
  f.Submit(250);  // 3 pieces
  EXPECT_EQ(1, rrpc__rmt_opq_has_next(&f.q));
  EXPECT_EQ(0u, f.q.inflight) << "has_next took a piece";
  auto v = f.Drain();
  ASSERT_EQ(2u, v.size());
  EXPECT_EQ(0, rrpc__rmt_opq_has_next(&f.q)) << "the in-flight bound is reached";
  rrpc__rmt_opq_piece_done(&f.q, v[0].op, 0);
  EXPECT_EQ(1, rrpc__rmt_opq_has_next(&f.q));
  auto w = f.Drain();
  ASSERT_EQ(1u, w.size());
  rrpc__rmt_opq_piece_done(&f.q, v[1].op, 0);
  EXPECT_EQ(0, rrpc__rmt_opq_has_next(&f.q)) << "every byte was handed out";
  f.Submit(10);
  EXPECT_EQ(1, rrpc__rmt_opq_has_next(&f.q)) << "behind a fully posted op";
  rrpc__rmt_opq_fail(&f.q, -ECONNRESET);
  EXPECT_EQ(0, rrpc__rmt_opq_has_next(&f.q)) << "failed";
  rrpc__rmt_piece p;
  EXPECT_EQ(0, rrpc__rmt_opq_next(&f.q, &p));
  rrpc__rmt_opq_piece_done(&f.q, w[0].op, 0);
  rrpc__rmt_opq_abandon(&f.q);
}

TEST(RemoteOps, ErrorOnOnePieceFailsItsOpOnceAndStopsItsPosting) {
  Fixture f(10, 2);
  Op *a = f.Submit(50);
  Op *b = f.Submit(5);
  auto v = f.Drain();
  ASSERT_EQ(2u, v.size());
  rrpc__rmt_opq_piece_done(&f.q, &a->op, -EIO);
  EXPECT_TRUE(f.done.calls.empty()) << "a's second piece is still posted";
  rrpc__rmt_opq_piece_done(&f.q, &a->op, -EIO);  // flushed
  ASSERT_EQ(1u, f.done.calls.size());
  EXPECT_EQ((std::pair<int, int>{0, -EIO}), f.done.calls[0]);
  // a's other 30 bytes were never posted; b goes on.
  v = f.Drain();
  ASSERT_EQ(1u, v.size());
  EXPECT_EQ(&b->op, v[0].op);
  rrpc__rmt_opq_piece_done(&f.q, &b->op, 0);
  ASSERT_EQ(2u, f.done.calls.size());
  EXPECT_EQ((std::pair<int, int>{1, 0}), f.done.calls[1]);
}

TEST(RemoteOps, ConnectionDiesMidTransferEveryOpCompletesOnceWithAnError) {
  // Flushed: the posted pieces still complete (with errors).
  Fixture f(10, 4);
  for (int i = 0; i < 5; i++) f.Submit(25);
  auto v = f.Drain();
  ASSERT_EQ(4u, v.size());
  rrpc__rmt_opq_piece_done(&f.q, v[0].op, 0);
  rrpc__rmt_opq_fail(&f.q, -ECONNRESET);
  EXPECT_TRUE(f.done.calls.empty()) << "op 0 still has posted pieces";
  EXPECT_EQ(-EINVAL, rrpc__rmt_opq_submit(&f.q, &f.ops[1].op)) << "already queued";
  rrpc__rmt_op late;
  memset(&late, 0, sizeof(late));
  late.length = 1;
  late.cb = OnDone;
  EXPECT_EQ(-ECONNRESET, rrpc__rmt_opq_submit(&f.q, &late)) << "no new work after failure";
  EXPECT_EQ(0, rrpc__rmt_opq_next(&f.q, &v[0]));
  for (size_t i = 1; i < v.size(); i++) rrpc__rmt_opq_piece_done(&f.q, v[i].op, -EIO);
  ASSERT_EQ(5u, f.done.calls.size());
  for (int i = 0; i < 5; i++) {
    EXPECT_EQ(i, f.done.calls[i].first);
    EXPECT_NE(0, f.done.calls[i].second);
  }
  // Abandoned: the QP went, no completion will come.
  Fixture g(10, 4);
  for (int i = 0; i < 3; i++) g.Submit(30);
  ASSERT_EQ(4u, g.Drain().size());
  rrpc__rmt_opq_abandon(&g.q);
  ASSERT_EQ(3u, g.done.calls.size());
  for (int i = 0; i < 3; i++) EXPECT_EQ((std::pair<int, int>{i, -ECANCELED}), g.done.calls[i]);
  EXPECT_EQ(0u, g.q.inflight);
  EXPECT_EQ(3u, g.q.stats.ops_failed);
}

struct Resubmit {
  rrpc__rmt_op op;
  rrpc__rmt_opq *q;
  int left, calls;
};

void ResubmitCb(rrpc__rmt_op *op, int status) {
  Resubmit *r = reinterpret_cast<Resubmit *>(op);
  r->calls++;
  if (status == 0 && --r->left > 0) {
    memset(&r->op, 0, sizeof(r->op));
    r->op.length = 7;
    r->op.cb = ResubmitCb;
    EXPECT_EQ(0, rrpc__rmt_opq_submit(r->q, &r->op));
  }
}

TEST(RemoteOps, CallbackMayResubmitItsOp) {
  rrpc__rmt_opq q;
  ASSERT_EQ(0, rrpc__rmt_opq_init(&q, 4, 8));
  Resubmit r;
  memset(&r, 0, sizeof(r));
  r.q = &q;
  r.left = 3;
  r.op.length = 7;
  r.op.cb = ResubmitCb;
  ASSERT_EQ(0, rrpc__rmt_opq_submit(&q, &r.op));
  for (int guard = 0; guard < 20; guard++) {
    rrpc__rmt_piece p;
    if (rrpc__rmt_opq_next(&q, &p) != 1) break;
    rrpc__rmt_opq_piece_done(&q, p.op, 0);
  }
  EXPECT_EQ(3, r.calls);
  EXPECT_EQ(nullptr, q.head);
  EXPECT_EQ(-EINVAL, rrpc__rmt_opq_init(&q, 0, 1));
  rrpc__rmt_op bad;
  memset(&bad, 0, sizeof(bad));
  EXPECT_EQ(-EINVAL, rrpc__rmt_opq_submit(&q, &bad)) << "no callback";
}

}  // namespace
