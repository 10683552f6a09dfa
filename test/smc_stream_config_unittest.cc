// smc_stream_config_unittest.cc - what rrpc/smc_stream.h takes from rrpc's SMC configuration
// (transport/smc/stream/config.c): a caller's ibdev / UEIDs win; left NULL, --smc_pnet's
// entry for the netdev names the RDMA device and port and --smc_ueid's list is offered and
// accepted; no pnet entry is -ENODEV before any socket or verbs work.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#ifdef RRPC_WITH_RDMA
#include <infiniband/verbs.h>
#endif

extern "C" {
#include "rrpc/rdma.h"
#include "rrpc/smc_stream.h"
#ifdef RRPC_WITH_RDMA
#include "transport/smc/stream/stream.h"
#endif
}

namespace {

// The process-wide configuration back to empty whatever a test set.
struct ConfigReset {
  ~ConfigReset() {
    rrpc_smc_set_ueids("", nullptr);
    rrpc_smc_set_pnet("", nullptr);
  }
};

#ifdef RRPC_WITH_RDMA
std::string Eid(const uint8_t* e) { return std::string(reinterpret_cast<const char*>(e), 32); }
std::string Padded(const char* s) { return (std::string(s) + std::string(32, ' ')).substr(0, 32); }

TEST(SmcStreamConfig, CallersDeviceWinsOnPortOne) {
  ConfigReset reset;
  ASSERT_EQ(0, rrpc_smc_set_pnet("eth7=mlx9:2", nullptr));
  rrpc_smc_stream_opts o{};
  o.ibdev = "rxe3";
  o.netdev = "eth7";
  rrpc_smc_stream_opts r{};
  uint8_t port = 0;
  ASSERT_EQ(0, rrpc__ss_resolve(&o, &r, &port));
  EXPECT_STREQ("rxe3", r.ibdev);
  EXPECT_EQ(1, port);
}

TEST(SmcStreamConfig, NullDeviceTakesThePnetEntryOfTheNetdev) {
  ConfigReset reset;
  ASSERT_EQ(0, rrpc_smc_set_pnet("eth0=rxe0,eth7=mlx9:2", nullptr));
  rrpc_smc_stream_opts o{};
  o.netdev = "eth7";
  o.gid_index = 3;
  o.timeout_ms = 1234;
  rrpc_smc_stream_opts r{};
  uint8_t port = 0;
  ASSERT_EQ(0, rrpc__ss_resolve(&o, &r, &port));
  EXPECT_STREQ("mlx9", r.ibdev);
  EXPECT_EQ(2, port);
  EXPECT_EQ(3, r.gid_index);  // the rest is the caller's
  EXPECT_EQ(1234, r.timeout_ms);
  o.netdev = "eth1";
  EXPECT_EQ(-ENODEV, rrpc__ss_resolve(&o, &r, &port));
  o.netdev = nullptr;
  EXPECT_EQ(-ENODEV, rrpc__ss_resolve(&o, &r, &port));
}

TEST(SmcStreamConfig, UeidsFromTheCallerElseTheFlag) {
  ConfigReset reset;
  ASSERT_EQ(0, rrpc_smc_set_ueids("FLAG-EID.1,FLAG-EID.2", nullptr));
  rrpc_smc_stream_opts o{};
  rrpc__smc_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  ASSERT_EQ(0, rrpc__ss_ueids(&o, &cfg));
  ASSERT_EQ(2, cfg.ueid_count);
  EXPECT_EQ(Padded("FLAG-EID.1"), Eid(cfg.ueids[0]));
  EXPECT_EQ(Padded("FLAG-EID.2"), Eid(cfg.ueids[1]));
  o.ueids = "OWN-EID";
  memset(&cfg, 0, sizeof(cfg));
  ASSERT_EQ(0, rrpc__ss_ueids(&o, &cfg));
  ASSERT_EQ(1, cfg.ueid_count);
  EXPECT_EQ(Padded("OWN-EID"), Eid(cfg.ueids[0]));
  o.ueids = "lower";
  EXPECT_EQ(-EINVAL, rrpc__ss_ueids(&o, &cfg));
}
#endif

// Without a device for the netdev the stream fails before it writes a byte on the socket.
TEST(SmcStreamConfig, NoPnetEntryFailsBeforeTheHandshake) {
  ConfigReset reset;
  int sv[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
  rrpc_smc_stream_opts o{};
  o.netdev = "eth7";
  o.gid_index = 1;
  o.ring_code = 2;
  o.timeout_ms = 100;
  rrpc_smc_stream* s = nullptr;
  uint32_t decline = 7;
#ifdef RRPC_WITH_RDMA
  const int want = -ENODEV;
#else
  const int want = -ENOSYS;
#endif
  EXPECT_EQ(want, rrpc_smc_stream_connect(sv[0], &o, &s, &decline));
  EXPECT_EQ(nullptr, s);
  EXPECT_EQ(0u, decline);
  char b;
  EXPECT_EQ(-1, recv(sv[1], &b, 1, MSG_DONTWAIT));
  EXPECT_EQ(EAGAIN, errno);
  close(sv[0]);
  close(sv[1]);
}

}  // namespace
