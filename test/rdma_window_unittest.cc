// rdma_window_unittest.cc - window/credit accounting and receive-ring reclaim
// of the RDMA data path (transport/rdma/wire/window.h, rx_reclaim.h): every
// rule on its own, the 127-credit and 16 MiB-1 caps, protocol violations, and
// a randomized model of two endpoints exchanging messages through small rings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "rrpc/errors.h"
#include "transport/rdma/wire/rx_reclaim.h"
#include "transport/rdma/wire/window.h"
}

namespace {

uint32_t Imm(int req, uint32_t credits, uint32_t advance) {
  rrpc__imm a;
  a.ack_req = static_cast<uint8_t>(req);
  a.credits = static_cast<uint8_t>(credits);
  a.advance = advance;
  return rrpc__imm_pack(&a);
}

// ---- immediate -------------------------------------------------------------

TEST(Imm, BitLayout) {
  EXPECT_EQ(0u, Imm(0, 0, 0));
  EXPECT_EQ(0x80000000u, Imm(1, 0, 0));
  EXPECT_EQ(0x01000000u, Imm(0, 1, 0));
  EXPECT_EQ(0x7f000000u, Imm(0, 127, 0));
  EXPECT_EQ(0x00000001u, Imm(0, 0, 1));
  EXPECT_EQ(0x00ffffffu, Imm(0, 0, 0xffffff));
  EXPECT_EQ(0xffffffffu, Imm(1, 127, 0xffffff));
  EXPECT_EQ(0x85123456u, Imm(1, 5, 0x123456));
  rrpc__imm a = rrpc__imm_unpack(0x85123456u);
  EXPECT_EQ(1, a.ack_req);
  EXPECT_EQ(5, a.credits);
  EXPECT_EQ(0x123456u, a.advance);
  // Every value unpacks and packs back to itself.
  std::mt19937 rng(1);
  for (int i = 0; i < 100000; i++) {
    uint32_t v = rng();
    rrpc__imm u = rrpc__imm_unpack(v);
    ASSERT_EQ(v, rrpc__imm_pack(&u));
  }
}

// ---- sender ----------------------------------------------------------------

TEST(TxWindow, Init) {
  rrpc__tx_window tx;
  EXPECT_EQ(-EINVAL, rrpc__tx_window_init(&tx, 0, 16, 1));
  EXPECT_EQ(-EINVAL, rrpc__tx_window_init(&tx, 1000, 1, 1));
  EXPECT_EQ(-EINVAL, rrpc__tx_window_init(&tx, 1000, 2, 1));  // 1 left < 2
  EXPECT_EQ(0, rrpc__tx_window_init(&tx, 1000, 3, 1));
  EXPECT_EQ(-EINVAL, rrpc__tx_window_init(&tx, 1000, 12, 10));  // 2 < 12/4
  EXPECT_EQ(0, rrpc__tx_window_init(&tx, 1000, 16, 12));        // 4 >= 4
  ASSERT_EQ(0, rrpc__tx_window_init(&tx, 1000, 16, 0));
  EXPECT_EQ(1u, tx.reserve);  // 0 = default
  EXPECT_EQ(16u, tx.credits);
  EXPECT_EQ(1000u, rrpc__tx_window_free(&tx));
}

TEST(TxWindow, PlanAndCommitOneSegment) {
  rrpc__tx_window tx;
  ASSERT_EQ(0, rrpc__tx_window_init(&tx, 1000, 16, 1));
  rrpc__tx_plan p;
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 0, &p));
  EXPECT_EQ(0u, p.nmsg);
  EXPECT_EQ(0, rrpc__tx_window_commit(&tx, &p));  // empty plan: no-op
  EXPECT_EQ(16u, tx.credits);

  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 300, &p));
  ASSERT_EQ(1u, p.nseg);
  EXPECT_EQ(0u, p.seg[0].off);
  EXPECT_EQ(300u, p.seg[0].len);
  EXPECT_EQ(300u, p.len);
  EXPECT_EQ(1u, p.nmsg);
  ASSERT_EQ(0, rrpc__tx_window_commit(&tx, &p));
  EXPECT_EQ(300u, tx.prod);
  EXPECT_EQ(15u, tx.credits);
  EXPECT_EQ(700u, rrpc__tx_window_free(&tx));
  // The same plan again no longer fits.
  EXPECT_EQ(-EINVAL, rrpc__tx_window_commit(&tx, &p));
  EXPECT_EQ(300u, tx.prod);

  // More than the free space: exactly up to the ring's end, one segment.
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 5000, &p));
  ASSERT_EQ(1u, p.nseg);
  EXPECT_EQ(300u, p.seg[0].off);
  EXPECT_EQ(700u, p.seg[0].len);
  ASSERT_EQ(0, rrpc__tx_window_commit(&tx, &p));
  EXPECT_EQ(0u, rrpc__tx_window_free(&tx));
  ASSERT_EQ(-EAGAIN, rrpc__tx_window_plan(&tx, 1, &p));
  EXPECT_EQ(RRPC_TX_BLOCKED_SPACE, p.blocked);
  EXPECT_EQ(0u, p.nmsg);
}

