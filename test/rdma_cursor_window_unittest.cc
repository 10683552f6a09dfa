// rdma_cursor_window_unittest.cc - the cursor dialect's flow control
// (transport/rdma/wire/cursor_window.h): a replay of the Linux 6.1 SMC-R
// captures byte for byte, the ring wrap, every refused CDC (a rogue peer's
// moves) and the kernel's consumer-update rule.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test/common/test_util.h"

extern "C" {
#include "rrpc/errors.h"
#include "transport/rdma/wire/cursor_window.h"
#include "transport/smc/cdc.h"
}

namespace {

constexpr uint32_t kRing = 65536;  // both RMBs in the captures (net.smc.rmem default)

rrpc__cdc_msg Decode(const std::string& rel) {
  std::vector<uint8_t> b = rrpc_test::load_smc_hex(rel);
  rrpc__cdc_msg m;
  EXPECT_EQ(0, rrpc__cdc_decode(b.data(), b.size(), &m)) << rel;
  return m;
}

std::vector<uint8_t> Encode(const rrpc__cdc_msg& m) {
  std::vector<uint8_t> out(RRPC_CDC_LEN);
  rrpc__cdc_encode(&m, out.data());
  return out;
}

// Two windows play the capture's client and server: every CDC each side
// makes is the kernel's, byte for byte, and each side accepts the other's.
void Replay(const std::string& dir, const char* const files[8]) {
  // The tokens each side put in the CDCs it received.
  uint32_t server_token = Decode(dir + files[0]).token;
  uint32_t client_token = Decode(dir + files[1]).token;
  rrpc__cur_window cli, srv;
  ASSERT_EQ(0, rrpc__cur_init(&cli, kRing, kRing, client_token));
  ASSERT_EQ(0, rrpc__cur_init(&srv, kRing, kRing, server_token));
  for (int i = 0; i < 8; i++) {
    bool c2s = i % 2 == 0;
    bool close = i >= 6;
    rrpc__cur_window& me = c2s ? cli : srv;
    rrpc__cur_window& peer = c2s ? srv : cli;
    SCOPED_TRACE(files[i]);
    if (!close) {  // 64 bytes of 0x01, written before the CDC
      rrpc__cur_seg seg[2];
      int nseg = 0;
      ASSERT_EQ(64u, rrpc__cur_tx_plan(&me, 64, seg, &nseg));
      ASSERT_EQ(1, nseg);
      rrpc__cur_tx_commit(&me, 64);
    }
    rrpc__cdc_msg m;
    rrpc__cur_make_cdc(&me, c2s ? server_token : client_token, close ? RRPC_CDC_CS_CLOSED : 0, &m);
    std::vector<uint8_t> want = rrpc_test::load_smc_hex(dir + files[i]);
    EXPECT_EQ(want, Encode(m));
    rrpc__cur_event ev;
    rrpc__cur_violation why;
    ASSERT_EQ(0, rrpc__cur_on_cdc(&peer, &m, &ev, &why)) << rrpc__cur_violation_text(why);
    EXPECT_EQ(close ? 0u : 64u, ev.new_bytes);
    EXPECT_EQ(close ? RRPC_CDC_CS_CLOSED : 0, ev.conn_flags);
    rrpc__cur_rx_consume(&peer, ev.new_bytes);  // read at once, as pp does
    // 64-byte reads never make an update due by themselves: the kernel
    // sent none in between (its consumer cursor rides on its data CDCs).
    EXPECT_EQ(0, rrpc__cur_update_due(&peer));
  }
  // Nothing may follow a close.
  rrpc__cdc_msg late;
  rrpc__cur_make_cdc(&cli, server_token, 0, &late);
  rrpc__cur_event ev;
  rrpc__cur_violation why;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__cur_on_cdc(&srv, &late, &ev, &why));
  EXPECT_EQ(RRPC_CUR_AFTER_CLOSE, why);
}

TEST(CursorCapture, FirstContactReplaysByteForByte) {
  static const char* const f[8] = {"12-f020-c2s-cdc.hex", "14-f025-s2c-cdc.hex", "16-f029-c2s-cdc.hex",
                                   "18-f033-s2c-cdc.hex", "20-f037-c2s-cdc.hex", "22-f041-s2c-cdc.hex",
                                   "23-f044-c2s-cdc-close.hex", "24-f047-s2c-cdc-close.hex"};
  Replay("smc-r-first-contact/", f);
}

TEST(CursorCapture, SecondConnectionReplaysByteForByte) {
  static const char* const f[8] = {"12-f018-c2s-cdc.hex", "14-f023-s2c-cdc.hex", "16-f026-c2s-cdc.hex",
                                   "18-f031-s2c-cdc.hex", "20-f034-c2s-cdc.hex", "22-f038-s2c-cdc.hex",
                                   "23-f041-c2s-cdc-close.hex", "24-f044-s2c-cdc-close.hex"};
  Replay("smc-r-second-conn/", f);
}

// ---- sending -----------------------------------------------------------------

