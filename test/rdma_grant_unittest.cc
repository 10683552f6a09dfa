// rdma_grant_unittest.cc - the elastic ring's control-message codec and
// immediate (transport/rdma/wire/grant.h): byte layouts, round trips, and
// every malformed case (length, type, reserved bytes and bits, out-of-range
// fields), plus the bytes test/tshark/check-elastic.sh feeds to tshark.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "rrpc/errors.h"
#include "transport/rdma/wire/grant.h"
#include "transport/smc/cdc.h"
}

namespace {

using Bytes = std::vector<uint8_t>;

rrpc__grant_msg Grant(uint16_t id, uint8_t code, uint32_t rkey, uint64_t addr, uint8_t flags = 0) {
  rrpc__grant_msg m;
  memset(&m, 0, sizeof(m));
  m.type = RRPC_GRANT_T_GRANT;
  m.seq = 1;
  m.token = 0x01020304;
  m.u.grant.id = id;
  m.u.grant.size_code = code;
  m.u.grant.rkey = rkey;
  m.u.grant.addr = addr;
  m.u.grant.flags = flags;
  return m;
}

rrpc__grant_msg Retire(uint16_t id, uint8_t reason) {
  rrpc__grant_msg m;
  memset(&m, 0, sizeof(m));
  m.type = RRPC_GRANT_T_RETIRE;
  m.seq = 2;
  m.token = 0x01020304;
  m.u.retire.id = id;
  m.u.retire.reason = reason;
  return m;
}

rrpc__grant_msg Want(uint32_t bytes) {
  rrpc__grant_msg m;
  memset(&m, 0, sizeof(m));
  m.type = RRPC_GRANT_T_WANT;
  m.seq = 3;
  m.token = 0x0a0b0c0d;
  m.u.want.bytes = bytes;
  return m;
}

rrpc__grant_msg Handback(uint16_t id, uint32_t written, uint8_t flags = 0) {
  rrpc__grant_msg m;
  memset(&m, 0, sizeof(m));
  m.type = RRPC_GRANT_T_HANDBACK;
  m.seq = 4;
  m.token = 0x0a0b0c0d;
  m.u.handback.id = id;
  m.u.handback.written = written;
  m.u.handback.flags = flags;
  return m;
}

int EncodeTo(const rrpc__grant_msg& m, uint8_t* out) { return rrpc__grant_encode(&m, out); }

Bytes Encode(const rrpc__grant_msg& m) {
  Bytes b(RRPC_GRANT_MSG_LEN);
  EXPECT_EQ(0, rrpc__grant_encode(&m, b.data()));
  return b;
}

std::vector<rrpc__grant_msg> AllKinds() {
  return {Grant(7, 4, 0xdeadbeef, 0x00007f1234560000ull), Grant(65535, 17, 1, ~0ull, RRPC_GRANT_F_IDLE),
          Retire(7, RRPC_RETIRE_HELD),  Retire(1, RRPC_RETIRE_SHRINK),
          Want(1),                      Want(0xffffffffu),
          Handback(9, 0),               Handback(65535, 0x10000, RRPC_HANDBACK_F_IDLE)};
}

bool Same(const rrpc__grant_msg& a, const rrpc__grant_msg& b) {
  if (a.type != b.type || a.seq != b.seq || a.token != b.token) return false;
  switch (a.type) {
  case RRPC_GRANT_T_GRANT:
    return a.u.grant.id == b.u.grant.id && a.u.grant.flags == b.u.grant.flags &&
           a.u.grant.size_code == b.u.grant.size_code && a.u.grant.rkey == b.u.grant.rkey &&
           a.u.grant.addr == b.u.grant.addr;
  case RRPC_GRANT_T_RETIRE:
    return a.u.retire.id == b.u.retire.id && a.u.retire.reason == b.u.retire.reason;
  case RRPC_GRANT_T_WANT:
    return a.u.want.bytes == b.u.want.bytes;
  default:
    return a.u.handback.id == b.u.handback.id && a.u.handback.flags == b.u.handback.flags &&
           a.u.handback.written == b.u.handback.written;
  }
}

TEST(GrantCodec, GrantBytes) {
  Bytes b = Encode(Grant(0x0107, 4, 0xdeadbeef, 0x0000123456789abcull, RRPC_GRANT_F_IDLE));
  const Bytes want = {0xe1, 44,   0x00, 0x01, 0x01, 0x02, 0x03, 0x04, 0x01, 0x07, 0x80,
                      0x04, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x12, 0x34, 0x56, 0x78,
                      0x9a, 0xbc, 0,    0,    0,    0,    0,    0,    0,    0,    0,
                      0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0};
  EXPECT_EQ(want, b);
}

TEST(GrantCodec, OtherLayouts) {
  Bytes r = Encode(Retire(0x0203, RRPC_RETIRE_SHRINK));
  EXPECT_EQ(0xe2, r[0]);
  EXPECT_EQ(0x02, r[8]);
  EXPECT_EQ(0x03, r[9]);
  EXPECT_EQ(2, r[10]);
  Bytes w = Encode(Want(0x00100000));
  EXPECT_EQ(0xe3, w[0]);
  EXPECT_EQ((Bytes{0x00, 0x10, 0x00, 0x00}), Bytes(w.begin() + 8, w.begin() + 12));
  Bytes h = Encode(Handback(0x0405, 0x01020304, RRPC_HANDBACK_F_IDLE));
  EXPECT_EQ(0xe4, h[0]);
  EXPECT_EQ((Bytes{0x04, 0x05, 0x80, 0x00, 0x01, 0x02, 0x03, 0x04}), Bytes(h.begin() + 8, h.begin() + 16));
  for (const Bytes* p : {&r, &w, &h}) {
    EXPECT_EQ(44, (*p)[1]);
    EXPECT_EQ(Bytes(44 - 16, 0), Bytes(p->begin() + 16, p->end()));
  }
}

TEST(GrantCodec, RoundTripEveryKind) {
  for (const rrpc__grant_msg& m : AllKinds()) {
    Bytes b = Encode(m);
    rrpc__grant_msg d;
    ASSERT_EQ(0, rrpc__grant_decode(b.data(), b.size(), &d)) << int(m.type);
    EXPECT_TRUE(Same(m, d)) << int(m.type);
    EXPECT_TRUE(rrpc__grant_is_ctl(b.data(), b.size()));
  }
}

TEST(GrantCodec, RoundTripRandom) {
  std::mt19937_64 rng(12);
  for (int i = 0; i < 20000; i++) {
    rrpc__grant_msg m;
    memset(&m, 0, sizeof(m));
    m.type = (uint8_t)(RRPC_GRANT_T_GRANT + rng() % 4);
    m.seq = (uint16_t)rng();
    m.token = (uint32_t)rng();
    uint16_t id = (uint16_t)(1 + rng() % 65535);
    switch (m.type) {
    case RRPC_GRANT_T_GRANT:
      m.u.grant = {id, (uint8_t)(rng() % 2 ? RRPC_GRANT_F_IDLE : 0), (uint8_t)(rng() % 18), (uint32_t)rng(), rng()};
      break;
    case RRPC_GRANT_T_RETIRE: m.u.retire = {id, (uint8_t)(1 + rng() % 2)}; break;
    case RRPC_GRANT_T_WANT: m.u.want.bytes = (uint32_t)(1 + rng() % 0xffffffffu); break;
    default: m.u.handback = {id, (uint8_t)(rng() % 2 ? RRPC_HANDBACK_F_IDLE : 0), (uint32_t)rng()}; break;
    }
    Bytes b = Encode(m);
    rrpc__grant_msg d;
    ASSERT_EQ(0, rrpc__grant_decode(b.data(), b.size(), &d));
    ASSERT_TRUE(Same(m, d));
  }
}

TEST(GrantCodec, WrongLength) {
  for (const rrpc__grant_msg& m : AllKinds()) {
    Bytes b = Encode(m);
    rrpc__grant_msg d;
    for (size_t n = 0; n < b.size(); n++) EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(b.data(), n, &d));
    Bytes longer = b;
    longer.push_back(0);
    EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(longer.data(), longer.size(), &d));
    for (int lb : {0, 43, 45, 64, 255}) {
      Bytes c = b;
      c[1] = (uint8_t)lb;
      EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(c.data(), c.size(), &d)) << lb;
    }
  }
}

