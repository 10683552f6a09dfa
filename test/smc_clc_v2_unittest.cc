// smc_clc_v2_unittest.cc - the SMC-Rv2 CLC encoders (transport/smc/clc.h,
// clc_v2.c): every CLC message of the Linux 6.1 captures in test/data/smc-r
// decodes and re-encodes byte-exact (v2 with the v2 encoders, the v1 Decline
// with the v1 one); a Proposal offering both versions; the kernel's decline
// codes; encoder limits.
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
#include "transport/smc/clc.h"
}

namespace {

using Bytes = std::vector<uint8_t>;

std::vector<std::string> ClcFiles() {
  std::ifstream f(rrpc_test::smc_data_dir() + "index.tsv");
  EXPECT_TRUE(f.good());
  std::vector<std::string> out;
  std::string line;
  std::getline(f, line);
  while (std::getline(f, line)) {
    std::vector<std::string> col;
    std::istringstream in(line);
    std::string c;
    while (std::getline(in, c, '\t')) col.push_back(c);
    if (col.size() >= 5 && col[4].compare(0, 4, "clc-") == 0) out.push_back(col[0] + "/" + col[1]);
  }
  return out;
}

Bytes Reencode(const rrpc__clc_msg& m) {
  Bytes out(RRPC_CLC_MAX_LEN);
  size_t len = 0;
  int rc = -1;
  switch (m.hdr.type) {
    case RRPC_CLC_PROPOSAL:
      rc = rrpc__clc_encode_proposal_v2(&m.u.proposal, out.data(), out.size(), &len);
      break;
    case RRPC_CLC_ACCEPT:
    case RRPC_CLC_CONFIRM:
      rc = rrpc__clc_encode_accept_v2(&m.u.accept, out.data(), out.size(), &len);
      break;
    default:
      rc = m.hdr.version >= 2
               ? rrpc__clc_encode_decline_v2(&m.u.decline, out.data(), out.size(), &len)
               : rrpc__clc_encode_decline(&m.u.decline, out.data(), out.size(), &len);
      break;
  }
  EXPECT_EQ(0, rc);
  out.resize(len);
  return out;
}

TEST(SmcClcV2, EveryCapturedMessageReencodesByteExact) {
  std::vector<std::string> files = ClcFiles();
  ASSERT_GE(files.size(), 8u);
  int v2 = 0;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    Bytes b = rrpc_test::load_smc_hex(f);
    rrpc__clc_msg m;
    ASSERT_EQ(0, rrpc__clc_decode(b.data(), b.size(), &m));
    v2 += m.hdr.version == 2;
    EXPECT_EQ(b, Reencode(m));
  }
  EXPECT_EQ(8, v2);  // 3 Proposals, 2 Accepts, 2 Confirms, 1 Decline
}

TEST(SmcClcV2, ProposalOfferingBothVersions) {
  rrpc__clc_proposal p;
  memset(&p, 0, sizeof(p));
  p.has_ip_area = 1;
  p.ipv4_subnet = 0x0a630000;
  p.ipv4_prefix_len = 24;
  p.has_v2_ext = 1;
  p.eid_count = 1;
  memset(p.eids[0], ' ', RRPC_CLC_EID_LEN);
  memcpy(p.eids[0], "RRPC-KSMC-TEST.99", 17);
  p.roce_v2_gid[15] = 2;
  Bytes out(RRPC_CLC_MAX_LEN);
  size_t len = 0;
  ASSERT_EQ(0, rrpc__clc_encode_proposal_v2(&p, out.data(), out.size(), &len));
  // fixed 40 + SMC-D 40 + IP 8 + extension 40 + one EID 32 + trailer 4
  EXPECT_EQ(164u, len);
  EXPECT_EQ(0x20 | RRPC_CLC_SMC_R << 2 | RRPC_CLC_SMC_R, out[7]);
  rrpc__clc_proposal q;
  ASSERT_EQ(0, rrpc__clc_decode_proposal(out.data(), len, &q));
  EXPECT_EQ(1, q.has_ip_area);
  EXPECT_EQ(0x0a630000u, q.ipv4_subnet);
  EXPECT_EQ(40, q.iparea_offset);
  ASSERT_EQ(1, q.has_v2_ext);
  EXPECT_EQ(0, memcmp(p.eids[0], q.eids[0], RRPC_CLC_EID_LEN));
  EXPECT_EQ(2, q.roce_v2_gid[15]);
  // A v2-only offer, as Linux makes on rxe: no IP area, typev1 N.
  p.has_ip_area = 0;
  ASSERT_EQ(0, rrpc__clc_encode_proposal_v2(&p, out.data(), out.size(), &len));
  EXPECT_EQ(156u, len);
  EXPECT_EQ(0x22, out[7]);
  EXPECT_EQ(28, out[51]);  // v2 extension offset
}