TEST(TxWindow, WrapTakesTwoSegmentsAndTwoCredits) {
  rrpc__tx_window tx;
  ASSERT_EQ(0, rrpc__tx_window_init(&tx, 1000, 16, 1));
  tx.prod = 900;
  tx.peer_cons = 500;  // free: [900, 1000) and [0, 500)
  rrpc__tx_plan p;
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 400, &p));
  ASSERT_EQ(2u, p.nseg);
  EXPECT_EQ(900u, p.seg[0].off);
  EXPECT_EQ(100u, p.seg[0].len);
  EXPECT_EQ(0u, p.seg[1].off);
  EXPECT_EQ(300u, p.seg[1].len);
  EXPECT_EQ(400u, p.len);
  EXPECT_EQ(2u, p.nmsg);
  ASSERT_EQ(0, rrpc__tx_window_commit(&tx, &p));
  EXPECT_EQ(1300u, tx.prod);
  EXPECT_EQ(14u, tx.credits);

  // Everything free wraps too: [300, 1000) + [0, 300) with the whole ring.
  tx.peer_cons = 1300;
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 1u << 20, &p));
  ASSERT_EQ(2u, p.nseg);
  EXPECT_EQ(300u, p.seg[0].off);
  EXPECT_EQ(700u, p.seg[0].len);
  EXPECT_EQ(0u, p.seg[1].off);
  EXPECT_EQ(300u, p.seg[1].len);
  EXPECT_EQ(1000u, p.len);

  // Only one credit above the reserve: the first segment alone.
  tx.credits = tx.reserve + 1;
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 900, &p));
  ASSERT_EQ(1u, p.nseg);
  EXPECT_EQ(300u, p.seg[0].off);
  EXPECT_EQ(700u, p.seg[0].len);
  EXPECT_EQ(700u, p.len);
  ASSERT_EQ(0, rrpc__tx_window_commit(&tx, &p));
  EXPECT_EQ(tx.reserve, tx.credits);
  // Next plan starts at the ring's start, but no data credit is left.
  ASSERT_EQ(-EAGAIN, rrpc__tx_window_plan(&tx, 400, &p));
  EXPECT_EQ(RRPC_TX_BLOCKED_CREDITS, p.blocked);
  tx.credits += 3;
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 400, &p));
  ASSERT_EQ(1u, p.nseg);
  EXPECT_EQ(0u, p.seg[0].off);
  EXPECT_EQ(300u, p.seg[0].len);  // free space is what is left
}

TEST(TxWindow, CommitRejectsForgedPlans) {
  rrpc__tx_window tx;
  ASSERT_EQ(0, rrpc__tx_window_init(&tx, 1000, 16, 2));
  tx.prod = 900;
  tx.peer_cons = 500;
  rrpc__tx_plan good;
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 400, &good));
  const rrpc__tx_window before = tx;
  auto rejected = [&](rrpc__tx_plan p) {
    EXPECT_EQ(-EINVAL, rrpc__tx_window_commit(&tx, &p));
    EXPECT_EQ(before.prod, tx.prod);
    EXPECT_EQ(before.credits, tx.credits);
  };
  rrpc__tx_plan p = good;
  p.seg[0].off = 0;
  rejected(p);
  p = good;
  p.seg[0].len = 99;  // the two segments are no longer contiguous
  p.len = 399;
  rejected(p);
  p = good;
  p.seg[1].len = 501;  // beyond the free space
  p.len = 601;
  rejected(p);
  p = good;
  p.len = 7;
  rejected(p);
  p = good;
  p.nmsg = 1;
  rejected(p);
  p = good;
  p.nseg = 3;
  p.nmsg = 3;
  rejected(p);
  p = good;
  p.nmsg = 0;
  rejected(p);
  p = good;
  p.seg[1].len = 0;
  p.len = 100;
  rejected(p);
  // Data may not take the reserve.
  tx.credits = 3;  // reserve 2: one data credit, this plan wants two
  EXPECT_EQ(-EINVAL, rrpc__tx_window_commit(&tx, &good));
  tx.credits = before.credits;
  // A pure-ACK plan needs a credit and carries no bytes.
  rrpc__tx_plan ack;
  ASSERT_EQ(0, rrpc__tx_window_plan_ack(&tx, 0, &ack));
  ack.len = 1;
  EXPECT_EQ(-EINVAL, rrpc__tx_window_commit(&tx, &ack));
  ASSERT_EQ(0, rrpc__tx_window_commit(&tx, &good));
}

TEST(TxWindow, ReserveAndLastCreditRules) {
  rrpc__tx_window tx;
  ASSERT_EQ(0, rrpc__tx_window_init(&tx, 1000, 8, 2));
  rrpc__tx_plan p;
  // Data uses credits down to the reserve, never into it.
  int sent = 0;
  while (rrpc__tx_window_plan(&tx, 10, &p) == 0) {
    ASSERT_EQ(0, rrpc__tx_window_commit(&tx, &p));
    sent++;
  }
  EXPECT_EQ(6, sent);
  EXPECT_EQ(2u, tx.credits);
  EXPECT_EQ(RRPC_TX_BLOCKED_CREDITS, p.blocked);
  // Pure ACKs may use the reserve...
  EXPECT_TRUE(rrpc__tx_window_can_ack(&tx, 0));  // the predicate says what plan_ack does
  ASSERT_EQ(0, rrpc__tx_window_plan_ack(&tx, 0, &p));
  EXPECT_EQ(0u, p.nseg);
  EXPECT_EQ(1u, p.nmsg);
  ASSERT_EQ(0, rrpc__tx_window_commit(&tx, &p));
  EXPECT_EQ(1u, tx.credits);
  // ...but the last credit only if the ACK returns credits.
  EXPECT_FALSE(rrpc__tx_window_can_ack(&tx, 0));
  EXPECT_EQ(-EAGAIN, rrpc__tx_window_plan_ack(&tx, 0, &p));
  EXPECT_EQ(RRPC_TX_BLOCKED_CREDITS, p.blocked);
  EXPECT_TRUE(rrpc__tx_window_can_ack(&tx, 1));
  ASSERT_EQ(0, rrpc__tx_window_plan_ack(&tx, 1, &p));
  ASSERT_EQ(0, rrpc__tx_window_commit(&tx, &p));
  EXPECT_EQ(0u, tx.credits);
  EXPECT_FALSE(rrpc__tx_window_can_ack(&tx, 1));
  EXPECT_FALSE(rrpc__tx_window_can_ack(&tx, 0));
  EXPECT_EQ(-EAGAIN, rrpc__tx_window_plan_ack(&tx, 1, &p));
  rrpc__tx_plan forged = p;
  forged.nmsg = 1;
  forged.blocked = 0;
  EXPECT_EQ(-EINVAL, rrpc__tx_window_commit(&tx, &forged));
}