TEST(GrantCodec, WrongType) {
  Bytes b = Encode(Want(5));
  rrpc__grant_msg d;
  for (int t = 0; t < 256; t++) {
    b[0] = (uint8_t)t;
    bool known = t >= RRPC_GRANT_T_GRANT && t <= RRPC_GRANT_T_HANDBACK;
    EXPECT_EQ(known, rrpc__grant_is_ctl(b.data(), b.size()) == 1) << t;
    if (!known) {
      EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(b.data(), b.size(), &d)) << t;
    }
  }
  EXPECT_EQ(0, rrpc__grant_is_ctl(b.data(), 0));
  // A CDC is not a control message, and a control message is not a CDC.
  rrpc__cdc_msg cm;
  memset(&cm, 0, sizeof(cm));
  uint8_t cdc[RRPC_CDC_LEN];
  rrpc__cdc_encode(&cm, cdc);
  EXPECT_EQ(0, rrpc__grant_is_ctl(cdc, sizeof(cdc)));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(cdc, sizeof(cdc), &d));
  Bytes g = Encode(Grant(1, 0, 2, 3));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__cdc_decode(g.data(), g.size(), &cm));
}

// Every byte that is reserved for a type, set to any non-zero value, and every
// reserved bit of a flags byte, makes the message malformed.
TEST(GrantCodec, ReservedBytesAndBits) {
  const size_t used_to[] = {24, 11, 12, 16};  // GRANT, RETIRE, WANT, HANDBACK
  for (const rrpc__grant_msg& m : AllKinds()) {
    Bytes b = Encode(m);
    rrpc__grant_msg d;
    size_t from = used_to[m.type - RRPC_GRANT_T_GRANT];
    for (size_t i = from; i < b.size(); i++)
      for (int bit = 0; bit < 8; bit++) {
        Bytes c = b;
        c[i] ^= (uint8_t)(1u << bit);
        EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(c.data(), c.size(), &d)) << int(m.type) << " " << i;
      }
  }
  rrpc__grant_msg d;
  Bytes g = Encode(Grant(3, 1, 2, 3));
  for (int bit = 0; bit < 7; bit++) {  // GRANT flags: only 0x80 is defined
    Bytes c = g;
    c[10] |= (uint8_t)(1u << bit);
    EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(c.data(), c.size(), &d)) << bit;
  }
  Bytes h = Encode(Handback(3, 0));
  for (int bit = 0; bit < 7; bit++) {  // HANDBACK flags: only 0x80
    Bytes c = h;
    c[10] |= (uint8_t)(1u << bit);
    EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(c.data(), c.size(), &d)) << bit;
  }
  for (int bit = 0; bit < 8; bit++) {  // HANDBACK byte 11 is reserved
    Bytes c = h;
    c[11] |= (uint8_t)(1u << bit);
    EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(c.data(), c.size(), &d)) << bit;
  }
}