TEST(CursorTx, PlanWrapsTheRingInTwoSegments) {
  rrpc__cur_window w;
  ASSERT_EQ(0, rrpc__cur_init(&w, 16384, 16384, 7));
  rrpc__cur_tx_commit(&w, 16000);
  w.tx_peer_cons = 16000;  // all consumed
  rrpc__cur_seg seg[2];
  int nseg = 0;
  ASSERT_EQ(1000u, rrpc__cur_tx_plan(&w, 1000, seg, &nseg));
  ASSERT_EQ(2, nseg);
  EXPECT_EQ(16000u, seg[0].off);
  EXPECT_EQ(384u, seg[0].len);
  EXPECT_EQ(0u, seg[1].off);
  EXPECT_EQ(616u, seg[1].len);
  rrpc__cur_tx_commit(&w, 1000);
  rrpc__cdc_msg m;
  rrpc__cur_make_cdc(&w, 9, 0, &m);
  EXPECT_EQ(1, m.prod.wrap);
  EXPECT_EQ(616u, m.prod.count);
  EXPECT_EQ(1, m.seq);
  EXPECT_EQ(9u, m.token);
}

TEST(CursorTx, NeverPlansPastThePeersConsumerCursor) {
  rrpc__cur_window w;
  ASSERT_EQ(0, rrpc__cur_init(&w, 16384, 16384, 7));
  rrpc__cur_seg seg[2];
  int nseg = 0;
  EXPECT_EQ(16384u, rrpc__cur_tx_plan(&w, 1 << 20, seg, &nseg));
  rrpc__cur_tx_commit(&w, 16384);
  EXPECT_EQ(0u, rrpc__cur_tx_free(&w));
  EXPECT_EQ(0u, rrpc__cur_tx_plan(&w, 1, seg, &nseg));
  EXPECT_EQ(0, nseg);
}

// ---- receiving: what a rogue peer may try ------------------------------------

struct Rx : ::testing::Test {
  rrpc__cur_window w;
  rrpc__cdc_msg m;
  rrpc__cur_event ev;
  rrpc__cur_violation why = RRPC_CUR_OK;
  void SetUp() override {
    ASSERT_EQ(0, rrpc__cur_init(&w, 16384, 16384, 0x1234));
    std::memset(&m, 0, sizeof m);
    m.token = 0x1234;
  }
  void Prod(uint64_t off) { m.prod = rrpc__cdc_cursor_from_offset(off, 16384); }
  int Apply() {
    m.seq++;
    return rrpc__cur_on_cdc(&w, &m, &ev, &why);
  }
  void ExpectRefused(rrpc__cur_violation v) {
    rrpc__cur_window before = w;
    EXPECT_EQ(-RRPC_EPARSE, Apply());
    EXPECT_EQ(v, why) << rrpc__cur_violation_text(why);
    EXPECT_EQ(0, std::memcmp(&before, &w, sizeof w)) << "a refused CDC changed the window";
  }
};

TEST_F(Rx, HonestWritesAcrossTheWrap) {
  uint64_t total = 0;
  for (int i = 0; i < 10; i++) {
    Prod(total + 5000);
    ASSERT_EQ(0, Apply());
    EXPECT_EQ(5000u, ev.new_bytes);
    total += 5000;
    rrpc__cur_rx_consume(&w, 5000);
  }
  EXPECT_EQ(50000u, w.rx_prod);
}

TEST_F(Rx, ProducerPastTheFreeRoomIsRefused) {
  Prod(16384);
  ASSERT_EQ(0, Apply());  // exactly full: fine
  Prod(16385);
  ExpectRefused(RRPC_CUR_BAD_PROD);
  rrpc__cur_rx_consume(&w, 100);
  Prod(16384 + 101);
  ExpectRefused(RRPC_CUR_BAD_PROD);
  Prod(16384 + 100);
  EXPECT_EQ(0, Apply());
}

TEST_F(Rx, AWrongWrapIsRefused) {
  Prod(8000);
  ASSERT_EQ(0, Apply());
  rrpc__cur_rx_consume(&w, 8000);
  // The same count one wrap ahead claims a whole ring more than written.
  m.prod.wrap = 1;
  m.prod.count = 9000;
  ExpectRefused(RRPC_CUR_BAD_PROD);
  // A count beyond the ring.
  m.prod.wrap = 0;
  m.prod.count = 16384;
  ExpectRefused(RRPC_CUR_BAD_PROD);
  // Backwards.
  m.prod.count = 7000;
  ExpectRefused(RRPC_CUR_BAD_PROD);
}

TEST_F(Rx, ConsumerPastWhatIWroteIsRefused) {
  rrpc__cur_tx_commit(&w, 300);
  m.cons = rrpc__cdc_cursor_from_offset(301, 16384);
  ExpectRefused(RRPC_CUR_BAD_CONS);
  m.cons = rrpc__cdc_cursor_from_offset(300, 16384);
  ASSERT_EQ(0, Apply());
  EXPECT_EQ(300u, ev.freed);
  m.cons = rrpc__cdc_cursor_from_offset(200, 16384);
  ExpectRefused(RRPC_CUR_BAD_CONS);
}