TEST(TxWindow, OnAckAppliesAndRejectsViolations) {
  rrpc__tx_window tx;
  ASSERT_EQ(0, rrpc__tx_window_init(&tx, 1000, 16, 1));
  rrpc__tx_plan p;
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 600, &p));
  ASSERT_EQ(0, rrpc__tx_window_commit(&tx, &p));
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 300, &p));
  ASSERT_EQ(0, rrpc__tx_window_commit(&tx, &p));
  EXPECT_EQ(14u, tx.credits);
  EXPECT_EQ(100u, rrpc__tx_window_free(&tx));

  // Advance beyond the bytes written: violation, nothing applied.
  EXPECT_EQ(-RRPC_EPARSE, rrpc__tx_window_on_ack(&tx, Imm(0, 1, 901)));
  EXPECT_EQ(0u, tx.peer_cons);
  EXPECT_EQ(14u, tx.credits);
  // Credits beyond the depth: violation.
  EXPECT_EQ(-RRPC_EPARSE, rrpc__tx_window_on_ack(&tx, Imm(0, 3, 0)));
  EXPECT_EQ(14u, tx.credits);
  // Valid ACKs.
  ASSERT_EQ(0, rrpc__tx_window_on_ack(&tx, Imm(0, 2, 500)));
  EXPECT_EQ(500u, tx.peer_cons);
  EXPECT_EQ(16u, tx.credits);
  EXPECT_EQ(600u, rrpc__tx_window_free(&tx));
  ASSERT_EQ(0, rrpc__tx_window_on_ack(&tx, Imm(1, 0, 400)));  // bit 31 is not ours
  EXPECT_EQ(900u, tx.peer_cons);
  EXPECT_EQ(1000u, rrpc__tx_window_free(&tx));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__tx_window_on_ack(&tx, Imm(0, 0, 1)));
  ASSERT_EQ(0, rrpc__tx_window_on_ack(&tx, 0));  // an empty ACK is fine
}

TEST(TxWindow, SolicitedAndAckRequest) {
  rrpc__tx_window tx;
  ASSERT_EQ(0, rrpc__tx_window_init(&tx, 800, 16, 1));
  rrpc__tx_plan p;
  // Plenty of room and credits: only end-of-batch or a peer request solicit.
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 100, &p));
  EXPECT_FALSE(rrpc__tx_window_want_solicited(&tx, &p, 0, 0));
  EXPECT_TRUE(rrpc__tx_window_want_solicited(&tx, &p, 1, 0));
  EXPECT_TRUE(rrpc__tx_window_want_solicited(&tx, &p, 0, 1));
  EXPECT_FALSE(rrpc__tx_window_ack_request(&tx, &p));

  // Free space after the message: 100 = ring/8 is not below; 99 is.
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 700, &p));
  EXPECT_FALSE(rrpc__tx_window_want_solicited(&tx, &p, 0, 0));
  EXPECT_FALSE(rrpc__tx_window_ack_request(&tx, &p));
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 701, &p));
  EXPECT_TRUE(rrpc__tx_window_want_solicited(&tx, &p, 0, 0));
  EXPECT_TRUE(rrpc__tx_window_ack_request(&tx, &p));

  // Credits after the message: reserve + 2 = 3 is fine, reserve + 1 is not.
  tx.credits = 4;
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 10, &p));
  EXPECT_FALSE(rrpc__tx_window_want_solicited(&tx, &p, 0, 0));
  EXPECT_FALSE(rrpc__tx_window_ack_request(&tx, &p));
  tx.credits = 3;
  ASSERT_EQ(0, rrpc__tx_window_plan(&tx, 10, &p));
  EXPECT_TRUE(rrpc__tx_window_want_solicited(&tx, &p, 0, 0));
  EXPECT_TRUE(rrpc__tx_window_ack_request(&tx, &p));

  // A pure ACK is always solicited and never requests an ACK.
  tx.credits = 16;
  ASSERT_EQ(0, rrpc__tx_window_plan_ack(&tx, 1, &p));
  EXPECT_TRUE(rrpc__tx_window_want_solicited(&tx, &p, 0, 0));
  EXPECT_FALSE(rrpc__tx_window_ack_request(&tx, &p));
}

// ---- receiver --------------------------------------------------------------

TEST(RxWindow, RecvValidatesSpaceAndCredits) {
  rrpc__rx_window rx;
  EXPECT_EQ(-EINVAL, rrpc__rx_window_init(&rx, 0, 4));
  EXPECT_EQ(-EINVAL, rrpc__rx_window_init(&rx, 1000, 0));
  ASSERT_EQ(0, rrpc__rx_window_init(&rx, 1000, 4));
  ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, 600));
  ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, 0));  // a SEND: no ring bytes
  // 401 more would overrun the ring.
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rx_window_on_recv(&rx, 401));
  EXPECT_EQ(600u, rx.prod);
  EXPECT_EQ(2u, rx.held);
  ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, 400));
  EXPECT_EQ(1000u, rx.prod);
  ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, 0));
  // Four receives posted, four used: the peer had no credit for a fifth.
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rx_window_on_recv(&rx, 0));
  EXPECT_EQ(4u, rx.held);
  // Reposting gives receives back but they are owed, not yet the peer's.
  EXPECT_EQ(-EINVAL, rrpc__rx_window_on_repost(&rx, 5));
  ASSERT_EQ(0, rrpc__rx_window_on_repost(&rx, 4));
  EXPECT_EQ(4u, rx.owed);
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rx_window_on_recv(&rx, 0));
  (void)rrpc__rx_window_take_ack(&rx, 0);
  EXPECT_EQ(0u, rx.owed);
  // Space comes back only with releases.
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rx_window_on_recv(&rx, 1));
  EXPECT_EQ(-EINVAL, rrpc__rx_window_on_release(&rx, 1001));
  ASSERT_EQ(0, rrpc__rx_window_on_release(&rx, 1));
  ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, 1));
}