TEST(GrantCodec, OutOfRangeFields) {
  rrpc__grant_msg d;
  uint8_t out[RRPC_GRANT_MSG_LEN];
  memset(out, 0xaa, sizeof(out));
  // Encoder refuses what the decoder would refuse, and leaves out alone.
  EXPECT_EQ(-EINVAL, EncodeTo(Grant(0, 1, 2, 3), out));
  EXPECT_EQ(-EINVAL, EncodeTo(Grant(1, 18, 2, 3), out));
  EXPECT_EQ(-EINVAL, EncodeTo(Grant(1, 1, 2, 3, 0x01), out));
  EXPECT_EQ(-EINVAL, EncodeTo(Retire(0, 1), out));
  EXPECT_EQ(-EINVAL, EncodeTo(Retire(1, 0), out));
  EXPECT_EQ(-EINVAL, EncodeTo(Retire(1, 3), out));
  EXPECT_EQ(-EINVAL, EncodeTo(Want(0), out));
  EXPECT_EQ(-EINVAL, EncodeTo(Handback(0, 1), out));
  EXPECT_EQ(-EINVAL, EncodeTo(Handback(1, 1, 0x40), out));
  rrpc__grant_msg bad = Want(1);
  bad.type = 0xe5;
  EXPECT_EQ(-EINVAL, EncodeTo(bad, out));
  for (uint8_t b : out) EXPECT_EQ(0xaa, b);

  // The same fields forged on the wire.
  Bytes g = Encode(Grant(1, 17, 2, 3));
  for (int code = 18; code < 256; code++) {
    Bytes c = g;
    c[11] = (uint8_t)code;
    EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(c.data(), c.size(), &d)) << code;
  }
  for (Bytes c : {Encode(Grant(1, 0, 2, 3)), Encode(Retire(1, 1)), Encode(Handback(1, 0))}) {
    c[8] = c[9] = 0;  // piece id 0
    EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(c.data(), c.size(), &d));
  }
  Bytes r = Encode(Retire(1, 1));
  for (int reason : {0, 3, 0x80, 255}) {
    r[10] = (uint8_t)reason;
    EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(r.data(), r.size(), &d)) << reason;
  }
  Bytes w = Encode(Want(1));
  w[11] = 0;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(w.data(), w.size(), &d));
}

