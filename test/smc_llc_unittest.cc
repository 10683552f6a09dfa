// smc_llc_unittest.cc - SMC-R LLC codec (transport/smc/llc.h): every LLC
// message of the Linux 6.1 captures in test/data/smc-r decodes to the fields
// the capture notes list and re-encodes byte-exact; the v1 layouts; hostile
// input; encoder limits.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test/common/test_util.h"

extern "C" {
#include "rrpc/errors.h"
#include "transport/smc/llc.h"
}

namespace {

using Bytes = std::vector<uint8_t>;

Bytes LoadHex(const std::string& rel) { return rrpc_test::load_smc_hex(rel); }

struct LlcRow {
  std::string path;
  std::string message;  // e.g. llc-confirm_link_v2-req
};

std::vector<LlcRow> LlcRows() {
  std::ifstream f(rrpc_test::smc_data_dir() + "index.tsv");
  EXPECT_TRUE(f.good());
  std::vector<LlcRow> rows;
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    std::vector<std::string> col;
    std::istringstream in(line);
    std::string c;
    while (std::getline(in, c, '\t')) col.push_back(c);
    if (col.size() < 5 || col[4].compare(0, 4, "llc-") != 0) continue;
    rows.push_back({col[0] + "/" + col[1], col[4]});
  }
  return rows;
}

rrpc__llc_msg Decode(const Bytes& b) {
  rrpc__llc_msg m;
  EXPECT_EQ(0, rrpc__llc_decode(b.data(), b.size(), &m));
  return m;
}

Bytes Encode(const rrpc__llc_msg& m) {
  Bytes out(RRPC_LLC_V2_MAX_LEN);
  size_t len = 0;
  EXPECT_EQ(0, rrpc__llc_encode(&m, out.data(), out.size(), &len));
  out.resize(len);
  return out;
}

const uint8_t kGidA[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1};
const uint8_t kMacA[6] = {0x52, 0x54, 0x00, 0x77, 0x00, 0x01};

// Every LLC vector: the name's type and direction, and byte-exact re-encoding.
TEST(SmcLlc, EveryCapturedMessageDecodesAndReencodesByteExact) {
  std::vector<LlcRow> rows = LlcRows();
  ASSERT_GE(rows.size(), 20u);
  for (const LlcRow& r : rows) {
    SCOPED_TRACE(r.path);
    Bytes b = LoadHex(r.path);
    ASSERT_EQ(44u + (r.message.find("add_link_v2-req") != std::string::npos ? 44u : 0u),
              b.size());
    rrpc__llc_msg m = Decode(b);
    EXPECT_EQ(2, m.version);
    EXPECT_EQ(b.size(), m.length);
    std::string name = r.message.substr(4, r.message.find("_v2") - 4);
    std::string want = rrpc__llc_type_name(m.type);
    for (char& ch : want) ch = static_cast<char>(std::tolower(ch));
    EXPECT_EQ(name, want);
    bool resp = r.message.size() > 5 && r.message.compare(r.message.size() - 5, 5, "-resp") == 0;
    EXPECT_EQ(resp, (m.flags & RRPC_LLC_FLAG_RESP) != 0);
    EXPECT_EQ(b, Encode(m));
  }
}

