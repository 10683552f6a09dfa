// remote_codec_unittest.cc - remote memory's token and control-message
// codecs (src/rrpc/remote/wire.h) and rrpc_remote_token_inspect: byte
// layouts, round trips, and every malformed case the decoders refuse.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

extern "C" {
#include "rrpc/errors.h"
#include "rrpc/remote.h"
#include "rrpc/remote/wire.h"
}

namespace {

rrpc__rmt_token Tok() {
  rrpc__rmt_token t;
  memset(&t, 0, sizeof(t));
  t.rights = RRPC_REMOTE_READ | RRPC_REMOTE_WRITE;
  t.id = 7;
  t.generation = 0x01020304;
  t.conn_id = 0x1122334455667788ull;
  t.length = 64ull << 20;
  t.rkey = 0xa0b0c0d0;
  t.addr = 0x7f0000001000ull;
  return t;
}

TEST(RemoteToken, LayoutIsBigEndianAndRoundTrips) {
  rrpc__rmt_token t = Tok(), d;
  uint8_t b[RRPC_RMT_TOKEN_LEN];
  ASSERT_EQ(0, rrpc__rmt_token_encode(&t, b));
  const uint8_t head[] = {0x52, 0x4d, 1, 3, 0, 0, 0, 7, 1, 2, 3, 4, 0x11, 0x22, 0x33, 0x44};
  EXPECT_EQ(0, memcmp(b, head, sizeof(head)));
  EXPECT_EQ(0x04, b[24]);  // length 64 MiB = 0x04000000 in bytes 20..27
  EXPECT_EQ(0x00, b[27]);
  EXPECT_EQ(0xa0, b[28]);
  EXPECT_EQ(0x10, b[38]);
  ASSERT_EQ(0, rrpc__rmt_token_decode(b, sizeof(b), &d));
  EXPECT_EQ(t.id, d.id);
  EXPECT_EQ(t.generation, d.generation);
  EXPECT_EQ(t.conn_id, d.conn_id);
  EXPECT_EQ(t.length, d.length);
  EXPECT_EQ(t.rkey, d.rkey);
  EXPECT_EQ(t.addr, d.addr);
  EXPECT_EQ(t.rights, d.rights);
}

TEST(RemoteToken, EncoderRefusesWhatDecoderWould) {
  uint8_t b[RRPC_RMT_TOKEN_LEN];
  memset(b, 0xee, sizeof(b));
  rrpc__rmt_token t = Tok();
  t.rights = 0;
  EXPECT_EQ(-EINVAL, rrpc__rmt_token_encode(&t, b));
  t = Tok();
  t.rights = 4;
  EXPECT_EQ(-EINVAL, rrpc__rmt_token_encode(&t, b));
  t = Tok();
  t.id = 0;
  EXPECT_EQ(-EINVAL, rrpc__rmt_token_encode(&t, b));
  t = Tok();
  t.length = 0;
  EXPECT_EQ(-EINVAL, rrpc__rmt_token_encode(&t, b));
  t = Tok();
  t.addr = UINT64_MAX;  // one byte at the very top is fine, two wrap
  t.length = 1;
  EXPECT_EQ(0, rrpc__rmt_token_encode(&t, b));
  t.length = 2;
  uint8_t keep[RRPC_RMT_TOKEN_LEN];
  memcpy(keep, b, sizeof(b));
  EXPECT_EQ(-EINVAL, rrpc__rmt_token_encode(&t, b));
  EXPECT_EQ(0, memcmp(keep, b, sizeof(b))) << "a refused encode leaves out untouched";
}

TEST(RemoteToken, DecoderRefusesMalformed) {
  rrpc__rmt_token t = Tok(), d;
  uint8_t b[RRPC_RMT_TOKEN_LEN + 1];
  ASSERT_EQ(0, rrpc__rmt_token_encode(&t, b));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_token_decode(b, RRPC_RMT_TOKEN_LEN - 1, &d));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_token_decode(b, RRPC_RMT_TOKEN_LEN + 1, &d));
  const struct {
    size_t off;
    uint8_t val;
  } bad[] = {{0, 0x53}, {1, 0x4e}, {2, 2}, {2, 0}, {3, 0}, {3, 4}, {3, 0x83}};
  for (auto &c : bad) {
    uint8_t x[RRPC_RMT_TOKEN_LEN];
    memcpy(x, b, sizeof(x));
    x[c.off] = c.val;
    EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_token_decode(x, sizeof(x), &d)) << c.off;
  }
  uint8_t x[RRPC_RMT_TOKEN_LEN];
  memcpy(x, b, sizeof(x));
  memset(x + 4, 0, 4);  // id 0
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_token_decode(x, sizeof(x), &d));
  memcpy(x, b, sizeof(x));
  memset(x + 20, 0, 8);  // length 0
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_token_decode(x, sizeof(x), &d));
  memcpy(x, b, sizeof(x));
  memset(x + 32, 0xff, 8);  // address + 64 MiB wraps
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_token_decode(x, sizeof(x), &d));
}