TEST(RxWindow, AckDueThresholds) {
  rrpc__rx_window rx;
  ASSERT_EQ(0, rrpc__rx_window_init(&rx, 4000, 32));  // thresholds: 8 credits, 1000 B
  EXPECT_FALSE(rrpc__rx_window_ack_due(&rx, 0));
  EXPECT_FALSE(rrpc__rx_window_ack_due(&rx, 1));  // requested, but nothing owed
  EXPECT_FALSE(rrpc__rx_window_owes(&rx));
  for (int i = 0; i < 7; i++) ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, 100));
  EXPECT_FALSE(rrpc__rx_window_ack_due(&rx, 1));  // completed is not reposted
  ASSERT_EQ(0, rrpc__rx_window_on_repost(&rx, 7));
  EXPECT_FALSE(rrpc__rx_window_ack_due(&rx, 0));
  EXPECT_TRUE(rrpc__rx_window_ack_due(&rx, 1));
  ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, 100));
  ASSERT_EQ(0, rrpc__rx_window_on_repost(&rx, 1));
  EXPECT_TRUE(rrpc__rx_window_ack_due(&rx, 0));  // 8 owed
  uint32_t imm = rrpc__rx_window_take_ack(&rx, 0);
  EXPECT_EQ(Imm(0, 8, 0), imm);
  EXPECT_FALSE(rrpc__rx_window_ack_due(&rx, 1));

  ASSERT_EQ(0, rrpc__rx_window_on_release(&rx, 799));
  EXPECT_FALSE(rrpc__rx_window_ack_due(&rx, 0));
  EXPECT_TRUE(rrpc__rx_window_ack_due(&rx, 1));
  EXPECT_TRUE(rrpc__rx_window_owes(&rx));
  EXPECT_FALSE(rrpc__rx_window_owes_credits(&rx));  // bytes only
  for (int i = 0; i < 3; i++) ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, 100));
  ASSERT_EQ(0, rrpc__rx_window_on_release(&rx, 200));
  EXPECT_FALSE(rrpc__rx_window_ack_due(&rx, 0));  // 999 bytes
  ASSERT_EQ(0, rrpc__rx_window_on_release(&rx, 1));
  EXPECT_TRUE(rrpc__rx_window_ack_due(&rx, 0));  // 1000 = ring / 4
  imm = rrpc__rx_window_take_ack(&rx, 1);
  EXPECT_EQ(Imm(1, 0, 1000), imm);
  EXPECT_EQ(1000u, rx.acked);
  EXPECT_FALSE(rrpc__rx_window_owes(&rx));

  // Small depths keep a floor of 2 credits, so one pure ACK received (one
  // credit owed) never triggers another.
  ASSERT_EQ(0, rrpc__rx_window_init(&rx, 4000, 4));
  ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, 0));
  ASSERT_EQ(0, rrpc__rx_window_on_repost(&rx, 1));
  EXPECT_FALSE(rrpc__rx_window_ack_due(&rx, 0));
  ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, 0));
  ASSERT_EQ(0, rrpc__rx_window_on_repost(&rx, 1));
  EXPECT_TRUE(rrpc__rx_window_ack_due(&rx, 0));
}

// Owed amounts above the immediate's fields go out over several messages,
// and the sender applies them to exactly the totals.
TEST(RxWindow, TakeAckCapsAt127CreditsAnd16MiB) {
  const uint32_t ring = 64u << 20, depth = 512;
  rrpc__rx_window rx;
  rrpc__tx_window tx;  // the peer's view of this ring
  ASSERT_EQ(0, rrpc__rx_window_init(&rx, ring, depth));
  ASSERT_EQ(0, rrpc__tx_window_init(&tx, ring, depth, 1));
  const uint64_t total = 40u << 20;
  for (int i = 0; i < 300; i++) {
    uint32_t n = i < 10 ? static_cast<uint32_t>(total / 10) : 0;
    ASSERT_EQ(0, rrpc__rx_window_on_recv(&rx, n));
  }
  tx.prod = total;  // what the peer wrote, with 300 messages
  tx.credits = depth - 300;
  ASSERT_EQ(0, rrpc__rx_window_on_repost(&rx, 300));
  ASSERT_EQ(0, rrpc__rx_window_on_release(&rx, total));

  std::vector<rrpc__imm> acks;
  while (rrpc__rx_window_owes(&rx)) {
    uint32_t imm = rrpc__rx_window_take_ack(&rx, 0);
    acks.push_back(rrpc__imm_unpack(imm));
    ASSERT_EQ(0, rrpc__tx_window_on_ack(&tx, imm));
    ASSERT_LT(acks.size(), 10u);
  }
  ASSERT_EQ(3u, acks.size());
  EXPECT_EQ(127, acks[0].credits);
  EXPECT_EQ(127, acks[1].credits);
  EXPECT_EQ(46, acks[2].credits);
  EXPECT_EQ(0xffffffu, acks[0].advance);
  EXPECT_EQ(0xffffffu, acks[1].advance);
  EXPECT_EQ(total - 2 * 0xffffffu, acks[2].advance);
  EXPECT_EQ(depth, tx.credits);
  EXPECT_EQ(total, tx.peer_cons);
  EXPECT_EQ(0u, rx.owed);
  EXPECT_EQ(total, rx.acked);
  // Nothing owed: the immediate is empty.
  EXPECT_EQ(0u, rrpc__rx_window_take_ack(&rx, 0));
}

// ---- receive-ring reclaim ------------------------------------------------

struct Reclaim {
  rrpc__rx_reclaim r;
  explicit Reclaim(uint64_t start = 0, uint32_t max = 0) { rrpc__rx_reclaim_init(&r, start, max); }
  ~Reclaim() { rrpc__rx_reclaim_destroy(&r); }
  int Release(uint64_t s, uint64_t e, uint64_t* adv) { return rrpc__rx_reclaim_release(&r, s, e, adv); }
  std::string Ranges() const {
    std::string out;
    for (uint32_t i = 0; i < r.n; i++)
      out += "[" + std::to_string(r.ranges[i].start) + "," + std::to_string(r.ranges[i].end) + ")";
    return out;
  }
};