TEST(SmcLlc, ConfirmLinkV2Fields) {
  rrpc__llc_msg m = Decode(LoadHex("smc-r-first-contact/06-f012-s2c-llc-confirm_link_v2-req.hex"));
  ASSERT_EQ(RRPC_LLC_CONFIRM_LINK, m.type);
  EXPECT_EQ(RRPC_LLC_FLAG_NO_RMBE_EYEC, m.flags);
  const rrpc__llc_confirm_link& c = m.u.confirm_link;
  EXPECT_EQ(0, memcmp(kMacA, c.mac, 6));
  EXPECT_EQ(0, memcmp(kGidA, c.gid, 16));
  EXPECT_EQ(0x11u, c.qpn);
  EXPECT_EQ(1, c.link_num);
  const uint8_t uid[4] = {0, 0, 1, 1};
  EXPECT_EQ(0, memcmp(uid, c.link_uid, 4));
  EXPECT_EQ(2, c.max_links);
  rrpc__llc_msg r = Decode(LoadHex("smc-r-first-contact/08-f014-c2s-llc-confirm_link_v2-resp.hex"));
  EXPECT_EQ(RRPC_LLC_FLAG_RESP | RRPC_LLC_FLAG_NO_RMBE_EYEC, r.flags);
  EXPECT_EQ(0x11u, r.u.confirm_link.qpn);
}

TEST(SmcLlc, AddLinkV2RequestAndReject) {
  rrpc__llc_msg m = Decode(LoadHex("smc-r-first-contact/09-f016-s2c-llc-add_link_v2-req.hex"));
  ASSERT_EQ(RRPC_LLC_ADD_LINK, m.type);
  const rrpc__llc_add_link& a = m.u.add_link;
  EXPECT_EQ(0x12u, a.qpn);
  EXPECT_EQ(2, a.link_num);
  EXPECT_EQ(3, a.mtu);
  EXPECT_EQ(0x54e73du, a.psn);
  ASSERT_EQ(1, a.has_v2_ext);
  EXPECT_EQ(1, a.v2_direct);
  EXPECT_EQ(0, memcmp(kGidA, a.client_target_gid, 16));
  ASSERT_EQ(1, a.num_rkeys);
  EXPECT_EQ(0x31du, a.rt[0].rkey);
  EXPECT_EQ(0x5a7u, a.rt[0].rkey_new);
  EXPECT_EQ(0xffff89a9833c0000ull, a.rt[0].vaddr_new);

  // The client's reject echoes the server's body in 44 bytes (no extension).
  rrpc__llc_msg r = Decode(LoadHex("smc-r-first-contact/10-f018-c2s-llc-add_link_v2-resp.hex"));
  EXPECT_EQ(RRPC_LLC_FLAG_RESP | RRPC_LLC_FLAG_ADD_LINK_REJ, r.flags);
  EXPECT_EQ(44, r.length);
  EXPECT_EQ(0, r.u.add_link.has_v2_ext);
  EXPECT_EQ(0x12u, r.u.add_link.qpn);
  EXPECT_EQ(0, memcmp(kMacA, r.u.add_link.mac, 6));
}

TEST(SmcLlc, RkeyMessages) {
  rrpc__llc_msg c = Decode(LoadHex("smc-r-second-conn/04-f006-s2c-llc-confirm_rkey_v2-req.hex"));
  ASSERT_EQ(RRPC_LLC_CONFIRM_RKEY, c.type);
  EXPECT_EQ(0, c.u.confirm_rkey.rtoken[0].link_id);
  EXPECT_EQ(0x31du, c.u.confirm_rkey.rtoken[0].rkey);
  EXPECT_EQ(0xffff89a9833c0000ull, c.u.confirm_rkey.rtoken[0].vaddr);
  EXPECT_EQ(0u, c.u.confirm_rkey.rtoken[1].rkey);

  rrpc__llc_msg d = Decode(LoadHex("smc-r-first-contact/25-f050-c2s-llc-delete_rkey_v2-req.hex"));
  ASSERT_EQ(RRPC_LLC_DELETE_RKEY, d.type);
  EXPECT_EQ(1, d.u.delete_rkey.num_rkeys);
  EXPECT_EQ(1, d.u.delete_rkey.rkey_count);
  EXPECT_EQ(0x30fu, d.u.delete_rkey.rkey[0]);
  rrpc__llc_msg dr = Decode(LoadHex("smc-r-first-contact/26-f053-s2c-llc-delete_rkey_v2-resp.hex"));
  EXPECT_EQ(RRPC_LLC_FLAG_RESP, dr.flags);
  EXPECT_EQ(0u, dr.u.delete_rkey.rkey[0]);
}

