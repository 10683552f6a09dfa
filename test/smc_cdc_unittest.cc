// smc_cdc_unittest.cc - SMC-R CDC codec and cursor arithmetic
// (transport/smc/cdc.h): the Linux 6.1 captures, re-encoding, sequence
// and cursor rules across wraps, hostile input.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test/common/test_util.h"

extern "C" {
#include "rrpc/errors.h"
#include "transport/smc/cdc.h"
}

namespace {

using Bytes = std::vector<uint8_t>;

std::string DataDir() { return rrpc_test::smc_data_dir(); }
Bytes LoadHex(const std::string& rel) { return rrpc_test::load_smc_hex(rel); }

struct CdcRow {
  std::string dir;  // capture case
  std::string path;
  std::string detail;
};

std::vector<CdcRow> CdcRows() {
  std::ifstream f(DataDir() + "index.tsv");
  EXPECT_TRUE(f.good());
  std::vector<CdcRow> rows;
  std::string line;
  std::getline(f, line);
  while (std::getline(f, line)) {
    std::vector<std::string> col;
    std::istringstream in(line);
    std::string c;
    while (std::getline(in, c, '\t')) col.push_back(c);
    if (col.size() < 6 || col[4].compare(0, 3, "cdc") != 0) continue;
    rows.push_back({col[0], col[0] + "/" + col[1], col[5]});
  }
  return rows;
}

rrpc__cdc_cursor Cur(uint16_t wrap, uint32_t count) {
  rrpc__cdc_cursor c;
  c.wrap = wrap;
  c.count = count;
  return c;
}

// ---- captures -------------------------------------------------------------

// Every CDC of both connections, against the index: "seq N prod W/C cons W/C
// [peer_conn_closed]".
TEST(CdcCapture, IndexFieldValues) {
  int checked = 0, closes = 0;
  for (const CdcRow& r : CdcRows()) {
    SCOPED_TRACE(r.path);
    Bytes m = LoadHex(r.path);
    ASSERT_EQ(44u, m.size());
    rrpc__cdc_msg c;
    ASSERT_EQ(0, rrpc__cdc_decode(m.data(), m.size(), &c));
    unsigned seq, pw, pc, cw, cc;
    ASSERT_EQ(5, std::sscanf(r.detail.c_str(), "detail=seq %u prod %u/%u cons %u/%u", &seq,
                             &pw, &pc, &cw, &cc))
        << r.detail;
    EXPECT_EQ(seq, c.seq);
    EXPECT_EQ(pw, c.prod.wrap);
    EXPECT_EQ(pc, c.prod.count);
    EXPECT_EQ(cw, c.cons.wrap);
    EXPECT_EQ(cc, c.cons.count);
    EXPECT_EQ(0, c.prod_flags);
    bool closed = r.detail.find("peer_conn_closed") != std::string::npos;
    EXPECT_EQ(closed ? RRPC_CDC_CS_CLOSED : 0, c.conn_flags);
    closes += closed;
    // The token is the receiver's alert token: 1 on the first connection of
    // the link group, 2 on the second (both sides).
    EXPECT_EQ(r.dir == "smc-r-first-contact" ? 1u : 2u, c.token);

    // Linux leaves the reserved bytes zero, so re-encoding is exact.
    uint8_t out[RRPC_CDC_LEN];
    rrpc__cdc_encode(&c, out);
    EXPECT_EQ(m, Bytes(out, out + RRPC_CDC_LEN));
    checked++;
  }
  EXPECT_EQ(16, checked);
  EXPECT_EQ(4, closes);
}

// One direction of the first connection in order: sequence numbers grow by
// one and each CDC moves the producer by the 64 bytes written before it.
TEST(CdcCapture, ClientToServerSequence) {
  const char* files[] = {"smc-r-first-contact/12-f020-c2s-cdc.hex",
                         "smc-r-first-contact/16-f029-c2s-cdc.hex",
                         "smc-r-first-contact/20-f037-c2s-cdc.hex",
                         "smc-r-first-contact/23-f044-c2s-cdc-close.hex"};
  const uint32_t ring = 65536;  // the server's RMB (size code 2)
  rrpc__cdc_msg prev;
  std::memset(&prev, 0, sizeof(prev));
  for (int i = 0; i < 4; i++) {
    SCOPED_TRACE(files[i]);
    Bytes m = LoadHex(files[i]);
    rrpc__cdc_msg c;
    ASSERT_EQ(0, rrpc__cdc_decode(m.data(), m.size(), &c));
    EXPECT_EQ(i + 1, c.seq);
    EXPECT_TRUE(rrpc__cdc_seq_newer(c.seq, prev.seq));
    EXPECT_FALSE(rrpc__cdc_cursor_is_stale(&prev.prod, &c.prod));
    EXPECT_EQ(i < 3 ? 64u : 0u, rrpc__cdc_cursor_diff(ring, &prev.prod, &c.prod));
    uint64_t off = 0;
    ASSERT_EQ(0, rrpc__cdc_cursor_to_offset(&c.prod, ring, 0, &off));
    EXPECT_EQ(i < 3 ? 64u * (i + 1) : 192u, off);
    prev = c;
  }
  EXPECT_EQ(RRPC_CDC_CS_CLOSED, prev.conn_flags);
  EXPECT_EQ(0, prev.conn_flags & (RRPC_CDC_CS_DONE_WRITING | RRPC_CDC_CS_ABNORMAL));
}

// ---- codec ----------------------------------------------------------------

TEST(CdcCodec, EncodeLayout) {
  rrpc__cdc_msg m;
  m.seq = 0xbeef;
  m.token = 0x01020304;
  m.prod = Cur(0x0506, 0x0708090a);
  m.cons = Cur(0x0b0c, 0x0d0e0f10);
  m.prod_flags = RRPC_CDC_PF_WRITE_BLOCKED | RRPC_CDC_PF_CONS_UPDATE_REQ;
  m.conn_flags = RRPC_CDC_CS_DONE_WRITING | RRPC_CDC_CS_ABNORMAL;
  uint8_t out[RRPC_CDC_LEN];
  std::memset(out, 0xaa, sizeof(out));
  rrpc__cdc_encode(&m, out);
  const uint8_t want[RRPC_CDC_LEN] = {
      0xfe, 44,   0xbe, 0xef, 1,    2,    3,    4,    0,    0,    5,
      6,    7,    8,    9,    10,   0,    0,    0x0b, 0x0c, 0x0d, 0x0e,
      0x0f, 0x10, 0x90, 0xa0, 0,    0,    0,    0,    0,    0,    0,
      0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0};
  EXPECT_EQ(Bytes(want, want + 44), Bytes(out, out + 44));
  rrpc__cdc_msg d;
  ASSERT_EQ(0, rrpc__cdc_decode(out, sizeof(out), &d));
  EXPECT_EQ(m.seq, d.seq);
  EXPECT_EQ(m.token, d.token);
  EXPECT_EQ(m.prod.wrap, d.prod.wrap);
  EXPECT_EQ(m.prod.count, d.prod.count);
  EXPECT_EQ(m.cons.wrap, d.cons.wrap);
  EXPECT_EQ(m.cons.count, d.cons.count);
  EXPECT_EQ(m.prod_flags, d.prod_flags);
  EXPECT_EQ(m.conn_flags, d.conn_flags);
}

TEST(CdcCodec, RejectsWrongTypeAndLength) {
  Bytes good = LoadHex("smc-r-first-contact/12-f020-c2s-cdc.hex");
  rrpc__cdc_msg c;
  ASSERT_EQ(0, rrpc__cdc_decode(good.data(), good.size(), &c));
  // A real LLC v2 message (CONFIRM LINK, type 0x21) is not a CDC.
  Bytes llc = LoadHex("smc-r-first-contact/06-f012-s2c-llc-confirm_link_v2-req.hex");
  ASSERT_EQ(44u, llc.size());
  EXPECT_EQ(-RRPC_EPARSE, rrpc__cdc_decode(llc.data(), llc.size(), &c));
  Bytes x = good;
  x[0] = 0xfd;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__cdc_decode(x.data(), x.size(), &c));
  x = good;
  x[1] = 43;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__cdc_decode(x.data(), x.size(), &c));
  x = good;
  x[1] = 48;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__cdc_decode(x.data(), x.size(), &c));
  for (size_t k = 0; k < 44; k++) {
    Bytes t(good.begin(), good.begin() + static_cast<long>(k));
    EXPECT_EQ(-RRPC_EPARSE, rrpc__cdc_decode(t.data(), t.size(), &c)) << k;
  }
  x = good;
  x.push_back(0);
  EXPECT_EQ(-RRPC_EPARSE, rrpc__cdc_decode(x.data(), x.size(), &c));
  // Reserved bytes are ignored, as Linux does.
  x = good;
  x[8] = 0xff;
  x[43] = 0xff;
  ASSERT_EQ(0, rrpc__cdc_decode(x.data(), x.size(), &c));
  EXPECT_EQ(64u, c.prod.count);
}

