// remote_tcp_unittest.cc - remote memory over a TCP byte stream
// (src/rrpc/remote/tcp_frames.h): frame layout and strict decoding, and the
// owner's side of WRITE/READ driven by the accessing side's ops queue with
// every frame passing through its bytes: 0 B .. 64 MiB byte-exact at offsets
// up to the region's last byte, NOTIFY once per write in order, and
// out-of-range, wrong-rights, revoked and another connection's frames
// refused with their codes and the memory intact.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

extern "C" {
#include "rrpc/errors.h"
#include "rrpc/remote.h"
#include "rrpc/remote/ops.h"
#include "rrpc/remote/table.h"
#include "rrpc/remote/tcp_frames.h"
}

namespace {

constexpr uint32_t kFrame = 1 << 20;

struct Side {
  rrpc__rmt_conn owner, peer;
  std::vector<uint8_t> region;
  rrpc__rmt_region reg;
  Side(size_t size, uint8_t rights, uint64_t conn_id = 0xc1, uint32_t gen = 10) : region(size) {
    EXPECT_EQ(0, rrpc__rmt_conn_init(&owner, conn_id, gen, 0));
    EXPECT_EQ(0, rrpc__rmt_conn_init(&peer, conn_id + 1, 0, 0));
    for (size_t i = 0; i < size; i++) region[i] = uint8_t(i * 7 + 3);
    EXPECT_EQ(0, rrpc__rmt_own_add(&owner, rights, size, region.data(), &reg));
    uint8_t h[RRPC_RMT_MSG_LEN], a[RRPC_RMT_MSG_LEN];
    EXPECT_EQ(2, rrpc__rmt_tx_announce(&owner, &reg, 0, 0, h, a));
    rrpc__rmt_msg m;
    const rrpc__rmt_region *n;
    EXPECT_EQ(0, rrpc__rmt_conn_rx(&peer, h, sizeof(h), &m, &n));
    EXPECT_EQ(0, rrpc__rmt_conn_rx(&peer, a, sizeof(a), &m, &n));
  }
  ~Side() {
    rrpc__rmt_conn_fini(&owner);
    rrpc__rmt_conn_fini(&peer);
  }
};

// Through the bytes: encode, decode as the other side would.
rrpc__rmt_tcp_hdr Wire(const rrpc__rmt_tcp_hdr &h) {
  uint8_t b[RRPC_RMT_TCP_HDR_LEN];
  EXPECT_EQ(0, rrpc__rmt_tcp_encode(&h, b));
  rrpc__rmt_tcp_hdr d;
  EXPECT_EQ(0, rrpc__rmt_tcp_decode(b, sizeof(b), kFrame, &d));
  return d;
}

struct Op {
  rrpc__rmt_op base;
  bool read;
  uint8_t *local;
  uint64_t roff;
  bool notify;
  uint32_t tag;
  int calls = 0, status = 1;
};

void OnDone(rrpc__rmt_op *op, int status) {
  Op *o = reinterpret_cast<Op *>(op);
  o->calls++;
  o->status = status;
}

// The accessing side: pieces of the ops queue as frames to the owner,
// replies back. Returns the notifications the owner saw (tags).
std::vector<uint32_t> Pump(Side &s, rrpc__rmt_opq *q, const rrpc__rmt_entry &e) {
  std::vector<uint32_t> tags;
  rrpc__rmt_piece p;
  while (rrpc__rmt_opq_next(q, &p) == 1) {
    Op *o = reinterpret_cast<Op *>(p.op);
    rrpc__rmt_tcp_hdr h;
    memset(&h, 0, sizeof(h));
    h.type = o->read ? RRPC_RMT_TCP_READ_REQ : RRPC_RMT_TCP_WRITE;
    h.flags = !o->read && o->notify && p.last ? RRPC_RMT_TCP_F_NOTIFY : 0;
    h.tag = h.flags ? o->tag : 0;
    h.op = 1;
    h.id = e.id;
    h.generation = e.generation;
    h.offset = o->roff + p.offset;
    h.length = p.length;
    rrpc__rmt_tcp_hdr got = Wire(h);
    rrpc__rmt_tcp_reply rep;
    EXPECT_EQ(0, rrpc__rmt_tcp_serve(&s.owner, &got, o->local + p.offset, &rep));
    if (rep.notified) tags.push_back(got.tag);
    rrpc__rmt_tcp_hdr back = Wire(rep.hdr);
    if (o->read && back.status == 0) memcpy(o->local + p.offset, rep.payload, back.length);
    rrpc__rmt_opq_piece_done(q, p.op, back.status);
  }
  return tags;
}

TEST(RemoteTcp, ByteExactAnySizeAndNotifyOncePerWriteInOrder) {
  const size_t kRegion = 64ull << 20;
  Side s(kRegion, RRPC_REMOTE_READ | RRPC_REMOTE_WRITE);
  rrpc__rmt_opq q;
  ASSERT_EQ(0, rrpc__rmt_opq_init(&q, kFrame, 8));
  std::vector<uint8_t> src(kRegion), dst(kRegion);
  for (size_t i = 0; i < kRegion; i++) src[i] = uint8_t(i * 13 + 1);
  struct Case {
    uint64_t len, off;
  } cases[] = {{kRegion, 0}, {0, 0},        {0, kRegion},         {1, 0},
               {1, kRegion - 1}, {4096, 4097}, {4096, kRegion - 4096}, {1 << 20, 12345},
               {1 << 20, kRegion - (1 << 20)}};
  std::vector<uint8_t> shadow(s.region);
  uint32_t tag = 0;
  std::vector<uint32_t> want_tags, tags;
  for (const Case &k : cases) {
    rrpc__rmt_entry e;
    ASSERT_EQ(0, rrpc__rmt_peer_check(&s.peer, s.reg.id, k.off, k.len, RRPC_REMOTE_WRITE, &e));
    std::deque<Op> ops(2);
    Op &w = ops[0], &r = ops[1];
    memset(&w.base, 0, sizeof(w.base));
    w.base.length = k.len;
    w.base.cb = OnDone;
    w.read = false;
    w.local = src.data() + (k.off % 977);
    w.roff = k.off;
    w.notify = true;
    w.tag = ++tag;
    want_tags.push_back(tag);
    memset(&r.base, 0, sizeof(r.base));
    r.base.length = k.len;
    r.base.cb = OnDone;
    r.read = true;
    r.local = dst.data();
    r.roff = k.off;
    r.notify = false;
    ASSERT_EQ(0, rrpc__rmt_opq_submit(&q, &w.base));
    ASSERT_EQ(0, rrpc__rmt_opq_submit(&q, &r.base));
    auto t = Pump(s, &q, e);
    tags.insert(tags.end(), t.begin(), t.end());
    ASSERT_EQ(1, w.calls);
    ASSERT_EQ(0, w.status);
    ASSERT_EQ(1, r.calls);
    ASSERT_EQ(0, r.status);
    memcpy(shadow.data() + k.off, w.local, k.len);
    ASSERT_EQ(0, memcmp(shadow.data(), s.region.data(), kRegion)) << k.len << "@" << k.off;
    ASSERT_EQ(0, memcmp(dst.data(), w.local, k.len)) << "read back " << k.len << "@" << k.off;
  }
  EXPECT_EQ(want_tags, tags) << "one notification per NOTIFY write, in order";
}

TEST(RemoteTcp, RefusedFramesLeaveTheMemoryIntact) {
  Side s(64 * 1024, RRPC_REMOTE_WRITE);
  std::vector<uint8_t> shadow(s.region), junk(128 * 1024, 0xee);
  rrpc__rmt_entry e;
  ASSERT_EQ(0, rrpc__rmt_peer_check(&s.peer, s.reg.id, 0, 1, RRPC_REMOTE_WRITE, &e));
  auto frame = [&](uint8_t type, uint32_t id, uint32_t gen, uint64_t off, uint64_t len) {
    rrpc__rmt_tcp_hdr h;
    memset(&h, 0, sizeof(h));
    h.type = type;
    h.id = id;
    h.generation = gen;
    h.offset = off;
    h.length = len;
    rrpc__rmt_tcp_reply rep;
    EXPECT_EQ(0, rrpc__rmt_tcp_serve(&s.owner, &h, junk.data(), &rep));
    EXPECT_EQ(nullptr, rep.payload);
    return rep.hdr.status;
  };
  // A rogue accessor skips its own checks; the owner's refuse.
  EXPECT_EQ(-RRPC_EREMOTERANGE, frame(RRPC_RMT_TCP_WRITE, e.id, e.generation, 64 * 1024 - 1, 2));
  EXPECT_EQ(-RRPC_EREMOTERANGE, frame(RRPC_RMT_TCP_WRITE, e.id, e.generation, 64 * 1024 + 1, 0));
  EXPECT_EQ(-RRPC_EREMOTERIGHTS, frame(RRPC_RMT_TCP_READ_REQ, e.id, e.generation, 0, 16));
  EXPECT_EQ(-RRPC_EREMOTENOENT, frame(RRPC_RMT_TCP_WRITE, 9, e.generation, 0, 16));
  // Another connection's entry 1 has another generation.
  Side other(4096, RRPC_REMOTE_WRITE, 0xd1, 77);
  EXPECT_EQ(-RRPC_EREMOTEREVOKED, frame(RRPC_RMT_TCP_WRITE, 1, 77, 0, 16));
  // Revoked on the owner before the peer heard of it.
  rrpc__rmt_region gone;
  ASSERT_EQ(1, rrpc__rmt_own_revoke(&s.owner, s.reg.id, &gone));
  EXPECT_EQ(-RRPC_EREMOTEREVOKED, frame(RRPC_RMT_TCP_WRITE, e.id, e.generation, 0, 16));
  EXPECT_EQ(0, memcmp(shadow.data(), s.region.data(), s.region.size()));
  // A response is not a request.
  rrpc__rmt_tcp_hdr h;
  memset(&h, 0, sizeof(h));
  h.type = RRPC_RMT_TCP_DONE;
  rrpc__rmt_tcp_reply rep;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_tcp_serve(&s.owner, &h, nullptr, &rep));
}