TEST(SmcLlc, TestLinkAnswerIsTheRequestWithTheResponseFlag) {
  Bytes req = LoadHex("smc-r-first-contact/29-f063-s2c-llc-test_link_v2-req.hex");
  rrpc__llc_msg m = Decode(req);
  ASSERT_EQ(RRPC_LLC_TEST_LINK, m.type);
  m.flags |= RRPC_LLC_FLAG_RESP;
  EXPECT_EQ(LoadHex("smc-r-first-contact/30-f065-c2s-llc-test_link_v2-resp.hex"), Encode(m));
}

// A v1 link (SMC-Rv1 peers): fixed 44 bytes, one-byte length, the ADD_LINK
// reject reason in the low nibble of byte 2, eight v1 DELETE_RKEY slots.
TEST(SmcLlc, V1Layouts) {
  rrpc__llc_msg m;
  memset(&m, 0, sizeof(m));
  m.type = RRPC_LLC_ADD_LINK;
  m.version = 1;
  m.flags = RRPC_LLC_FLAG_RESP | RRPC_LLC_FLAG_ADD_LINK_REJ;
  m.u.add_link.rej_rsn = RRPC_LLC_REJ_NO_ALT_PATH;
  m.u.add_link.qpn = 0xabcdef;
  m.u.add_link.mtu = 5;
  Bytes b = Encode(m);
  ASSERT_EQ(44u, b.size());
  EXPECT_EQ(0x02, b[0]);
  EXPECT_EQ(44, b[1]);
  EXPECT_EQ(0x01, b[2]);
  EXPECT_EQ(0xc0, b[3]);
  EXPECT_EQ(0xab, b[28]);
  EXPECT_EQ(0x05, b[32]);
  rrpc__llc_msg back = Decode(b);
  EXPECT_EQ(RRPC_LLC_REJ_NO_ALT_PATH, back.u.add_link.rej_rsn);
  EXPECT_EQ(0xabcdefu, back.u.add_link.qpn);

  memset(&m, 0, sizeof(m));
  m.type = RRPC_LLC_DELETE_RKEY;
  m.version = 1;
  m.u.delete_rkey.num_rkeys = 2;
  m.u.delete_rkey.rkey[0] = 0x11223344;
  m.u.delete_rkey.rkey[7] = 0x55667788;
  b = Encode(m);
  ASSERT_EQ(44u, b.size());
  EXPECT_EQ(0x55, b[36]);
  back = Decode(b);
  EXPECT_EQ(8, back.u.delete_rkey.rkey_count);
  EXPECT_EQ(0x55667788u, back.u.delete_rkey.rkey[7]);

  memset(&m, 0, sizeof(m));
  m.type = RRPC_LLC_DELETE_LINK;
  m.version = 1;
  m.flags = RRPC_LLC_FLAG_DEL_LINK_ALL | RRPC_LLC_FLAG_DEL_LINK_ORDERLY;
  m.u.delete_link.link_num = 1;
  m.u.delete_link.reason = RRPC_LLC_DEL_PROG_INIT_TERM;
  b = Encode(m);
  EXPECT_EQ(0x04, b[0]);
  EXPECT_EQ(0x60, b[3]);
  EXPECT_EQ(1, b[4]);
  EXPECT_EQ(0x03, b[6]);
  EXPECT_EQ(m.u.delete_link.reason, Decode(b).u.delete_link.reason);

  memset(&m, 0, sizeof(m));
  m.type = RRPC_LLC_ADD_LINK_CONT;
  m.version = 1;
  m.u.add_link_cont.link_num = 2;
  m.u.add_link_cont.num_rkeys = 2;
  m.u.add_link_cont.rt[1].vaddr_new = 0x0102030405060708ull;
  b = Encode(m);
  EXPECT_EQ(0x08, b[8 + 16 + 15]);
  EXPECT_EQ(m.u.add_link_cont.rt[1].vaddr_new, Decode(b).u.add_link_cont.rt[1].vaddr_new);
}