TEST(RxReclaim, InOrderAndOutOfOrder) {
  Reclaim rc(1000);
  uint64_t adv = 99;
  ASSERT_EQ(0, rc.Release(1000, 1010, &adv));
  EXPECT_EQ(10u, adv);
  EXPECT_EQ(1010u, rc.r.cons);
  ASSERT_EQ(0, rc.Release(1020, 1030, &adv));
  EXPECT_EQ(0u, adv);
  ASSERT_EQ(0, rc.Release(1040, 1050, &adv));
  EXPECT_EQ("[1020,1030)[1040,1050)", rc.Ranges());
  ASSERT_EQ(0, rc.Release(1030, 1040, &adv));  // touches both neighbours
  EXPECT_EQ(0u, adv);
  EXPECT_EQ("[1020,1050)", rc.Ranges());
  ASSERT_EQ(0, rc.Release(1060, 1070, &adv));
  ASSERT_EQ(0, rc.Release(1055, 1060, &adv));  // touches the next one
  ASSERT_EQ(0, rc.Release(1050, 1052, &adv));  // touches the previous one
  EXPECT_EQ("[1020,1052)[1055,1070)", rc.Ranges());
  ASSERT_EQ(0, rc.Release(1010, 1020, &adv));  // the gap at the cursor
  EXPECT_EQ(42u, adv);
  EXPECT_EQ(1052u, rc.r.cons);
  EXPECT_EQ("[1055,1070)", rc.Ranges());
  ASSERT_EQ(0, rc.Release(1052, 1055, &adv));
  EXPECT_EQ(18u, adv);
  EXPECT_EQ(1070u, rc.r.cons);
  EXPECT_EQ(0u, rc.r.n);
}

TEST(RxReclaim, RejectsBadRangesUnchanged) {
  Reclaim rc;
  uint64_t adv;
  ASSERT_EQ(0, rc.Release(0, 10, &adv));
  ASSERT_EQ(0, rc.Release(20, 30, &adv));
  ASSERT_EQ(0, rc.Release(50, 60, &adv));
  const std::string before = rc.Ranges();
  struct {
    uint64_t s, e;
  } bad[] = {{5, 5},   {7, 3},   {5, 12},  {0, 10},  {25, 28}, {15, 21},
             {29, 35}, {15, 35}, {20, 30}, {45, 51}, {55, 70}, {40, 70}};
  for (const auto& b : bad) {
    EXPECT_EQ(-EINVAL, rc.Release(b.s, b.e, &adv)) << b.s << "," << b.e;
    EXPECT_EQ(0u, adv);
    EXPECT_EQ(before, rc.Ranges());
    EXPECT_EQ(10u, rc.r.cons);
  }
}

TEST(RxReclaim, BoundedGrowth) {
  Reclaim rc(0, 2);
  uint64_t adv;
  ASSERT_EQ(0, rc.Release(10, 20, &adv));
  ASSERT_EQ(0, rc.Release(30, 40, &adv));
  EXPECT_EQ(-ENOMEM, rc.Release(50, 60, &adv));
  EXPECT_EQ("[10,20)[30,40)", rc.Ranges());
  // Merging needs no new slot, so it still works at the bound.
  ASSERT_EQ(0, rc.Release(40, 45, &adv));
  ASSERT_EQ(0, rc.Release(20, 30, &adv));
  EXPECT_EQ("[10,45)", rc.Ranges());
  ASSERT_EQ(0, rc.Release(50, 60, &adv));
  ASSERT_EQ(0, rc.Release(0, 10, &adv));
  EXPECT_EQ(45u, adv);
  EXPECT_EQ(2u, rc.r.cap);
}

// Blocks of random sizes released in random order: the cursor always equals
// the released prefix, and the array never holds more ranges than blocks
// outstanding.
TEST(RxReclaim, RandomOrderMatchesNaiveModel) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; round++) {
    const int nblocks = 1 + static_cast<int>(rng() % 300);
    std::vector<std::pair<uint64_t, uint64_t>> blocks;
    uint64_t off = rng() % 100000;
    const uint64_t start = off;
    for (int i = 0; i < nblocks; i++) {
      uint64_t len = 1 + rng() % 5000;
      blocks.push_back({off, off + len});
      off += len;
    }
    std::vector<int> order(nblocks);
    for (int i = 0; i < nblocks; i++) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<bool> released(nblocks, false);
    Reclaim rc(start, static_cast<uint32_t>(nblocks));
    uint64_t cons = start;
    int outstanding = nblocks, prefix = 0;
    for (int k : order) {
      uint64_t adv;
      ASSERT_EQ(0, rc.Release(blocks[k].first, blocks[k].second, &adv));
      released[k] = true;
      outstanding--;
      while (prefix < nblocks && released[prefix]) prefix++;
      uint64_t want = prefix == 0 ? start : blocks[prefix - 1].second;
      ASSERT_EQ(want - cons, adv);
      cons = want;
      ASSERT_EQ(cons, rc.r.cons);
      ASSERT_LE(rc.r.n, static_cast<uint32_t>(outstanding));
      for (uint32_t i = 0; i + 1 < rc.r.n; i++) ASSERT_LT(rc.r.ranges[i].end, rc.r.ranges[i + 1].start);
      if (rc.r.n > 0) {
        ASSERT_GT(rc.r.ranges[0].start, rc.r.cons);
      }
    }
    EXPECT_EQ(off, rc.r.cons);
    EXPECT_EQ(0u, rc.r.n);
  }
}

// ---- model: two endpoints, small rings, random everything -----------------
//
// Each endpoint has a tx window (its view of the peer's ring), an rx window
// and a reclaim tracker for its own ring, the ring bytes themselves, an
// application send queue, and a completion queue. Messages travel in order
// per direction (RC). Data is written into the peer's ring when the write is
// POSTED (the most hostile timing), so an overrun would corrupt bytes the
// peer's application still holds; every block is checked against the stream
// pattern when handed out and again when released. In event mode an
// endpoint looks at its completions only after a solicited one arrived.

struct Msg {
  uint32_t len;  // ring bytes (0 for a pure ACK)
  uint32_t imm;
  bool solicited;
};

uint8_t Pattern(int dir, uint64_t s) {
  return static_cast<uint8_t>(s * 131 + static_cast<uint64_t>(dir) * 71 + (s >> 9));
}

