// smc_llc_answer_unittest.cc - a single-link peer's LLC answers
// (transport/smc/llc_answer.h): to every request of the Linux 6.1 captures in
// test/data/smc-r, the answer rrpc builds is byte for byte the one the Linux
// client sent back; responses and DELETE_LINK "all links" get none.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test/common/test_util.h"

extern "C" {
#include "transport/smc/llc.h"
#include "transport/smc/llc_answer.h"
}

namespace {

using Bytes = std::vector<uint8_t>;

// The captured client (vmB): its MAC, RoCEv2 GID and QP number.
rrpc__llc_self CapturedClient() {
  rrpc__llc_self s;
  const uint8_t mac[6] = {0x52, 0x54, 0x00, 0x77, 0x00, 0x02};
  const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2};
  memcpy(s.mac, mac, 6);
  memcpy(s.gid, gid, 16);
  s.qpn = 0x11;
  return s;
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

struct Pair {
  const char* request;
  const char* answer;
  rrpc__llc_outcome outcome;
};

TEST(SmcLlcAnswer, EveryCapturedRequestGetsTheLinuxClientsAnswerByteExact) {
  const Pair pairs[] = {
      {"smc-r-first-contact/06-f012-s2c-llc-confirm_link_v2-req.hex",
       "smc-r-first-contact/08-f014-c2s-llc-confirm_link_v2-resp.hex", RRPC_LLC_CONFIRMED},
      {"smc-r-first-contact/09-f016-s2c-llc-add_link_v2-req.hex",
       "smc-r-first-contact/10-f018-c2s-llc-add_link_v2-resp.hex", RRPC_LLC_ANSWER},
      {"smc-r-first-contact/27-f055-s2c-llc-delete_rkey_v2-req.hex",
       "smc-r-first-contact/28-f057-c2s-llc-delete_rkey_v2-resp.hex", RRPC_LLC_ANSWER},
      {"smc-r-first-contact/29-f063-s2c-llc-test_link_v2-req.hex",
       "smc-r-first-contact/30-f065-c2s-llc-test_link_v2-resp.hex", RRPC_LLC_ANSWER},
      {"smc-r-second-conn/04-f006-s2c-llc-confirm_rkey_v2-req.hex",
       "smc-r-second-conn/06-f008-c2s-llc-confirm_rkey_v2-resp.hex", RRPC_LLC_ANSWER},
      {"smc-r-second-conn/25-f049-s2c-llc-delete_rkey_v2-req.hex",
       "smc-r-second-conn/28-f056-c2s-llc-delete_rkey_v2-resp.hex", RRPC_LLC_ANSWER},
  };
  const rrpc__llc_self self = CapturedClient();
  for (const Pair& p : pairs) {
    SCOPED_TRACE(p.request);
    rrpc__llc_msg req = Decode(rrpc_test::load_smc_hex(p.request));
    rrpc__llc_msg ans;
    int send = -1;
    EXPECT_EQ(p.outcome, rrpc__llc_answer(&self, &req, &ans, &send));
    ASSERT_EQ(1, send);
    EXPECT_EQ(rrpc_test::load_smc_hex(p.answer), Encode(ans));
  }
}

TEST(SmcLlcAnswer, ResponsesAreNotAnswered) {
  const char* responses[] = {
      "smc-r-first-contact/08-f014-c2s-llc-confirm_link_v2-resp.hex",
      "smc-r-first-contact/10-f018-c2s-llc-add_link_v2-resp.hex",
      "smc-r-first-contact/26-f053-s2c-llc-delete_rkey_v2-resp.hex",
      "smc-r-second-conn/09-f014-s2c-llc-confirm_rkey_v2-resp.hex",
  };
  const rrpc__llc_self self = CapturedClient();
  for (const char* r : responses) {
    SCOPED_TRACE(r);
    rrpc__llc_msg m = Decode(rrpc_test::load_smc_hex(r)), ans;
    int send = -1;
    EXPECT_EQ(RRPC_LLC_IGNORE, rrpc__llc_answer(&self, &m, &ans, &send));
    EXPECT_EQ(0, send);
  }
}

rrpc__llc_msg DeleteLink(uint8_t version, uint8_t flags) {
  rrpc__llc_msg m;
  memset(&m, 0, sizeof m);
  m.type = RRPC_LLC_DELETE_LINK;
  m.version = version;
  m.flags = flags;
  m.u.delete_link.link_num = 1;
  m.u.delete_link.reason = RRPC_LLC_DEL_PROG_INIT_TERM;
  return m;
}

TEST(SmcLlcAnswer, DeleteLinkAllEndsTheLinkWithoutAnAnswer) {
  const rrpc__llc_self self = CapturedClient();
  rrpc__llc_msg req = DeleteLink(2, RRPC_LLC_FLAG_DEL_LINK_ALL | RRPC_LLC_FLAG_DEL_LINK_ORDERLY), ans;
  int send = -1;
  EXPECT_EQ(RRPC_LLC_LINK_DOWN, rrpc__llc_answer(&self, &req, &ans, &send));
  EXPECT_EQ(0, send);
}

TEST(SmcLlcAnswer, DeleteOfOneLinkIsConfirmedThenEndsTheLink) {
  const rrpc__llc_self self = CapturedClient();
  rrpc__llc_msg req = DeleteLink(2, RRPC_LLC_FLAG_DEL_LINK_ORDERLY), ans;
  int send = -1;
  EXPECT_EQ(RRPC_LLC_LINK_DOWN, rrpc__llc_answer(&self, &req, &ans, &send));
  ASSERT_EQ(1, send);
  EXPECT_EQ(RRPC_LLC_FLAG_RESP, ans.flags);
  EXPECT_EQ(1, ans.u.delete_link.link_num);
  EXPECT_EQ(static_cast<uint32_t>(RRPC_LLC_DEL_PROG_INIT_TERM), ans.u.delete_link.reason);
}

TEST(SmcLlcAnswer, V1AddLinkRejectCarriesNoAltPath) {
  const rrpc__llc_self self = CapturedClient();
  rrpc__llc_msg req;
  memset(&req, 0, sizeof req);
  req.type = RRPC_LLC_ADD_LINK;
  req.version = 1;
  req.u.add_link.qpn = 0x12;
  req.u.add_link.link_num = 2;
  rrpc__llc_msg ans;
  int send = -1;
  EXPECT_EQ(RRPC_LLC_ANSWER, rrpc__llc_answer(&self, &req, &ans, &send));
  EXPECT_EQ(1, send);
  EXPECT_EQ(RRPC_LLC_FLAG_RESP | RRPC_LLC_FLAG_ADD_LINK_REJ, ans.flags);
  EXPECT_EQ(RRPC_LLC_REJ_NO_ALT_PATH, ans.u.add_link.rej_rsn);
  Bytes b = Encode(ans);
  ASSERT_EQ(44u, b.size());
  EXPECT_EQ(0x02, b[0]);
  EXPECT_EQ(RRPC_LLC_REJ_NO_ALT_PATH, b[2] & 0x0f);
}

}  // namespace
