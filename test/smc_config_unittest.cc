// smc_config_unittest.cc - the UEID / pnet configuration for kernel SMC-R
// peers (transport/smc/smc_config.h, rrpc_smc_set_* in rrpc/rdma.h): the
// kernel's EID rules, list limits, EID negotiation order, pnet lookup, the
// process-wide copy, and the --smc_ueid / --smc_pnet flags.
#include <gtest/gtest.h>
#include <gflags/gflags.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "rrpc/cxx/flags.h"

extern "C" {
#include "rrpc/rdma.h"
#include "transport/smc/smc_config.h"
}

namespace {

std::string Eid(const uint8_t* e) { return std::string(reinterpret_cast<const char*>(e), 32); }
std::string Padded(const char* s) { return (std::string(s) + std::string(32, ' ')).substr(0, 32); }

TEST(SmcConfig, EidRulesAreTheKernels) {
  uint8_t out[RRPC_SMC_EID_LEN];
  ASSERT_EQ(0, rrpc__smc_ueid_pad("SMCR-TEST-EID.77", out));
  EXPECT_EQ(Padded("SMCR-TEST-EID.77"), Eid(out));
  EXPECT_EQ(0, rrpc__smc_ueid_pad("A  ", out));  // trailing blanks do not count
  EXPECT_EQ(0, rrpc__smc_ueid_pad(std::string(32, '9').c_str(), out));
  for (const char* bad : {"", "   ", "lower", "-LEAD", ".LEAD", "IN SIDE", "UNDER_SCORE",
                          "33CHARSXXXXXXXXXXXXXXXXXXXXXXXXXX"})
    EXPECT_EQ(-EINVAL, rrpc__smc_ueid_pad(bad, out)) << bad;
}

TEST(SmcConfig, UeidListLimits) {
  rrpc__smc_config c;
  memset(&c, 0, sizeof(c));
  const char* why = nullptr;
  ASSERT_EQ(0, rrpc__smc_parse_ueids("A1,B2.X,C-3", &c, &why));
  ASSERT_EQ(3, c.ueid_count);
  EXPECT_EQ(Padded("B2.X"), Eid(c.ueids[1]));
  EXPECT_EQ(-EINVAL, rrpc__smc_parse_ueids("A,B,C,D,E", &c, &why));
  EXPECT_NE(nullptr, strstr(why, "4"));
  EXPECT_EQ(-EINVAL, rrpc__smc_parse_ueids("A,A", &c, &why));
  EXPECT_EQ(-EINVAL, rrpc__smc_parse_ueids("A,,B", &c, &why));
  EXPECT_EQ(-EINVAL, rrpc__smc_parse_ueids("A,b", &c, &why));
  EXPECT_EQ(3, c.ueid_count);  // unchanged by the refusals
  ASSERT_EQ(0, rrpc__smc_parse_ueids("", &c, &why));
  EXPECT_EQ(0, c.ueid_count);
}

TEST(SmcConfig, ServerNegotiatesItsFirstCommonEid) {
  rrpc__smc_config c;
  memset(&c, 0, sizeof(c));
  const char* why = nullptr;
  ASSERT_EQ(0, rrpc__smc_parse_ueids("MINE.1,SHARED.2,SHARED.3", &c, &why));
  uint8_t peer[3][RRPC_SMC_EID_LEN];
  rrpc__smc_ueid_pad("OTHER", peer[0]);
  rrpc__smc_ueid_pad("SHARED.3", peer[1]);
  rrpc__smc_ueid_pad("SHARED.2", peer[2]);
  uint8_t out[RRPC_SMC_EID_LEN];
  ASSERT_EQ(0, rrpc__smc_ueid_match(&c, peer, 3, out));
  EXPECT_EQ(Padded("SHARED.2"), Eid(out));
  EXPECT_EQ(-ENOENT, rrpc__smc_ueid_match(&c, peer, 1, out));
  EXPECT_EQ(-ENOENT, rrpc__smc_ueid_match(&c, peer, 0, out));
}

TEST(SmcConfig, PnetEntries) {
  rrpc__smc_config c;
  memset(&c, 0, sizeof(c));
  const char* why = nullptr;
  ASSERT_EQ(0, rrpc__smc_parse_pnet("eth0=rxe0,eth1=mlx5_1:2", &c, &why));
  ASSERT_EQ(2, c.pnet_count);
  const rrpc__smc_pnet_entry* e = rrpc__smc_pnet_lookup(&c, "eth1");
  ASSERT_NE(nullptr, e);
  EXPECT_STREQ("mlx5_1", e->ibdev);
  EXPECT_EQ(2, e->port);
  EXPECT_EQ(1, rrpc__smc_pnet_lookup(&c, "eth0")->port);
  EXPECT_EQ(nullptr, rrpc__smc_pnet_lookup(&c, "eth2"));
  for (const char* bad : {"eth0", "=rxe0", "eth0=", "eth0=rxe0:", "eth0=rxe0:0", "eth0=rxe0:256",
                          "eth0=rxe0:1x", "eth0=a,eth0=b", "a=b,c=d,e=f,g=h,i=j,k=l,m=n,o=p,q=r"})
    EXPECT_EQ(-EINVAL, rrpc__smc_parse_pnet(bad, &c, &why)) << bad;
  EXPECT_EQ(2, c.pnet_count);
}

// The flags store into the process-wide copy as they are set; a bad value
// is refused and leaves the previous one.
TEST(SmcConfig, FlagsSetTheProcessWideCopy) {
  ASSERT_FALSE(gflags::SetCommandLineOption("smc_ueid", "RRPC-KSMC-TEST.99").empty());
  ASSERT_FALSE(gflags::SetCommandLineOption("smc_pnet", "eth0=rxe0:1").empty());
  rrpc__smc_config c;
  rrpc__smc_config_get(&c);
  ASSERT_EQ(1, c.ueid_count);
  EXPECT_EQ(Padded("RRPC-KSMC-TEST.99"), Eid(c.ueids[0]));
  ASSERT_EQ(1, c.pnet_count);
  EXPECT_STREQ("rxe0", c.pnet[0].ibdev);
  EXPECT_TRUE(gflags::SetCommandLineOption("smc_ueid", "bad eid").empty());
  EXPECT_EQ("RRPC-KSMC-TEST.99", FLAGS_smc_ueid);
  rrpc__smc_config_get(&c);
  EXPECT_EQ(1, c.ueid_count);
  const char* why = nullptr;
  EXPECT_EQ(-EINVAL, rrpc_smc_set_pnet("nonsense", &why));
  EXPECT_NE(nullptr, why);
  EXPECT_EQ(0, rrpc_smc_set_ueids("", nullptr));
  rrpc__smc_config_get(&c);
  EXPECT_EQ(0, c.ueid_count);
}

}  // namespace