// ---- sequence numbers -----------------------------------------------------

TEST(CdcSeq, NewerAcrossWrap) {
  EXPECT_TRUE(rrpc__cdc_seq_newer(1, 0));
  EXPECT_FALSE(rrpc__cdc_seq_newer(0, 1));
  EXPECT_FALSE(rrpc__cdc_seq_newer(7, 7));
  EXPECT_TRUE(rrpc__cdc_seq_newer(0, 0xffff));
  EXPECT_TRUE(rrpc__cdc_seq_newer(5, 0xfff0));
  EXPECT_FALSE(rrpc__cdc_seq_newer(0xfff0, 5));
  EXPECT_TRUE(rrpc__cdc_seq_newer(0x7fff, 0));
  EXPECT_FALSE(rrpc__cdc_seq_newer(0x8000, 0));  // (int16)0x8000 < 0
  // Exhaustive over one reference: exactly 32767 successors are newer.
  for (uint32_t last : {0u, 1u, 0x7fffu, 0x8000u, 0xffffu}) {
    int newer = 0;
    for (uint32_t s = 0; s <= 0xffff; s++)
      newer += rrpc__cdc_seq_newer(static_cast<uint16_t>(s), static_cast<uint16_t>(last));
    EXPECT_EQ(32767, newer) << last;
  }
}