TEST(SmcClcV2, AcceptWithoutFirstContactIs108Bytes) {
  rrpc__clc_accept a;
  memset(&a, 0, sizeof(a));
  a.type = RRPC_CLC_CONFIRM;
  a.qpn = 0x11;
  a.rmbe_idx = 1;
  a.mtu = 3;
  a.gid_count = 1;  // ignored without first contact
  Bytes out(RRPC_CLC_MAX_LEN);
  size_t len = 0;
  ASSERT_EQ(0, rrpc__clc_encode_accept_v2(&a, out.data(), out.size(), &len));
  EXPECT_EQ(108u, len);
  EXPECT_EQ(0x20, out[7]);
  a.first_contact = 1;
  ASSERT_EQ(0, rrpc__clc_encode_accept_v2(&a, out.data(), out.size(), &len));
  EXPECT_EQ(180u, len);
  EXPECT_EQ(0x28, out[7]);
  rrpc__clc_accept b;
  ASSERT_EQ(0, rrpc__clc_decode_accept(out.data(), len, &b));
  EXPECT_EQ(1, b.gid_count);
  EXPECT_EQ(1, b.has_fce);
}

TEST(SmcClcV2, EncoderLimits) {
  Bytes out(RRPC_CLC_MAX_LEN);
  size_t len = 0;
  rrpc__clc_proposal p;
  memset(&p, 0, sizeof(p));
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_proposal_v2(&p, out.data(), out.size(), &len));
  p.has_v2_ext = 1;
  p.eid_count = RRPC_CLC_MAX_EIDS + 1;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_proposal_v2(&p, out.data(), out.size(), &len));
  p.eid_count = 1;
  p.ism_gid_count = 1;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_proposal_v2(&p, out.data(), out.size(), &len));
  p.ism_gid_count = 0;
  EXPECT_EQ(-ENOSPC, rrpc__clc_encode_proposal_v2(&p, out.data(), 100, &len));

  rrpc__clc_accept a;
  memset(&a, 0, sizeof(a));
  a.type = RRPC_CLC_ACCEPT;
  a.qpn = 0x1000000;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_accept_v2(&a, out.data(), out.size(), &len));
  a.qpn = 2;
  a.type = RRPC_CLC_DECLINE;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_accept_v2(&a, out.data(), out.size(), &len));
  a.type = RRPC_CLC_CONFIRM;
  a.first_contact = 1;
  a.gid_count = RRPC_CLC_MAX_GIDS + 1;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_accept_v2(&a, out.data(), out.size(), &len));
  a.gid_count = 0;
  EXPECT_EQ(-ENOSPC, rrpc__clc_encode_accept_v2(&a, out.data(), 107, &len));

  rrpc__clc_decline d;
  memset(&d, 0, sizeof(d));
  EXPECT_EQ(-ENOSPC, rrpc__clc_encode_decline_v2(&d, out.data(), 43, &len));
  d.os_type = 16;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_decline_v2(&d, out.data(), out.size(), &len));
}

// The kernel's 6.1 diagnosis codes each have their own text (the internal
// 0x0999000x details share "internal error").
TEST(SmcClcV2, KernelDeclineCodesHaveTexts) {
  const uint32_t codes[] = {
      RRPC_CLC_DECL_NOSMCDDEV, RRPC_CLC_DECL_NOISM2SUPP, RRPC_CLC_DECL_NOV2EXT,
      RRPC_CLC_DECL_NOV2DEXT,  RRPC_CLC_DECL_NOSEID,     RRPC_CLC_DECL_NOSMCD2DEV,
      RRPC_CLC_DECL_NOUEID,    RRPC_CLC_DECL_OPTUNSUPP,  RRPC_CLC_DECL_GETVLANERR,
      RRPC_CLC_DECL_ISMVLANERR, RRPC_CLC_DECL_NOACTLINK, RRPC_CLC_DECL_MAX_DMB,
      RRPC_CLC_DECL_NOROUTE,   RRPC_CLC_DECL_NOINDIRECT};
  for (uint32_t c : codes)
    EXPECT_STRNE("configuration or negotiation failure", rrpc__clc_decline_text(c)) << c;
  EXPECT_STREQ("no user EID in common", rrpc__clc_decline_text(0x03030008));
  EXPECT_STREQ("internal error", rrpc__clc_decline_text(RRPC_CLC_DECL_ERR_RTOK));
}

}  // namespace