struct Endpoint {
  int id = 0;
  rrpc__tx_window tx{};
  rrpc__rx_window rx{};
  rrpc__rx_reclaim rc{};
  std::vector<uint8_t> ring;  // my ring; the peer writes into it
  uint64_t pending = 0;       // application bytes queued to send
  std::deque<Msg> cq;         // delivered, not yet processed
  bool woken = false;
  bool event_mode = true;
  bool peer_req = false;  // the peer's last data message asked for an ACK
  std::vector<std::pair<uint64_t, uint64_t>> held;  // blocks handed to the app
};

struct Stats {
  uint64_t data_msgs = 0, acks = 0, solicited = 0, wakeups = 0, bytes = 0;
};

class Model {
 public:
  Model(uint64_t seed, uint32_t ring0, uint32_t ring1, uint32_t depth0, uint32_t depth1,
        uint32_t reserve, bool event0, bool event1)
      : rng_(seed) {
    uint32_t ring[2] = {ring0, ring1}, depth[2] = {depth0, depth1};
    bool ev[2] = {event0, event1};
    for (int i = 0; i < 2; i++) {
      Endpoint& e = ep_[i];
      e.id = i;
      e.ring.assign(ring[i], 0xee);
      e.event_mode = ev[i];
      EXPECT_EQ(0, rrpc__rx_window_init(&e.rx, ring[i], depth[i]));
      rrpc__rx_reclaim_init(&e.rc, 0, 0);
    }
    for (int i = 0; i < 2; i++)
      EXPECT_EQ(0, rrpc__tx_window_init(&ep_[i].tx, ring[1 - i], depth[1 - i], reserve));
  }
  ~Model() {
    for (Endpoint& e : ep_) rrpc__rx_reclaim_destroy(&e.rc);
  }

  uint64_t R(uint64_t n) { return rng_() % n; }

  // Posts up to max_msgs data plans as one batch (the last one is the end
  // of the batch). Returns the number of messages posted.
  int SendData(int i, int max_msgs) {
    Endpoint& e = ep_[i];
    Endpoint& p = ep_[1 - i];
    std::vector<rrpc__tx_plan> plans;
    rrpc__tx_window sim = e.tx;
    uint64_t left = e.pending;
    while (left > 0 && static_cast<int>(plans.size()) < max_msgs) {
      rrpc__tx_plan pl;
      if (rrpc__tx_window_plan(&sim, left, &pl) != 0) break;
      EXPECT_EQ(0, rrpc__tx_window_commit(&sim, &pl));
      left -= pl.len;
      plans.push_back(pl);
    }
    int posted = 0;
    for (size_t k = 0; k < plans.size(); k++) {
      const rrpc__tx_plan& pl = plans[k];
      rrpc__tx_plan check;
      EXPECT_EQ(0, rrpc__tx_window_plan(&e.tx, e.pending, &check));
      EXPECT_EQ(pl.len, check.len);
      bool sol = rrpc__tx_window_want_solicited(&e.tx, &pl, k + 1 == plans.size(), e.peer_req);
      int req = rrpc__tx_window_ack_request(&e.tx, &pl);
      uint64_t s = e.tx.prod;
      for (uint32_t g = 0; g < pl.nseg; g++) {
        for (uint32_t b = 0; b < pl.seg[g].len; b++)
          p.ring[pl.seg[g].off + b] = Pattern(i, s++);
        bool last = g + 1 == pl.nseg;
        Msg m;
        m.len = pl.seg[g].len;
        m.imm = last ? rrpc__rx_window_take_ack(&e.rx, req) : 0;
        m.solicited = last && sol;
        wire_[i].push_back(m);
        posted++;
        stats_.data_msgs++;
        stats_.solicited += m.solicited;
      }
      e.peer_req = false;  // an ACK went out with the data
      EXPECT_EQ(0, rrpc__tx_window_commit(&e.tx, &pl));
      e.pending -= pl.len;
      stats_.bytes += pl.len;
    }
    return posted;
  }

  // A pure ACK if one is due and allowed.
  int SendAck(int i, bool force_try) {
    Endpoint& e = ep_[i];
    if (!force_try && !rrpc__rx_window_ack_due(&e.rx, e.peer_req)) return 0;
    if (!rrpc__rx_window_owes(&e.rx)) return 0;
    rrpc__tx_plan pl;
    if (rrpc__tx_window_plan_ack(&e.tx, rrpc__rx_window_owes_credits(&e.rx), &pl) != 0) return 0;
    Msg m;
    m.len = 0;
    m.solicited = rrpc__tx_window_want_solicited(&e.tx, &pl, 0, e.peer_req);
    EXPECT_TRUE(m.solicited);
    EXPECT_FALSE(rrpc__tx_window_ack_request(&e.tx, &pl));
    m.imm = rrpc__rx_window_take_ack(&e.rx, 0);
    EXPECT_EQ(0, rrpc__tx_window_commit(&e.tx, &pl));
    e.peer_req = false;
    wire_[i].push_back(m);
    stats_.acks++;
    stats_.solicited++;
    return 1;
  }

  int Deliver(int i) {
    if (wire_[i].empty()) return 0;
    Endpoint& p = ep_[1 - i];
    Msg m = wire_[i].front();
    wire_[i].pop_front();
    p.cq.push_back(m);
    if (m.solicited) p.woken = true;
    return 1;
  }

  // Completion processing: only after a wake-up in event mode.
  int Process(int j) {
    Endpoint& e = ep_[j];
    if (e.cq.empty() || (e.event_mode && !e.woken)) return 0;
    if (e.woken) stats_.wakeups++;
    e.woken = false;
    int n = 0;
    while (!e.cq.empty()) {
      Msg m = e.cq.front();
      e.cq.pop_front();
      uint64_t at = e.rx.prod;
      EXPECT_EQ(0, rrpc__rx_window_on_recv(&e.rx, m.len)) << "credit or ring overrun";
      EXPECT_EQ(0, rrpc__tx_window_on_ack(&e.tx, m.imm)) << "bad ACK";
      rrpc__imm a = rrpc__imm_unpack(m.imm);
      if (a.ack_req) e.peer_req = true;
      // Hand the bytes to the application as 1..3 blocks.
      uint64_t end = at + m.len;
      while (at < end) {
        uint64_t len = end - at;
        if (len > 1 && R(3) == 0) len = 1 + R(len - 1);
        CheckBytes(j, at, at + len);
        e.held.push_back({at, at + len});
        at += len;
      }
      n++;
    }
    return n;
  }