// ---- cursors ----------------------------------------------------------------

TEST(CdcCursor, DiffAndComp) {
  const uint32_t R = 1000;
  rrpc__cdc_cursor a = Cur(3, 100), b = Cur(3, 400), c = Cur(4, 50);
  EXPECT_EQ(300u, rrpc__cdc_cursor_diff(R, &a, &b));
  EXPECT_EQ(0u, rrpc__cdc_cursor_diff(R, &b, &a));  // floored at 0
  EXPECT_EQ(650u, rrpc__cdc_cursor_diff(R, &b, &c));  // (1000 - 400) + 50
  EXPECT_EQ(950u, rrpc__cdc_cursor_diff(R, &a, &c));
  EXPECT_EQ(300, rrpc__cdc_cursor_comp(R, &a, &b));
  EXPECT_EQ(-300, rrpc__cdc_cursor_comp(R, &b, &a));
  EXPECT_EQ(650, rrpc__cdc_cursor_comp(R, &b, &c));
  EXPECT_EQ(-650, rrpc__cdc_cursor_comp(R, &c, &b));
  EXPECT_EQ(0, rrpc__cdc_cursor_comp(R, &a, &a));
  // Across the 16-bit wrap counter: wrap 0xffff -> 0 differs, so diff works.
  rrpc__cdc_cursor w1 = Cur(0xffff, 900), w2 = Cur(0, 100);
  EXPECT_EQ(200u, rrpc__cdc_cursor_diff(R, &w1, &w2));
  // A full ring: same count, next wrap.
  rrpc__cdc_cursor f1 = Cur(7, 0), f2 = Cur(8, 0);
  EXPECT_EQ(R, rrpc__cdc_cursor_diff(R, &f1, &f2));
  // Hostile counts beyond the ring cannot overflow the result.
  rrpc__cdc_cursor h1 = Cur(1, 0), h2 = Cur(2, 0xffffffff);
  EXPECT_EQ(0xffffffffu, rrpc__cdc_cursor_diff(0xffffffff, &h1, &h2));
}