// A failed decode leaves *out untouched.
TEST(GrantCodec, FailureWritesNothing) {
  Bytes b = Encode(Grant(1, 0, 2, 3));
  b[30] = 1;
  rrpc__grant_msg d;
  memset(&d, 0x5a, sizeof(d));
  rrpc__grant_msg before = d;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__grant_decode(b.data(), b.size(), &d));
  EXPECT_EQ(0, memcmp(&before, &d, sizeof(d)));
}

TEST(GrantCodec, PieceSizes) {
  EXPECT_EQ(4096u, rrpc__grant_piece_len(0));
  EXPECT_EQ(512u << 20, rrpc__grant_piece_len(17));
  for (uint8_t c = 0; c <= RRPC_PIECE_CODE_MAX; c++) {
    uint8_t back = 99;
    ASSERT_EQ(0, rrpc__grant_piece_code(rrpc__grant_piece_len(c), &back));
    EXPECT_EQ(c, back);
  }
  uint8_t code = 7;
  for (uint32_t len : {0u, 1u, 2048u, 4095u, 4097u, 12288u, 1u << 30, 0xffffffffu})
    EXPECT_EQ(-EINVAL, rrpc__grant_piece_code(len, &code)) << len;
  EXPECT_EQ(7, code);
}

TEST(GrantImm, PackUnpack) {
  rrpc__eimm a = {1, 127, 255, 0xffff};
  EXPECT_EQ(0xffffffffu, rrpc__eimm_pack(&a));
  rrpc__eimm b = {0, 3, 2, 0x0102};
  uint32_t v = rrpc__eimm_pack(&b);
  EXPECT_EQ(0x03020102u, v);
  rrpc__eimm c = rrpc__eimm_unpack(v);
  EXPECT_EQ(0, c.ack_req);
  EXPECT_EQ(3, c.credits);
  EXPECT_EQ(2, c.returns);
  EXPECT_EQ(0x0102, c.piece);
  std::mt19937 rng(5);
  for (int i = 0; i < 10000; i++) {
    uint32_t x = rng();
    rrpc__eimm u = rrpc__eimm_unpack(x);
    ASSERT_EQ(x, rrpc__eimm_pack(&u));
  }
}

// Writes one line per message, "<name> <c2s|s2c> <hex>", for
// test/tshark/check-elastic.sh (only when RRPC_GRANT_TSHARK_OUT is set).
TEST(GrantTshark, Export) {
  const char* path = getenv("RRPC_GRANT_TSHARK_OUT");
  if (path == nullptr) GTEST_SKIP() << "RRPC_GRANT_TSHARK_OUT not set";
  FILE* f = fopen(path, "w");
  ASSERT_NE(nullptr, f);
  struct Row {
    const char* name;
    const char* dir;
    Bytes bytes;
  };
  rrpc__cdc_msg cm;
  memset(&cm, 0, sizeof(cm));
  cm.seq = 1;
  cm.token = 0x01020304;
  Bytes cdc(RRPC_CDC_LEN);
  rrpc__cdc_encode(&cm, cdc.data());
  const Row rows[] = {
      {"cdc", "s2c", cdc},
      {"grant", "s2c", Encode(Grant(7, 4, 0xdeadbeef, 0x00007f1234560000ull, RRPC_GRANT_F_IDLE))},
      {"retire", "s2c", Encode(Retire(7, RRPC_RETIRE_HELD))},
      {"want", "c2s", Encode(Want(1u << 20))},
      {"handback", "c2s", Encode(Handback(9, 4096, RRPC_HANDBACK_F_IDLE))},
  };
  for (const Row& r : rows) {
    fprintf(f, "%s %s ", r.name, r.dir);
    for (uint8_t b : r.bytes) fprintf(f, "%02x", b);
    fprintf(f, "\n");
  }
  fclose(f);
}

}  // namespace