TEST_F(Rx, AnotherConnectionsTokenIsRefused) {
  m.token = 0x1235;
  ExpectRefused(RRPC_CUR_BAD_TOKEN);
}

TEST_F(Rx, NothingAfterCloseAndNoDataAfterDoneWriting) {
  Prod(10);
  m.conn_flags = RRPC_CDC_CS_DONE_WRITING;
  ASSERT_EQ(0, Apply());
  EXPECT_EQ(RRPC_CDC_CS_DONE_WRITING, ev.conn_flags);
  Prod(11);
  ExpectRefused(RRPC_CUR_AFTER_CLOSE);
  Prod(10);
  m.conn_flags = RRPC_CDC_CS_CLOSED;
  ASSERT_EQ(0, Apply());
  EXPECT_EQ(RRPC_CDC_CS_CLOSED, ev.conn_flags);
  ExpectRefused(RRPC_CUR_AFTER_CLOSE);
}

TEST_F(Rx, StaleSequenceNumbersAreDropped) {
  m.seq = 5;
  Prod(100);
  ASSERT_EQ(0, rrpc__cur_on_cdc(&w, &m, &ev, &why));
  Prod(200);
  m.seq = 4;
  ASSERT_EQ(0, rrpc__cur_on_cdc(&w, &m, &ev, &why));
  EXPECT_EQ(1, ev.stale);
  EXPECT_EQ(100u, w.rx_prod);
  m.seq = 5;  // the same one again
  ASSERT_EQ(0, rrpc__cur_on_cdc(&w, &m, &ev, &why));
  EXPECT_EQ(1, ev.stale);
}

// ---- the consumer-update rule -----------------------------------------------------

TEST_F(Rx, UpdateDueFollowsTheKernelRule) {
  // 16 KiB ring: the limit is max(1638, 2048) = 2048 unconfirmed bytes.
  Prod(12000);
  ASSERT_EQ(0, Apply());
  rrpc__cur_rx_consume(&w, 2048);
  EXPECT_EQ(0, rrpc__cur_update_due(&w)) << "not over the limit";
  rrpc__cur_rx_consume(&w, 1);
  // 2049 unconfirmed, the sender sees 16384 - 12000 = 4384 free <= 8192.
  EXPECT_EQ(1, rrpc__cur_update_due(&w));
  rrpc__cdc_msg out;
  rrpc__cur_make_cdc(&w, 1, 0, &out);
  EXPECT_EQ(2049u, out.cons.count);
  EXPECT_EQ(0, rrpc__cur_update_due(&w)) << "told";
}

TEST_F(Rx, UpdateDueWhenTheSenderHasRoomOnlyIfItIsBlockedOrAsks) {
  Prod(4000);
  ASSERT_EQ(0, Apply());
  rrpc__cur_rx_consume(&w, 4000);
  // 4000 unconfirmed > 2048, but the sender still sees 12384 free > 8192.
  EXPECT_EQ(0, rrpc__cur_update_due(&w));
  m.prod_flags = RRPC_CDC_PF_WRITE_BLOCKED;
  ASSERT_EQ(0, Apply());
  EXPECT_EQ(1, rrpc__cur_update_due(&w));
  m.prod_flags = 0;
  ASSERT_EQ(0, Apply());
  EXPECT_EQ(0, rrpc__cur_update_due(&w));
  rrpc__cur_rx_consume(&w, 0);
  m.prod_flags = RRPC_CDC_PF_CONS_UPDATE_REQ;
  ASSERT_EQ(0, Apply());
  EXPECT_EQ(1, rrpc__cur_update_due(&w)) << "asked: any unconfirmed byte";
}

TEST_F(Rx, ABlockedSenderIsAnsweredOnceMoreThanTheLimitIsRead) {
  // A sender blocks only once it filled the ring (it writes what fits), so
  // once everything was read the whole ring is unconfirmed: over the limit
  // for every ring of 16 KiB or more.
  for (uint32_t wrote : {1u, 100u, 2049u, 9000u, 16384u}) {
    rrpc__cur_window v;
    ASSERT_EQ(0, rrpc__cur_init(&v, 16384, 16384, 1));
    rrpc__cdc_msg c;
    std::memset(&c, 0, sizeof c);
    c.token = 1;
    c.seq = 1;
    c.prod = rrpc__cdc_cursor_from_offset(wrote, 16384);
    c.prod_flags = RRPC_CDC_PF_WRITE_BLOCKED;
    rrpc__cur_event e;
    rrpc__cur_violation y;
    ASSERT_EQ(0, rrpc__cur_on_cdc(&v, &c, &e, &y));
    rrpc__cur_rx_consume(&v, wrote);
    EXPECT_EQ(wrote > RRPC_CUR_UPDATE_MIN ? 1 : 0, rrpc__cur_update_due(&v)) << wrote;
  }
}

}  // namespace