TEST(CdcCursor, Stale) {
  rrpc__cdc_cursor cur = Cur(5, 500);
  rrpc__cdc_cursor older_count = Cur(5, 499), older_wrap = Cur(4, 900), newer = Cur(5, 501),
                   next_wrap = Cur(6, 0), same = Cur(5, 500), wrapped_to_zero = Cur(0, 10);
  EXPECT_TRUE(rrpc__cdc_cursor_is_stale(&cur, &older_count));
  EXPECT_TRUE(rrpc__cdc_cursor_is_stale(&cur, &older_wrap));
  EXPECT_FALSE(rrpc__cdc_cursor_is_stale(&cur, &newer));
  EXPECT_FALSE(rrpc__cdc_cursor_is_stale(&cur, &next_wrap));
  EXPECT_FALSE(rrpc__cdc_cursor_is_stale(&cur, &same));
  // A new wrap of 0 means the wrap counter overflowed: not stale.
  rrpc__cdc_cursor top = Cur(0xffff, 10);
  EXPECT_FALSE(rrpc__cdc_cursor_is_stale(&top, &wrapped_to_zero));
}

TEST(CdcCursor, OffsetRoundTrip) {
  const uint32_t R = 65536;
  rrpc__cdc_cursor c = rrpc__cdc_cursor_from_offset(0, R);
  EXPECT_EQ(0, c.wrap);
  EXPECT_EQ(0u, c.count);
  c = rrpc__cdc_cursor_from_offset(3 * 65536ull + 17, R);
  EXPECT_EQ(3, c.wrap);
  EXPECT_EQ(17u, c.count);
  // 2^16 wraps later the wrap counter is back to 0.
  c = rrpc__cdc_cursor_from_offset((65536ull << 16) + 5, R);
  EXPECT_EQ(0, c.wrap);
  EXPECT_EQ(5u, c.count);

  uint64_t off;
  ASSERT_EQ(0, rrpc__cdc_cursor_to_offset(&c, R, (65536ull << 16) - 100, &off));
  EXPECT_EQ((65536ull << 16) + 5, off);
  // Near the start a far-ahead cursor cannot mean a negative offset.
  rrpc__cdc_cursor back = Cur(0xffff, 0);
  EXPECT_EQ(-RRPC_EPARSE, rrpc__cdc_cursor_to_offset(&back, R, 0, &off));
  rrpc__cdc_cursor bad = Cur(0, R);
  EXPECT_EQ(-RRPC_EPARSE, rrpc__cdc_cursor_to_offset(&bad, R, 0, &off));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__cdc_cursor_to_offset(&c, 0, 0, &off));

  // Found by cdc_fuzzer: a reference near 2^64 must not wrap the result
  // around to a small offset.
  rrpc__cdc_cursor far = Cur(0xffff, 2499805440u);
  int rc = rrpc__cdc_cursor_to_offset(&far, 0xfe000affu, 0xffff950001000000ull, &off);
  EXPECT_EQ(-RRPC_EPARSE, rc);
  // Just below 2^64 offsets still round-trip when they fit.
  rrpc__cdc_cursor near_top = rrpc__cdc_cursor_from_offset(UINT64_MAX - 2000, 16);
  ASSERT_EQ(0, rrpc__cdc_cursor_to_offset(&near_top, 16, UINT64_MAX - 1000, &off));
  EXPECT_EQ(UINT64_MAX - 2000, off);

  // Random property: any offset within half a period of the reference
  // survives the cursor round trip, for ring sizes big and small.
  std::mt19937_64 rng(42);
  for (uint32_t ring : {1u, 7u, 16384u, 65536u, 512u << 20}) {
    const uint64_t period = static_cast<uint64_t>(ring) << 16;
    for (int i = 0; i < 20000; i++) {
      uint64_t ref = rng() % (period * 5);
      int64_t delta = static_cast<int64_t>(rng() % period) - static_cast<int64_t>(period / 2) + 1;
      if (delta < 0 && static_cast<uint64_t>(-delta) > ref) continue;
      uint64_t want = ref + static_cast<uint64_t>(delta);
      rrpc__cdc_cursor k = rrpc__cdc_cursor_from_offset(want, ring);
      ASSERT_EQ(0, rrpc__cdc_cursor_to_offset(&k, ring, ref, &off)) << ring << " " << ref;
      ASSERT_EQ(want, off) << "ring " << ring << " ref " << ref << " delta " << delta;
    }
  }
}

}  // namespace