  void CheckBytes(int j, uint64_t s, uint64_t t) {
    Endpoint& e = ep_[j];
    const size_t ring = e.ring.size();
    for (uint64_t x = s; x < t; x++) {
      if (e.ring[x % ring] != Pattern(1 - j, x)) {
        ADD_FAILURE() << "endpoint " << j << ": byte " << x << " overwritten or out of order";
        return;
      }
    }
  }

  int Repost(int j, uint32_t n) {
    Endpoint& e = ep_[j];
    n = std::min(n, e.rx.held);
    if (n == 0) return 0;
    EXPECT_EQ(0, rrpc__rx_window_on_repost(&e.rx, n));
    return 1;
  }

  int Release(int j, size_t k) {
    Endpoint& e = ep_[j];
    if (k >= e.held.size()) return 0;
    auto b = e.held[k];
    e.held.erase(e.held.begin() + static_cast<long>(k));
    CheckBytes(j, b.first, b.second);
    uint64_t adv;
    EXPECT_EQ(0, rrpc__rx_reclaim_release(&e.rc, b.first, b.second, &adv));
    EXPECT_EQ(0, rrpc__rx_window_on_release(&e.rx, adv));
    delivered_[1 - j] += b.second - b.first;
    return 1;
  }

  void CheckInvariants() {
    for (int i = 0; i < 2; i++) {
      const Endpoint& s = ep_[i];
      const Endpoint& r = ep_[1 - i];
      ASSERT_LE(s.tx.prod - s.tx.peer_cons, r.ring.size());
      ASSERT_LE(s.tx.credits, s.tx.depth);
      // Credits: mine + my messages in flight or not yet processed + the
      // peer's held and owed + credits coming back == the peer's depth.
      uint64_t in_flight = wire_[i].size() + r.cq.size(), returning = 0, adv = 0, bytes = 0;
      for (const Msg& m : wire_[i]) bytes += m.len;
      for (const Msg& m : r.cq) bytes += m.len;
      for (const std::deque<Msg>* q : {static_cast<const std::deque<Msg>*>(&wire_[1 - i]), &s.cq})
        for (const Msg& m : *q) {
          rrpc__imm a = rrpc__imm_unpack(m.imm);
          returning += a.credits;
          adv += a.advance;
        }
      ASSERT_EQ(r.rx.depth, s.tx.credits + in_flight + r.rx.held + r.rx.owed + returning);
      ASSERT_EQ(s.tx.prod, r.rx.prod + bytes);
      ASSERT_EQ(r.rx.acked, s.tx.peer_cons + adv);
      ASSERT_EQ(r.rx.cons, r.rc.cons);
    }
  }

  // Random interleaving of every action.
  void RandomPhase(int steps, uint64_t budget) {
    for (int step = 0; step < steps && !HasFatalFailure(); step++) {
      int i = static_cast<int>(R(2));
      Endpoint& e = ep_[i];
      switch (R(9)) {
        case 0:
          if (sent_[i] < budget) {
            uint64_t n = 1 + R(e.tx.ring_size * 2);
            e.pending += n;
            sent_[i] += n;
          }
          break;
        case 1:
          SendData(i, 1 + static_cast<int>(R(4)));
          break;
        case 2:
          SendAck(i, R(4) == 0);  // sometimes early, when allowed
          break;
        case 3:
        case 4:
          Deliver(i);
          break;
        case 5:
          if (e.event_mode)
            Process(i);
          else if (R(2) == 0)
            Process(i);
          break;
        case 6:
          Repost(i, static_cast<uint32_t>(1 + R(4)));
          break;
        case 7:
        case 8:
          if (!e.held.empty()) Release(i, R(e.held.size()));
          break;
      }
      CheckInvariants();
    }
  }

  // One lock-step round of the drain: each endpoint processes what woke it,
  // reposts, releases everything, writes what it can and ACKs if due; then
  // the wire empties. Returns the number of things that happened.
  int Round() {
    int progress = 0;
    for (int i = 0; i < 2; i++) {
      progress += Process(i);
      Endpoint& e = ep_[i];
      progress += Repost(i, e.rx.held);
      while (!e.held.empty()) progress += Release(i, e.held.size() - 1);
      progress += SendData(i, 1 << 30);
      progress += SendAck(i, false);
    }
    for (int i = 0; i < 2; i++)
      while (Deliver(i)) progress++;
    return progress;
  }

  // The applications release everything; the endpoints follow the real rules
  // only (ACK when due). Progress must continue until every byte arrived.
  void DrainPhase() {
    for (int round = 0;; round++) {
      ASSERT_LT(round, 1000000);
      int progress = Round();
      CheckInvariants();
      if (HasFatalFailure()) return;
      bool done = true;
      for (int i = 0; i < 2; i++)
        done = done && ep_[i].pending == 0 && wire_[i].empty() && ep_[i].cq.empty() &&
               ep_[i].held.empty() && delivered_[i] == sent_[i];
      if (done) {
        // Once the data is through, the ACKs must die out too: no endpoint
        // may keep answering the other's pure ACKs.
        settle_rounds_ = 0;
        while (Round() > 0) {
          ASSERT_LT(++settle_rounds_, 100) << "pure ACKs never settle";
        }
        return;
      }
      if (progress == 0) {
        for (int i = 0; i < 2; i++) {
          const Endpoint& e = ep_[i];
          ADD_FAILURE() << "deadlock: ep" << i << " pending " << e.pending << " credits "
                        << e.tx.credits << " free " << rrpc__tx_window_free(&e.tx) << " held "
                        << e.rx.held << " owed " << e.rx.owed << " unacked "
                        << (e.rx.cons - e.rx.acked) << " cq " << e.cq.size() << " woken "
                        << e.woken << " sent " << sent_[i] << " delivered " << delivered_[i];
        }
        return;
      }
    }
  }