TEST(RemoteToken, PublicInspect) {
  rrpc__rmt_token t = Tok();
  rrpc_remote_token tok;
  rrpc_remote_token_info info;
  ASSERT_EQ(0, rrpc__rmt_token_encode(&t, tok.bytes));
  ASSERT_EQ(0, rrpc_remote_token_inspect(tok.bytes, sizeof(tok.bytes), &info));
  EXPECT_EQ(7u, info.id);
  EXPECT_EQ(0x01020304u, info.generation);
  EXPECT_EQ(0x1122334455667788ull, info.conn_id);
  EXPECT_EQ(64ull << 20, info.length);
  EXPECT_EQ(unsigned(RRPC_REMOTE_READ | RRPC_REMOTE_WRITE), info.rights);
  EXPECT_EQ(-RRPC_EPARSE, rrpc_remote_token_inspect(tok.bytes, 39, &info));
  EXPECT_EQ(-EINVAL, rrpc_remote_token_inspect(nullptr, 40, &info));
  EXPECT_EQ(-EINVAL, rrpc_remote_token_inspect(tok.bytes, 40, nullptr));
  EXPECT_STREQ("EREMOTECONN", rrpc_err_name(-RRPC_EREMOTECONN));
  EXPECT_STREQ("remote access outside the region", rrpc_strerror(-RRPC_EREMOTERANGE));
}

rrpc__rmt_msg Msg(uint8_t type) {
  rrpc__rmt_msg m;
  memset(&m, 0, sizeof(m));
  m.type = type;
  m.seq = 0x0102;
  m.id = 9;
  m.generation = 0xcafef00d;
  if (type == RRPC_RMT_T_ANNOUNCE) {
    m.rights = RRPC_REMOTE_WRITE;
    m.rkey = 0x11223344;
    m.addr = 0x1000;
    m.length = 4096;
  } else if (type == RRPC_RMT_T_NOTIFY) {
    m.tag = 0xdeadbeef;
    m.offset = 4095;
    m.length = 1;
  } else if (type == RRPC_RMT_T_HELLO) {
    m.id = m.generation = 0;
    m.conn_id = 0x0102030405060708ull;
  }
  return m;
}

TEST(RemoteMsg, EveryTypeRoundTripsAndReencodesToSameBytes) {
  for (uint8_t type : {RRPC_RMT_T_ANNOUNCE, RRPC_RMT_T_REVOKE, RRPC_RMT_T_NOTIFY, RRPC_RMT_T_HELLO}) {
    rrpc__rmt_msg m = Msg(type), d;
    uint8_t b[RRPC_RMT_MSG_LEN], b2[RRPC_RMT_MSG_LEN];
    ASSERT_EQ(0, rrpc__rmt_msg_encode(&m, b)) << int(type);
    EXPECT_EQ(type, b[0]);
    EXPECT_EQ(44, b[1]);
    EXPECT_EQ(0x01, b[2]);
    EXPECT_EQ(0x02, b[3]);
    EXPECT_TRUE(rrpc__rmt_is_msg(b, sizeof(b)));
    ASSERT_EQ(0, rrpc__rmt_msg_decode(b, sizeof(b), &d)) << int(type);
    EXPECT_EQ(0, memcmp(&m, &d, sizeof(m))) << int(type);  // both memset, so padding agrees
    ASSERT_EQ(0, rrpc__rmt_msg_encode(&d, b2));
    EXPECT_EQ(0, memcmp(b, b2, sizeof(b)));
  }
}

