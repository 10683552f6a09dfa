// remote_table_unittest.cc - one connection's remote-memory state
// (src/rrpc/remote/table.h), two of them wired back to back as the two
// sides of a connection: announce, tokens bound to a connection, the
// accessing side's checks and their codes, revoke exactly once, close,
// notifications, and the sequence/protocol rules of incoming messages.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

extern "C" {
#include "rrpc/errors.h"
#include "rrpc/remote.h"
#include "rrpc/remote/table.h"
}

namespace {

struct Pair {
  rrpc__rmt_conn owner, peer;
  Pair(uint64_t owner_id = 0xa1, uint64_t peer_id = 0xb1, uint32_t max = 0) {
    EXPECT_EQ(0, rrpc__rmt_conn_init(&owner, owner_id, 100, max));
    EXPECT_EQ(0, rrpc__rmt_conn_init(&peer, peer_id, 500, max));
  }
  ~Pair() {
    rrpc__rmt_conn_fini(&owner);
    rrpc__rmt_conn_fini(&peer);
  }
  // Register on the owner and deliver the announcement(s) to the peer.
  rrpc__rmt_region Announce(uint8_t rights, uint64_t len, uint32_t rkey = 0x55, uint64_t addr = 0x10000) {
    rrpc__rmt_region r;
    EXPECT_EQ(0, rrpc__rmt_own_add(&owner, rights, len, nullptr, &r));
    uint8_t h[RRPC_RMT_MSG_LEN], a[RRPC_RMT_MSG_LEN];
    int n = rrpc__rmt_tx_announce(&owner, &r, rkey, addr, h, a);
    EXPECT_TRUE(n == 1 || n == 2);
    if (n == 2) {
      EXPECT_EQ(0, Deliver(&peer, h));
    }
    EXPECT_EQ(0, Deliver(&peer, a));
    return r;
  }
  static int Deliver(rrpc__rmt_conn *to, const uint8_t *b) {
    rrpc__rmt_msg m;
    const rrpc__rmt_region *r = nullptr;
    return rrpc__rmt_conn_rx(to, b, RRPC_RMT_MSG_LEN, &m, &r);
  }
};

TEST(RemoteTable, AnnounceAppearsInPeerTableWithItsFields) {
  Pair p;
  rrpc__rmt_region r = p.Announce(RRPC_REMOTE_WRITE, 4096, 0x77, 0x2000);
  EXPECT_EQ(1u, r.id);
  EXPECT_EQ(0xa1u, p.peer.peer_conn_id);
  rrpc__rmt_entry e;
  ASSERT_EQ(0, rrpc__rmt_peer_check(&p.peer, r.id, 0, 4096, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(0x77u, e.rkey);
  EXPECT_EQ(0x2000u, e.addr);
  EXPECT_EQ(4096u, e.length);
  EXPECT_EQ(r.generation, e.generation);
  // The region's last byte, and 0 bytes at its end.
  EXPECT_EQ(0, rrpc__rmt_peer_check(&p.peer, r.id, 4095, 1, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(0, rrpc__rmt_peer_check(&p.peer, r.id, 4096, 0, RRPC_REMOTE_WRITE, &e));
  // A second announce sends no second HELLO.
  rrpc__rmt_region r2;
  ASSERT_EQ(0, rrpc__rmt_own_add(&p.owner, RRPC_REMOTE_READ, 1, nullptr, &r2));
  uint8_t h[RRPC_RMT_MSG_LEN], a[RRPC_RMT_MSG_LEN];
  EXPECT_EQ(1, rrpc__rmt_tx_announce(&p.owner, &r2, 1, 1, h, a));
  EXPECT_EQ(0, Pair::Deliver(&p.peer, a));
  EXPECT_EQ(2u, r2.id);
}

TEST(RemoteTable, AccessingSideCodes) {
  Pair p;
  rrpc__rmt_region r = p.Announce(RRPC_REMOTE_WRITE, 4096);
  rrpc__rmt_entry e;
  EXPECT_EQ(-RRPC_EREMOTERANGE, rrpc__rmt_peer_check(&p.peer, r.id, 4096, 1, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(-RRPC_EREMOTERANGE, rrpc__rmt_peer_check(&p.peer, r.id, 1, 4096, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(-RRPC_EREMOTERANGE, rrpc__rmt_peer_check(&p.peer, r.id, 4097, 0, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(-RRPC_EREMOTERANGE,
            rrpc__rmt_peer_check(&p.peer, r.id, 8, UINT64_MAX - 4, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(-RRPC_EREMOTERIGHTS, rrpc__rmt_peer_check(&p.peer, r.id, 0, 1, RRPC_REMOTE_READ, &e));
  EXPECT_EQ(-RRPC_EREMOTENOENT, rrpc__rmt_peer_check(&p.peer, 2, 0, 1, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(-RRPC_EREMOTENOENT, rrpc__rmt_peer_check(&p.peer, 0, 0, 1, RRPC_REMOTE_WRITE, &e));
}

TEST(RemoteTable, RevokeOnceThenAccessesFailAsRevoked) {
  Pair p;
  rrpc__rmt_region r = p.Announce(RRPC_REMOTE_READ | RRPC_REMOTE_WRITE, 64);
  rrpc__rmt_region got;
  ASSERT_EQ(1, rrpc__rmt_own_revoke(&p.owner, r.id, &got));
  EXPECT_EQ(r.id, got.id);
  // The second revoke must not ask for a second invalidation.
  EXPECT_EQ(-ENOENT, rrpc__rmt_own_revoke(&p.owner, r.id, &got));
  uint8_t b[RRPC_RMT_MSG_LEN];
  ASSERT_EQ(0, rrpc__rmt_tx_revoke(&p.owner, &r, b));
  ASSERT_EQ(0, Pair::Deliver(&p.peer, b));
  rrpc__rmt_entry e;
  EXPECT_EQ(-RRPC_EREMOTEREVOKED, rrpc__rmt_peer_check(&p.peer, r.id, 0, 1, RRPC_REMOTE_READ, &e));
  const rrpc__rmt_region *rr;
  EXPECT_EQ(-RRPC_EREMOTEREVOKED,
            rrpc__rmt_own_check(&p.owner, r.id, r.generation, 0, 1, RRPC_REMOTE_READ, &rr));
  uint8_t tok[RRPC_RMT_TOKEN_LEN];
  EXPECT_EQ(-RRPC_EREMOTEREVOKED, rrpc__rmt_own_token(&p.owner, r.id, 0, 0, tok));
}

void Count(const rrpc__rmt_region *r, void *arg) {
  static_cast<std::vector<uint32_t> *>(arg)->push_back(r->id);
}

TEST(RemoteTable, CloseRevokesEachLiveEntryOnce) {
  Pair p;
  for (int i = 0; i < 5; i++) p.Announce(RRPC_REMOTE_WRITE, 100);
  rrpc__rmt_region got;
  ASSERT_EQ(1, rrpc__rmt_own_revoke(&p.owner, 3, &got));
  std::vector<uint32_t> ids;
  EXPECT_EQ(4u, rrpc__rmt_own_revoke_all(&p.owner, Count, &ids));
  EXPECT_EQ((std::vector<uint32_t>{1, 2, 4, 5}), ids);
  EXPECT_EQ(0u, rrpc__rmt_own_revoke_all(&p.owner, Count, &ids));
  EXPECT_EQ(-ENOENT, rrpc__rmt_own_revoke(&p.owner, 1, &got));
  rrpc__rmt_peer_clear(&p.peer);
  rrpc__rmt_entry e;
  for (uint32_t id = 1; id <= 5; id++)
    EXPECT_EQ(-RRPC_EREMOTEREVOKED, rrpc__rmt_peer_check(&p.peer, id, 0, 1, RRPC_REMOTE_WRITE, &e));
}

TEST(RemoteTable, TokenIsBoundToItsConnection) {
  Pair a(0xa1, 0xb1), b(0xa2, 0xb2);
  rrpc__rmt_region ra = a.Announce(RRPC_REMOTE_WRITE, 4096, 0x1111, 0x5000);
  b.Announce(RRPC_REMOTE_WRITE, 4096, 0x2222, 0x6000);  // same id 1 on connection b
  uint8_t tok[RRPC_RMT_TOKEN_LEN];
  ASSERT_EQ(0, rrpc__rmt_own_token(&a.owner, ra.id, 0x1111, 0x5000, tok));
  rrpc__rmt_entry e;
  EXPECT_EQ(0, rrpc__rmt_peer_check_token(&a.peer, tok, sizeof(tok), 4095, 1, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(0x1111u, e.rkey);
  // Connection b's peer has an entry 1 too; the token still names a's.
  EXPECT_EQ(-RRPC_EREMOTECONN,
            rrpc__rmt_peer_check_token(&b.peer, tok, sizeof(tok), 0, 1, RRPC_REMOTE_WRITE, &e));
  // A token whose fields were edited grants only what the table says.
  uint8_t forged[RRPC_RMT_TOKEN_LEN];
  memcpy(forged, tok, sizeof(tok));
  forged[3] = RRPC_REMOTE_READ | RRPC_REMOTE_WRITE;
  memset(forged + 20, 0x7f, 8);  // huge length
  memset(forged + 32, 0, 8);
  EXPECT_EQ(-RRPC_EREMOTERIGHTS,
            rrpc__rmt_peer_check_token(&a.peer, forged, sizeof(forged), 0, 1, RRPC_REMOTE_READ, &e));
  EXPECT_EQ(-RRPC_EREMOTERANGE,
            rrpc__rmt_peer_check_token(&a.peer, forged, sizeof(forged), 4096, 1, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(0, rrpc__rmt_peer_check_token(&a.peer, forged, sizeof(forged), 0, 1, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(0x5000u, e.addr) << "the address comes from the table, not the token";
  // A stale generation reads as revoked.
  memcpy(forged, tok, sizeof(tok));
  forged[11] ^= 1;
  EXPECT_EQ(-RRPC_EREMOTEREVOKED,
            rrpc__rmt_peer_check_token(&a.peer, forged, sizeof(forged), 0, 1, RRPC_REMOTE_WRITE, &e));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_peer_check_token(&a.peer, tok, 39, 0, 1, RRPC_REMOTE_WRITE, &e));
  // Before any HELLO, no token can be this connection's.
  Pair fresh;
  EXPECT_EQ(-RRPC_EREMOTECONN,
            rrpc__rmt_peer_check_token(&fresh.peer, tok, sizeof(tok), 0, 1, RRPC_REMOTE_WRITE, &e));
}

TEST(RemoteTable, NotifyReachesTheOwnerInOrderAndBadOnesAreDropped) {
  Pair p;
  rrpc__rmt_region r = p.Announce(RRPC_REMOTE_WRITE, 1 << 20);
  rrpc__rmt_entry e;
  ASSERT_EQ(0, rrpc__rmt_peer_check(&p.peer, r.id, 0, 1, RRPC_REMOTE_WRITE, &e));
  // The peer writes and notifies; the owner sees tags in the order sent.
  for (uint32_t tag = 1; tag <= 64; tag++) {
    uint8_t b[RRPC_RMT_MSG_LEN];
    ASSERT_EQ(0, rrpc__rmt_tx_notify(&p.peer, &e, (tag - 1) * 16384ull, 16384, tag, b));
    rrpc__rmt_msg m;
    const rrpc__rmt_region *got = nullptr;
    ASSERT_EQ(0, rrpc__rmt_conn_rx(&p.owner, b, sizeof(b), &m, &got));
    ASSERT_NE(nullptr, got);
    EXPECT_EQ(r.id, got->id);
    EXPECT_EQ(tag, m.tag);
    EXPECT_EQ((tag - 1) * 16384ull, m.offset);
  }
  // Out of range, then after a revoke: dropped and counted, not an error.
  rrpc__rmt_entry wide = e;
  wide.length = UINT64_MAX;
  uint8_t b[RRPC_RMT_MSG_LEN];
  rrpc__rmt_msg m;
  const rrpc__rmt_region *got = nullptr;
  ASSERT_EQ(0, rrpc__rmt_tx_notify(&p.peer, &wide, 1 << 20, 1, 99, b));
  EXPECT_EQ(1, rrpc__rmt_conn_rx(&p.owner, b, sizeof(b), &m, &got));
  rrpc__rmt_region gone;
  ASSERT_EQ(1, rrpc__rmt_own_revoke(&p.owner, r.id, &gone));
  ASSERT_EQ(0, rrpc__rmt_tx_notify(&p.peer, &e, 0, 1, 100, b));
  EXPECT_EQ(1, rrpc__rmt_conn_rx(&p.owner, b, sizeof(b), &m, &got));
  EXPECT_EQ(2u, p.owner.stats.bad_notify);
  EXPECT_EQ(0u, p.owner.stats.protocol_errors);
}

TEST(RemoteTable, ProtocolViolationsFailTheConnection) {
  Pair p;
  rrpc__rmt_region r;
  ASSERT_EQ(0, rrpc__rmt_own_add(&p.owner, RRPC_REMOTE_WRITE, 10, nullptr, &r));
  uint8_t h[RRPC_RMT_MSG_LEN], a[RRPC_RMT_MSG_LEN];
  ASSERT_EQ(2, rrpc__rmt_tx_announce(&p.owner, &r, 1, 1, h, a));
  rrpc__rmt_msg m;
  const rrpc__rmt_region *got;
  // The ANNOUNCE without its HELLO is out of sequence (seq 2, expected 1).
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_conn_rx(&p.peer, a, sizeof(a), &m, &got));
  ASSERT_EQ(0, Pair::Deliver(&p.peer, h));
  ASSERT_EQ(0, Pair::Deliver(&p.peer, a));
  // Replayed: out of sequence.
  EXPECT_EQ(-RRPC_EPARSE, Pair::Deliver(&p.peer, a));
  // An ANNOUNCE that does not raise the id, with the right sequence.
  rrpc__rmt_msg dup;
  memset(&dup, 0, sizeof(dup));
  dup.type = RRPC_RMT_T_ANNOUNCE;
  dup.seq = 3;
  dup.id = 1;
  dup.rights = RRPC_REMOTE_WRITE;
  dup.length = 10;
  uint8_t b[RRPC_RMT_MSG_LEN];
  ASSERT_EQ(0, rrpc__rmt_msg_encode(&dup, b));
  EXPECT_EQ(-RRPC_EPARSE, Pair::Deliver(&p.peer, b));
  // A second HELLO, and a REVOKE of an id never announced.
  rrpc__rmt_msg hello;
  memset(&hello, 0, sizeof(hello));
  hello.type = RRPC_RMT_T_HELLO;
  hello.seq = 3;
  hello.conn_id = 0x99;
  ASSERT_EQ(0, rrpc__rmt_msg_encode(&hello, b));
  EXPECT_EQ(-RRPC_EPARSE, Pair::Deliver(&p.peer, b));
  EXPECT_EQ(0xa1u, p.peer.peer_conn_id);
  rrpc__rmt_msg rv;
  memset(&rv, 0, sizeof(rv));
  rv.type = RRPC_RMT_T_REVOKE;
  rv.seq = 3;
  rv.id = 42;
  ASSERT_EQ(0, rrpc__rmt_msg_encode(&rv, b));
  EXPECT_EQ(-RRPC_EPARSE, Pair::Deliver(&p.peer, b));
  EXPECT_EQ(5u, p.peer.stats.protocol_errors);
}

TEST(RemoteTable, LimitsAndIdExhaustion) {
  Pair p(0xa1, 0xb1, 3);
  rrpc__rmt_region r;
  for (int i = 0; i < 3; i++) ASSERT_EQ(0, rrpc__rmt_own_add(&p.owner, RRPC_REMOTE_READ, 1, nullptr, &r));
  EXPECT_EQ(-ENOSPC, rrpc__rmt_own_add(&p.owner, RRPC_REMOTE_READ, 1, nullptr, &r));
  EXPECT_EQ(1u, p.owner.stats.refused_full);
  ASSERT_EQ(1, rrpc__rmt_own_revoke(&p.owner, 2, &r));
  ASSERT_EQ(0, rrpc__rmt_own_add(&p.owner, RRPC_REMOTE_READ, 1, nullptr, &r));
  EXPECT_EQ(4u, r.id) << "ids are never reused on a connection";
  EXPECT_EQ(-EINVAL, rrpc__rmt_own_add(&p.owner, 0, 1, nullptr, &r));
  EXPECT_EQ(-EINVAL, rrpc__rmt_own_add(&p.owner, RRPC_REMOTE_READ, 0, nullptr, &r));
  rrpc__rmt_conn c;
  ASSERT_EQ(0, rrpc__rmt_conn_init(&c, 1, 0, 0));
  EXPECT_EQ(uint32_t(RRPC_RMT_MAX_ENTRIES_DEFAULT), c.max_entries);
  c.next_id = UINT32_MAX;
  ASSERT_EQ(0, rrpc__rmt_own_add(&c, RRPC_REMOTE_READ, 1, nullptr, &r));
  EXPECT_EQ(UINT32_MAX, r.id);
  EXPECT_EQ(-ENOSPC, rrpc__rmt_own_add(&c, RRPC_REMOTE_READ, 1, nullptr, &r));
  rrpc__rmt_conn_fini(&c);
  EXPECT_EQ(-EINVAL, rrpc__rmt_conn_init(&c, 0, 0, 0));
}

}  // namespace