TEST(SmcLlc, V2ListsGrowTheMessage) {
  rrpc__llc_msg m;
  memset(&m, 0, sizeof(m));
  m.type = RRPC_LLC_DELETE_RKEY;
  m.version = 2;
  m.u.delete_rkey.num_rkeys = 20;
  for (int i = 0; i < 20; i++) m.u.delete_rkey.rkey[i] = 0x100u + static_cast<uint32_t>(i);
  Bytes b = Encode(m);
  ASSERT_EQ(8u + 80u, b.size());
  EXPECT_EQ(88, b[1] | b[2] << 8);
  rrpc__llc_msg back = Decode(b);
  EXPECT_EQ(20, back.u.delete_rkey.rkey_count);
  EXPECT_EQ(0x113u, back.u.delete_rkey.rkey[19]);

  memset(&m, 0, sizeof(m));
  m.type = RRPC_LLC_REQ_ADD_LINK;
  m.version = 2;
  m.u.req_add_link.gid_count = 2;
  memcpy(m.u.req_add_link.gids[1], kGidA, 16);
  b = Encode(m);
  ASSERT_EQ(28u + 32u, b.size());
  back = Decode(b);
  EXPECT_EQ(2, back.u.req_add_link.gid_count);
  EXPECT_EQ(0, memcmp(kGidA, back.u.req_add_link.gids[1], 16));
}

// A big-endian sender (s390) writes length_v2 in its own order.
TEST(SmcLlc, V2LengthFromABigEndianSender) {
  Bytes b = LoadHex("smc-r-first-contact/29-f063-s2c-llc-test_link_v2-req.hex");
  b[1] = 0x00;
  b[2] = 0x2c;
  rrpc__llc_msg m = Decode(b);
  EXPECT_EQ(44, m.length);
  EXPECT_EQ(RRPC_LLC_TEST_LINK, m.type);
}

TEST(SmcLlc, HostileInputIsRefused) {
  rrpc__llc_msg m;
  Bytes ok = LoadHex("smc-r-first-contact/09-f016-s2c-llc-add_link_v2-req.hex");
  for (size_t n = 0; n < 44; n++)
    EXPECT_EQ(-RRPC_EPARSE, rrpc__llc_decode(ok.data(), n, &m)) << n;
  // Claims 88 bytes, 60 arrive.
  EXPECT_EQ(-RRPC_EPARSE, rrpc__llc_decode(ok.data(), 60, &m));
  // An rkey count that runs past the message.
  Bytes bad = ok;
  bad[70] = 2;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__llc_decode(bad.data(), bad.size(), &m));
  bad = ok;
  bad[70] = 0xff;
  bad[71] = 0xff;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__llc_decode(bad.data(), bad.size(), &m));
  // Not an LLC type: a CDC (0xFE), 0x00, type 8, a v3 header.
  for (uint8_t t : {0xfe, 0x00, 0x08, 0x28, 0x31, 0x41}) {
    bad = ok;
    bad[0] = t;
    EXPECT_EQ(-RRPC_EPARSE, rrpc__llc_decode(bad.data(), bad.size(), &m)) << int(t);
  }
  // v1 with another length byte; ADD_LINK_CONT as v2; REQ_ADD_LINK as v1.
  Bytes v1(44, 0);
  v1[0] = RRPC_LLC_TEST_LINK;
  v1[1] = 43;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__llc_decode(v1.data(), v1.size(), &m));
  v1[1] = 44;
  EXPECT_EQ(0, rrpc__llc_decode(v1.data(), v1.size(), &m));
  v1[0] = RRPC_LLC_REQ_ADD_LINK;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__llc_decode(v1.data(), v1.size(), &m));
  v1[0] = RRPC_LLC_DELETE_RKEY;
  v1[4] = 9;  // more than the 8 v1 slots
  EXPECT_EQ(-RRPC_EPARSE, rrpc__llc_decode(v1.data(), v1.size(), &m));
  Bytes v2(44, 0);
  v2[0] = 0x20 | RRPC_LLC_ADD_LINK_CONT;
  v2[1] = 44;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__llc_decode(v2.data(), v2.size(), &m));
  // v2 length below 44 in either byte order.
  v2[0] = 0x20 | RRPC_LLC_TEST_LINK;
  v2[1] = 40;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__llc_decode(v2.data(), v2.size(), &m));
}

