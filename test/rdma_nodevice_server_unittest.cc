// rdma_nodevice_server_unittest.cc - a server that offers RDMA (use_rdma) on
// a host without a usable device (this one) counts a fallback only for a
// peer that asked for RDMA. HTTP scrapes of its builtin pages and plain
// baidu_std clients never asked: they used to raise rrpc_rdma_fallbacks_total
// once per connection (7 -> 8 -> 9 over three curl /metrics), and
// /connections showed curl's own connection as "no SMC device". A peer that
// does ask (a CLC Decline, as a Linux SMC client without a device opens)
// is still counted. Skips in builds without RDMA and on hosts with a device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "rrpc/rrpc.h"
#include "test/common/hostile.h"
#include "test/common/test_util.h"

extern "C" {
#include "transport/clc_decline.h"
#include "transport/smc/clc.h"
}

namespace {

void echo_handler(void *, rrpc_server_call *call) {
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

uint64_t fallbacks() {
  rrpc_rdma_stats st;
  EXPECT_EQ(0, rrpc_rdma_get_stats(&st));
  return st.connections_fallback;
}

std::string curl(int port, const std::string &path) {
  return rrpc_test::command_output("curl -sS -m 5 'http://127.0.0.1:" + std::to_string(port) + path + "'");
}

TEST(NoDeviceServer, CountsOnlyPeersThatAskedForRdma) {
  rrpc_rdma_stats probe;
  if (rrpc_rdma_get_stats(&probe) == -RRPC_ENORDMA) GTEST_SKIP() << "a build without RDMA";
  if (rrpc_rdma_available() == 1) GTEST_SKIP() << "this machine has an RDMA device";
  rrpc_server_options o = {};
  o.use_rdma = 1;
  rrpc_server *srv = nullptr;
  ASSERT_EQ(0, rrpc_server_new(&o, &srv));
  ASSERT_EQ(0, rrpc_server_add_method(srv, "test.Svc", "Echo", echo_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_start(srv, "127.0.0.1:0"));
  int port = rrpc_server_port(srv);
  const uint64_t before = fallbacks();

  // Three scrapes: each connection is accepted, served and closed before
  // curl returns, so anything it counted has been counted.
  for (int i = 0; i < 3; i++) EXPECT_NE(std::string::npos, curl(port, "/metrics").find("rrpc_rdma_fallbacks_total"));
  EXPECT_EQ(before, fallbacks()) << "HTTP scrapes counted as RDMA fallbacks";

  // A plain baidu_std client (no use_rdma): its call completed, so the
  // server accepted and started its connection.
  rrpc_channel *ch = nullptr;
  ASSERT_EQ(0, rrpc_channel_new(("127.0.0.1:" + std::to_string(port)).c_str(), nullptr, &ch));
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *req;
  rrpc_iobuf_new(&req);
  rrpc_iobuf_append(req, "hi", 2);
  EXPECT_EQ(0, rrpc_channel_call(ch, "test.Svc", "Echo", c, req, nullptr, nullptr, nullptr));
  EXPECT_EQ(before, fallbacks()) << "a plain TCP client counted as an RDMA fallback";
  std::string conns = curl(port, "/connections");
  EXPECT_EQ(std::string::npos, conns.find("no SMC")) << conns;

  // A peer that asks (then gives up with a Decline) is counted, and its
  // connection shows the reason.
  int fd = rrpc_test::raw_connect(port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(0, rrpc__clc_send_decline(fd, RRPC_CLC_DECL_NOSMCDEV));
  EXPECT_TRUE(rrpc_test::wait_until([&] { return fallbacks() == before + 1; }, 5000)) << fallbacks() - before;
  conns = curl(port, "/connections");
  EXPECT_NE(std::string::npos, conns.find("no SMC")) << conns;
  close(fd);

  rrpc_iobuf_free(req);
  rrpc_controller_free(c);
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
}

// A server that does not offer RDMA still declines a peer's CLC, and shows
// the reason on that connection, but nothing of its own fell back: the
// counter stays. (The counter moves before the connection shows the reason,
// so once /connections shows it a wrong count would be there.)
TEST(NoDeviceServer, PlainServerCountsNoFallbackOfItsOwn) {
  rrpc_rdma_stats probe;
  if (rrpc_rdma_get_stats(&probe) == -RRPC_ENORDMA) GTEST_SKIP() << "a build without RDMA";
  rrpc_server_options o = {};
  rrpc_server *srv = nullptr;
  ASSERT_EQ(0, rrpc_server_new(&o, &srv));
  ASSERT_EQ(0, rrpc_server_add_method(srv, "test.Svc", "Echo", echo_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_start(srv, "127.0.0.1:0"));
  int port = rrpc_server_port(srv);
  const uint64_t before = fallbacks();
  int fd = rrpc_test::raw_connect(port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(0, rrpc__clc_send_decline(fd, RRPC_CLC_DECL_NOSMCDEV));
  EXPECT_TRUE(rrpc_test::wait_until([&] { return curl(port, "/connections").find("no SMC") != std::string::npos; }, 5000));
  EXPECT_EQ(before, fallbacks()) << "a plain server counted its peer's CLC as its own RDMA fallback";
  close(fd);
  rrpc_server_free(srv);
}

}  // namespace