TEST(RemoteTcp, HeaderLayoutAndStrictDecode) {
  rrpc__rmt_tcp_hdr h;
  memset(&h, 0, sizeof(h));
  h.type = RRPC_RMT_TCP_WRITE;
  h.flags = RRPC_RMT_TCP_F_NOTIFY;
  h.op = 0x01020304;
  h.id = 5;
  h.generation = 6;
  h.tag = 0xdeadbeef;
  h.offset = 0x1000;
  h.length = 0x20;
  uint8_t b[RRPC_RMT_TCP_HDR_LEN];
  ASSERT_EQ(0, rrpc__rmt_tcp_encode(&h, b));
  const uint8_t want[] = {'R', 'M', 'E', 'M', 1, 1, 0, 0, 1, 2, 3, 4, 0, 0, 0, 5, 0, 0, 0, 6,
                          0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0x20};
  EXPECT_EQ(0, memcmp(want, b, sizeof(b)));
  rrpc__rmt_tcp_hdr d;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_tcp_decode(b, 39, kFrame, &d));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_tcp_decode(b, sizeof(b), 0x1f, &d)) << "payload over max_frame";
  for (int i : {0, 4, 5, 6, 7}) {
    uint8_t x[RRPC_RMT_TCP_HDR_LEN];
    memcpy(x, b, sizeof(x));
    x[i] ^= 0x40;
    EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_tcp_decode(x, sizeof(x), kFrame, &d)) << i;
  }
  // Fields a type does not use.
  rrpc__rmt_tcp_hdr bad = h;
  bad.type = RRPC_RMT_TCP_DONE;
  EXPECT_EQ(-EINVAL, rrpc__rmt_tcp_encode(&bad, b)) << "DONE with flags, tag and length";
  bad = h;
  bad.type = RRPC_RMT_TCP_CTL;
  EXPECT_EQ(-EINVAL, rrpc__rmt_tcp_encode(&bad, b));
  memset(&bad, 0, sizeof(bad));
  bad.type = RRPC_RMT_TCP_CTL;
  bad.length = RRPC_RMT_MSG_LEN;
  EXPECT_EQ(0, rrpc__rmt_tcp_encode(&bad, b));
  bad.status = 1;
  EXPECT_EQ(-EINVAL, rrpc__rmt_tcp_encode(&bad, b));
  bad = h;
  bad.offset = UINT64_MAX;
  EXPECT_EQ(-EINVAL, rrpc__rmt_tcp_encode(&bad, b));
  memset(&bad, 0, sizeof(bad));
  bad.type = RRPC_RMT_TCP_READ_RESP;
  bad.status = -RRPC_EREMOTERANGE;
  bad.length = 5;
  EXPECT_EQ(-EINVAL, rrpc__rmt_tcp_encode(&bad, b)) << "an error carries no payload";
  bad.length = 0;
  ASSERT_EQ(0, rrpc__rmt_tcp_encode(&bad, b));
  ASSERT_EQ(0, rrpc__rmt_tcp_decode(b, sizeof(b), kFrame, &d));
  EXPECT_EQ(-RRPC_EREMOTERANGE, d.status);
}

}  // namespace