TEST(SmcLlc, EncoderLimits) {
  rrpc__llc_msg m;
  memset(&m, 0, sizeof(m));
  uint8_t buf[64];
  size_t len = 0;
  m.type = RRPC_LLC_CONFIRM_LINK;
  m.version = 2;
  m.u.confirm_link.qpn = 0x1000000;
  EXPECT_EQ(-EINVAL, rrpc__llc_encode(&m, buf, sizeof(buf), &len));
  m.u.confirm_link.qpn = 1;
  EXPECT_EQ(-ENOSPC, rrpc__llc_encode(&m, buf, 43, &len));
  EXPECT_EQ(0, rrpc__llc_encode(&m, buf, 44, &len));
  EXPECT_EQ(44u, len);
  m.version = 3;
  EXPECT_EQ(-EINVAL, rrpc__llc_encode(&m, buf, sizeof(buf), &len));
  m.version = 2;
  m.type = RRPC_LLC_ADD_LINK_CONT;
  EXPECT_EQ(-EINVAL, rrpc__llc_encode(&m, buf, sizeof(buf), &len));
  m.version = 1;
  m.type = RRPC_LLC_REQ_ADD_LINK;
  EXPECT_EQ(-EINVAL, rrpc__llc_encode(&m, buf, sizeof(buf), &len));
  m.type = 0x08;
  EXPECT_EQ(-EINVAL, rrpc__llc_encode(&m, buf, sizeof(buf), &len));
  m.type = RRPC_LLC_DELETE_RKEY;
  m.u.delete_rkey.num_rkeys = 9;
  EXPECT_EQ(-EINVAL, rrpc__llc_encode(&m, buf, sizeof(buf), &len));
  m.version = 2;
  m.type = RRPC_LLC_REQ_ADD_LINK;
  m.u.req_add_link.gid_count = RRPC_LLC_MAX_GIDS + 1;
  EXPECT_EQ(-EINVAL, rrpc__llc_encode(&m, buf, sizeof(buf), &len));
  m.type = RRPC_LLC_ADD_LINK;
  m.u.add_link.has_v2_ext = 1;
  m.u.add_link.num_rkeys = 1;
  EXPECT_EQ(-ENOSPC, rrpc__llc_encode(&m, buf, sizeof(buf), &len));
  m.u.add_link.psn = 0x1000000;
  Bytes big(128);
  EXPECT_EQ(-EINVAL, rrpc__llc_encode(&m, big.data(), big.size(), &len));
}

TEST(SmcLlc, TypeNamesAndClassification) {
  EXPECT_STREQ("CONFIRM_LINK", rrpc__llc_type_name(0x21));
  EXPECT_STREQ("DELETE_RKEY", rrpc__llc_type_name(RRPC_LLC_DELETE_RKEY));
  EXPECT_STREQ("UNKNOWN", rrpc__llc_type_name(0xfe));
  EXPECT_EQ(1, rrpc__llc_is_llc(0x29));
  EXPECT_EQ(1, rrpc__llc_is_llc(0x01));
  EXPECT_EQ(0, rrpc__llc_is_llc(0xfe));
  EXPECT_EQ(0, rrpc__llc_is_llc(0x08));
}

}  // namespace
