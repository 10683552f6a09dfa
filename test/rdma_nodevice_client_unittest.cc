// rdma_nodevice_client_unittest.cc - a client with use_rdma on a machine
// without a usable RDMA device (this host) speaks plain baidu_std from its
// first byte (issue 8: "falls back, never a closed connection"). Before, it
// opened with a CLC Decline, which a server that speaks neither CLC nor
// brpc's hello (brpc) closes on, failing every call. The server here is a
// raw socket that records the first bytes it receives and answers nothing.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "rrpc/rrpc.h"

namespace {

TEST(NoDeviceClient, OpensWithBaiduStdNotAClcDecline) {
  if (rrpc_rdma_available() == 1) GTEST_SKIP() << "this machine has an RDMA device";
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(0, bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof a));
  ASSERT_EQ(0, listen(lfd, 4));
  socklen_t len = sizeof a;
  ASSERT_EQ(0, getsockname(lfd, reinterpret_cast<sockaddr *>(&a), &len));
  int port = ntohs(a.sin_port);

  rrpc_channel_options o = {};
  o.use_rdma = 1;
  o.timeout_ms = 3000;
  rrpc_channel *ch = nullptr;
  int rc = rrpc_channel_new(("127.0.0.1:" + std::to_string(port)).c_str(), &o, &ch);
  if (rc == -RRPC_ENORDMA) {
    close(lfd);
    GTEST_SKIP() << "a build without RDMA";
  }
  ASSERT_EQ(0, rc);

  // The "server": the first 4 bytes of the first connection, then close
  // (bounded: 10 s for the connection and the bytes).
  std::string first;
  std::thread server([&] {
    pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return;
    int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) return;
    char b[4];
    size_t got = 0;
    while (got < sizeof b) {
      pollfd q = {fd, POLLIN, 0};
      if (poll(&q, 1, 10000) <= 0) break;
      ssize_t r = read(fd, b + got, sizeof b - got);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    first.assign(b, got);
    close(fd);
  });
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rq, *rs;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_new(&rs);
  rrpc_iobuf_append(rq, "hi", 2);
  // The call fails (the server closes); what matters is what it sent.
  (void)rrpc_channel_call(ch, "test.Echo", "Echo", c, rq, rs, nullptr, nullptr);
  server.join();
  EXPECT_EQ("PRPC", first) << "first bytes: " << std::hex << (first.empty() ? 0 : (unsigned char)first[0]);
  rrpc_iobuf_free(rq);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);
  rrpc_channel_free(ch);
  close(lfd);
}

} // namespace