  void Queue(int i, uint64_t n) {
    ep_[i].pending += n;
    sent_[i] += n;
  }

  const Stats& stats() const { return stats_; }
  uint64_t sent(int i) const { return sent_[i]; }

 private:
  static bool HasFatalFailure() { return ::testing::Test::HasFatalFailure(); }
  std::mt19937_64 rng_;
  Endpoint ep_[2];
  std::deque<Msg> wire_[2];
  uint64_t sent_[2] = {0, 0};
  uint64_t delivered_[2] = {0, 0};
  int settle_rounds_ = 0;
  Stats stats_;
};

TEST(WindowModel, RandomExchangesNeverOverrunAndAlwaysFinish) {
  std::mt19937_64 pick(2024);
  const uint32_t rings[] = {1, 2, 7, 64, 100, 256, 1000};
  Stats total;
  int runs = 0;
  // RRPC_WINDOW_MODEL_SEEDS runs a longer exploration (default 400 seeds).
  const char* env = std::getenv("RRPC_WINDOW_MODEL_SEEDS");
  const uint64_t seeds = env != nullptr ? std::strtoull(env, nullptr, 10) : 400;
  for (uint64_t seed = 0; seed < seeds; seed++) {
    uint32_t r0 = rings[pick() % 7], r1 = rings[pick() % 7];
    uint32_t reserve = 1 + static_cast<uint32_t>(pick() % 2);
    uint32_t d0 = 3 + static_cast<uint32_t>(pick() % 30), d1 = 3 + static_cast<uint32_t>(pick() % 30);
    // Depths must satisfy the tx window's precondition for this reserve.
    rrpc__tx_window probe;
    if (rrpc__tx_window_init(&probe, 1, d0, reserve) != 0 ||
        rrpc__tx_window_init(&probe, 1, d1, reserve) != 0)
      continue;
    bool ev0 = pick() % 3 != 0, ev1 = pick() % 3 != 0;
    SCOPED_TRACE("seed " + std::to_string(seed) + " rings " + std::to_string(r0) + "/" +
                 std::to_string(r1) + " depths " + std::to_string(d0) + "/" + std::to_string(d1) +
                 " reserve " + std::to_string(reserve) + " event " + std::to_string(ev0) +
                 std::to_string(ev1));
    Model m(seed, r0, r1, d0, d1, reserve, ev0, ev1);
    m.RandomPhase(4000, 20000);
    if (HasFatalFailure()) return;
    m.DrainPhase();
    if (HasFatalFailure()) return;
    ASSERT_FALSE(HasFailure());
    total.data_msgs += m.stats().data_msgs;
    total.acks += m.stats().acks;
    total.solicited += m.stats().solicited;
    total.wakeups += m.stats().wakeups;
    total.bytes += m.stats().bytes;
    runs++;
  }
  EXPECT_GT(runs, static_cast<int>(seeds * 3 / 4));
  std::printf("model: %d runs, %llu bytes, %llu data msgs, %llu pure ACKs, %llu solicited, "
              "%llu wake-ups\n",
              runs, static_cast<unsigned long long>(total.bytes),
              static_cast<unsigned long long>(total.data_msgs),
              static_cast<unsigned long long>(total.acks),
              static_cast<unsigned long long>(total.solicited),
              static_cast<unsigned long long>(total.wakeups));
}

// The schedule that deadlocks when a pure ACK may spend the last credit
// without returning one (plan_ack fed rrpc__rx_window_owes instead of
// rrpc__rx_window_owes_credits): both ends at zero credits, each owing 3.
TEST(WindowModel, LastCreditRuleRegression) {
  Model m(2740, 1000, 2, 3, 3, 1, false, true);
  m.RandomPhase(4000, 20000);
  ASSERT_FALSE(HasFailure());
  m.DrainPhase();
  ASSERT_FALSE(HasFailure());
  EXPECT_GT(m.sent(0) + m.sent(1), 0u);
}

// One bulk direction: 16 MiB through a 256 KiB ring, both sides in event
// mode, the receiver releasing everything each round. Every byte arrives
// in order and nothing is overwritten.
TEST(WindowModel, BulkTransferThroughSmallRing) {
  Model m(99, 256 << 10, 256 << 10, 64, 64, 1, true, true);
  m.Queue(0, 16 << 20);
  m.DrainPhase();
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(16u << 20, m.stats().bytes);
  std::printf("bulk: %llu data msgs, %llu pure ACKs, %llu solicited, %llu wake-ups\n",
              static_cast<unsigned long long>(m.stats().data_msgs),
              static_cast<unsigned long long>(m.stats().acks),
              static_cast<unsigned long long>(m.stats().solicited),
              static_cast<unsigned long long>(m.stats().wakeups));
}


// Elastic mode: data messages take credits above the reserve only; the
// pieces layer owns the space.
TEST(TxWindow, ElasticCommitMsgsNeverTakesTheReserve) {
  rrpc__tx_window tx;
  ASSERT_EQ(0, rrpc__tx_window_init(&tx, 1, 16, 0));
  EXPECT_EQ(15u, rrpc__tx_window_data_credits(&tx));
  EXPECT_EQ(-EINVAL, rrpc__tx_window_commit_msgs(&tx, 16));
  EXPECT_EQ(16u, tx.credits);
  EXPECT_EQ(0, rrpc__tx_window_commit_msgs(&tx, 15));
  EXPECT_EQ(0u, rrpc__tx_window_data_credits(&tx));
  EXPECT_EQ(-EINVAL, rrpc__tx_window_commit_msgs(&tx, 1));
  // Credits come back with the credit half of an elastic immediate.
  EXPECT_EQ(0, rrpc__tx_window_on_ack(&tx, (0x80000000u | (3u << 24) | 0x00ff1234u) & RRPC_IMM_CREDITS_MASK));
  EXPECT_EQ(3u, rrpc__tx_window_data_credits(&tx));
}

}  // namespace