TEST(RemoteMsg, AnnounceAndNotifyLayout) {
  rrpc__rmt_msg m = Msg(RRPC_RMT_T_ANNOUNCE);
  uint8_t b[RRPC_RMT_MSG_LEN];
  ASSERT_EQ(0, rrpc__rmt_msg_encode(&m, b));
  const uint8_t want[] = {0xe8, 44, 1, 2, 0, 0, 0, 0, 0, 0, 0, 9, 0xca, 0xfe, 0xf0, 0x0d,
                          2, 0, 0, 0, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0, 0, 0x10, 0,
                          0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0};
  EXPECT_EQ(0, memcmp(want, b, sizeof(b)));
  m = Msg(RRPC_RMT_T_NOTIFY);
  ASSERT_EQ(0, rrpc__rmt_msg_encode(&m, b));
  const uint8_t want_n[] = {0xea, 44, 1, 2, 0, 0, 0, 0, 0, 0, 0, 9, 0xca, 0xfe, 0xf0, 0x0d,
                            0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0f, 0xff,
                            0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
  EXPECT_EQ(0, memcmp(want_n, b, sizeof(b)));
}

TEST(RemoteMsg, DecoderRefusesEveryReservedByteAndBadField) {
  for (uint8_t type : {RRPC_RMT_T_ANNOUNCE, RRPC_RMT_T_REVOKE, RRPC_RMT_T_NOTIFY, RRPC_RMT_T_HELLO}) {
    rrpc__rmt_msg m = Msg(type), d;
    uint8_t b[RRPC_RMT_MSG_LEN];
    ASSERT_EQ(0, rrpc__rmt_msg_encode(&m, b));
    EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_msg_decode(b, 43, &d));
    // A byte is reserved iff setting it (where it was zero) is refused;
    // the used fields are listed per type.
    std::vector<bool> used(RRPC_RMT_MSG_LEN, false);
    for (int i = 0; i < 4; i++) used[i] = true;
    int end = type == RRPC_RMT_T_REVOKE ? 16 : (type == RRPC_RMT_T_HELLO ? 16 : 40);
    for (int i = 8; i < end; i++) used[i] = true;
    if (type == RRPC_RMT_T_ANNOUNCE)
      for (int i = 17; i < 20; i++) used[i] = false;
    if (type == RRPC_RMT_T_NOTIFY)
      for (int i = 20; i < 24; i++) used[i] = false;
    for (int i = 0; i < RRPC_RMT_MSG_LEN; i++) {
      if (used[i]) continue;
      uint8_t x[RRPC_RMT_MSG_LEN];
      memcpy(x, b, sizeof(x));
      x[i] = 0x40;
      EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_msg_decode(x, sizeof(x), &d)) << int(type) << " byte " << i;
    }
    uint8_t x[RRPC_RMT_MSG_LEN];
    memcpy(x, b, sizeof(x));
    x[1] = 45;
    EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_msg_decode(x, sizeof(x), &d));
  }
  rrpc__rmt_msg d;
  uint8_t b[RRPC_RMT_MSG_LEN] = {0xe7, 44};
  EXPECT_FALSE(rrpc__rmt_is_msg(b, sizeof(b)));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_msg_decode(b, sizeof(b), &d));
  EXPECT_FALSE(rrpc__rmt_is_msg(b, 0));
  // Field rules, on the wire and in the encoder.
  rrpc__rmt_msg m = Msg(RRPC_RMT_T_ANNOUNCE);
  m.rights = 0;
  EXPECT_EQ(-EINVAL, rrpc__rmt_msg_encode(&m, b));
  m = Msg(RRPC_RMT_T_ANNOUNCE);
  m.addr = UINT64_MAX - 10;
  EXPECT_EQ(-EINVAL, rrpc__rmt_msg_encode(&m, b));
  m = Msg(RRPC_RMT_T_REVOKE);
  m.id = 0;
  EXPECT_EQ(-EINVAL, rrpc__rmt_msg_encode(&m, b));
  m = Msg(RRPC_RMT_T_NOTIFY);
  m.offset = UINT64_MAX;
  m.length = 1;
  EXPECT_EQ(-EINVAL, rrpc__rmt_msg_encode(&m, b));
  m = Msg(RRPC_RMT_T_HELLO);
  m.conn_id = 0;
  EXPECT_EQ(-EINVAL, rrpc__rmt_msg_encode(&m, b));
  m = Msg(RRPC_RMT_T_ANNOUNCE);
  ASSERT_EQ(0, rrpc__rmt_msg_encode(&m, b));
  b[16] = 4;  // unknown rights bit
  EXPECT_EQ(-RRPC_EPARSE, rrpc__rmt_msg_decode(b, sizeof(b), &d));
}

TEST(RemoteMsg, RandomBytesNeverCrashAndWhatDecodesReencodes) {
  std::mt19937 rng(36);
  int accepted = 0;
  for (int n = 0; n < 20000; n++) {
    uint8_t b[RRPC_RMT_MSG_LEN] = {0};
    b[0] = uint8_t(0xe8 + rng() % 4);
    b[1] = 44;
    for (int i = 2; i < RRPC_RMT_MSG_LEN; i++)
      if (rng() % 3 == 0) b[i] = uint8_t(rng());
    rrpc__rmt_msg d;
    if (rrpc__rmt_msg_decode(b, sizeof(b), &d) != 0) continue;
    accepted++;
    uint8_t b2[RRPC_RMT_MSG_LEN];
    ASSERT_EQ(0, rrpc__rmt_msg_encode(&d, b2));
    ASSERT_EQ(0, memcmp(b, b2, sizeof(b)));
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
